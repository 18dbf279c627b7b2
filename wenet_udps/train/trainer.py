"""One training run of :mod:`wenet_udps.bin.train`: the checkpoint to resume (checked against the run's data
and conf), the datasets and loaders, the model in an :class:`~wenet_udps.train.executor.Executor`, the epoch loop
with its checkpoints, and ``final.pt``. The command line and the checked config are the caller's (:class:`Run`)."""
import argparse
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from wenet_udps.dataset import init_dataset
from wenet_udps.dataset.dataset import eval_dataset_conf
from wenet_udps.dataset.lists import unread_share
from wenet_udps.dataset.processor import most_batches
from wenet_udps.kernels import selfcheck
from wenet_udps.model_builder import attention_sites, build_model, ctc_output_frames, min_input_frames
from wenet_udps.text import init_tokenizer
from wenet_udps.text.base_tokenizer import units_fingerprint
from wenet_udps.train.checkpoint import fit_weights, gather_rng_states, link_final, load_checkpoint, \
    load_newest_valid, save_checkpoint, save_yaml, seed_all, set_rank_rng_state
from wenet_udps.train.distributed import DistInfo, broadcast_object, cleanup, needs_unused_params
from wenet_udps.train.executor import Executor
from wenet_udps.train.init_modules import init_modules
from wenet_udps.train.progress import progress_line, progress_warning
from wenet_udps.train.resume_check import checked_resume
from wenet_udps.train.run_dir import RunDirError, RunLock, claim, retire_later
from wenet_udps.train.scheduler import build_optimizer, build_scheduler, restore_with_config, warmup_shortfall
from wenet_udps.train.targets import TargetAdmission
from wenet_udps.train.tensorboard import TensorboardLogger
from wenet_udps.transformer.attention import FAMILIES, family_of
from wenet_udps.utils.cli import UserError, one_line


@dataclass
class Run:
    """What the steps of one training run share."""
    args: argparse.Namespace
    info: DistInfo
    device: torch.device
    config: Dict[str, Any]
    seed: int
    dtype: str
    run_id: str = ""
    ckpt_path: Optional[str] = None
    ckpt: Dict[str, Any] = field(default_factory=dict)
    data: Dict[str, Any] = field(default_factory=dict)  # resume_check.data_record of the lists
    resume_changes: List[Dict[str, Any]] = field(default_factory=list)  # forced resumes' differences
    lock: Optional[RunLock] = None   # rank 0's lock on the model dir (choose_checkpoint)


def resolve_checkpoint(run: Run) -> bool:
    """Load ``--checkpoint`` (``auto``: newest valid, falling back past broken ones) and, for a resume, check that
    its data and conf are the run's (``resume_check``: RunDirError unless ``--force``); True when it resumes."""
    args = run.args
    units = run.config["tokenizer_conf"].get("symbol_table_path")
    if args.checkpoint == "auto":
        run.ckpt_path, run.ckpt = load_newest_valid(args.model_dir, units=units)
        logging.info("--checkpoint auto: %s", f"resuming from {run.ckpt_path}" if run.ckpt_path
                     else f"no valid checkpoint in {args.model_dir}, starting afresh")
    elif args.checkpoint:
        run.ckpt_path, run.ckpt = args.checkpoint, load_checkpoint(args.checkpoint, verify=args.verify_checkpoint,
                                                                   units=units)
    resumes = "optimizer" in run.ckpt
    ran = ran_with(run)
    if args.check_resume:  # run.sh asks from one process: the process count is compared when the training starts
        ran.pop("world_size")
    if resumes:  # refused when its data or conf differ from the checkpoint's record (--force: recorded)
        run.resume_changes = checked_resume(run.ckpt_path, run.ckpt, run.config, run.data, ran, run.args.force)
    return resumes


def choose_checkpoint(run: Run) -> None:
    """Rank 0 locks and claims the dir, resolves the checkpoint (:func:`resolve_checkpoint`), sets the run id (a
    resumed run keeps its own) and writes train.yaml; every other rank gets its decision, the checkpoint itself or
    the refusal, by broadcast: the other ranks never read or write the model dir, which other nodes may not see
    (and a shared one could show them an older listing)."""
    args = run.args
    decision: Dict[str, Any] = {}
    if run.info.is_main:
        try:
            os.makedirs(args.model_dir, exist_ok=True)
            run.lock = RunLock(args.model_dir)
            resumes = resolve_checkpoint(run)
            claim(args.model_dir, run.ckpt.get("run_id") if resumes else None, args.force)
            if resumes:
                retire_later(args.model_dir, int(run.ckpt["step"]))
            save_yaml(run.config, os.path.join(args.model_dir, "train.yaml"))
            run_id = str(run.ckpt.get("run_id")) if resumes and run.ckpt.get("run_id") else uuid.uuid4().hex
            decision = {"path": run.ckpt_path, "ckpt": run.ckpt, "run_id": run_id}
        except Exception as e:
            broadcast_object({"refused": one_line(e)})
            raise
    decision = broadcast_object(decision)
    if "refused" in decision:
        raise UserError(f"rank 0 refused to train: {decision['refused']}")
    run.ckpt_path, run.ckpt, run.run_id = decision["path"], decision["ckpt"], decision["run_id"]


def ran_with(run: Run) -> Dict[str, Any]:
    """What the run sets besides its config, for the record (and the resume check)."""
    return {"dtype": run.dtype, "world_size": run.info.world_size}


def resume_state(run: Run, model, optimizer, scheduler) -> Tuple[int, int, int]:
    """Load the checkpoint's training state; returns (start epoch, start batch, step)."""
    ckpt = run.ckpt
    if "optimizer" not in ckpt:
        if ckpt:
            logging.warning("%s holds weights only: optimizer, scheduler and epoch start afresh", run.ckpt_path)
        return 0, 0, 0
    for key, (was, now) in restore_with_config(optimizer, scheduler, ckpt).items():
        logging.warning("resume: %s is %s in the config, %s in %s; using %s", key, now, was, run.ckpt_path, now)
    step = int(ckpt["step"])
    if ckpt.get("batch_in_epoch") is not None:
        return int(ckpt["epoch"]), int(ckpt["batch_in_epoch"]), step
    return int(ckpt["epoch"]) + 1, 0, step


def restore_rng(run: Run) -> None:
    """Same seed on every rank builds the same model; each rank then gets its own dropout stream."""
    seed_all(run.seed + run.info.rank)
    if run.ckpt.get("rng"):
        set_rank_rng_state(run.ckpt["rng"], run.info.rank, run.info.world_size)


def train_epochs(run: Run, executor: Executor, sets, loaders, loader_gen, start_epoch: int,
                 start_batch: int) -> Optional[str]:
    """The epoch loop; returns the last epoch checkpoint written (None when no epoch was left to train)."""
    train_set, cv_set = sets
    train_loader, cv_loader = loaders
    max_epoch = int(run.config["max_epoch"])
    last = None
    epoch_seconds = []   # this process's epochs: the progress line's estimate of the time left
    for epoch in range(start_epoch, max_epoch):
        train_set.set_epoch(epoch)
        cv_set.set_epoch(epoch)
        loader_gen.manual_seed(run.seed + epoch)
        t0 = time.time()
        stats = executor.train_epoch(train_loader, epoch, start_batch=start_batch if epoch == start_epoch else 0)
        train_line = train_set.check_tally(stats.data, f"epoch {epoch} train")
        resumed_within = epoch == start_epoch and start_batch > 0
        if stats.batches and not stats.steps and not resumed_within:  # an epoch's last partial accumulation is
            # dropped, as in WeNet: with accum_grad above the epoch's batches nothing would ever be learned
            raise UserError(f"epoch {epoch}: {stats.batches} batches and accum_grad {executor.accum_grad}: no "
                            f"optimizer step was taken; lower accum_grad or the batch size")
        cv, cv_data = executor.cv(cv_loader, epoch)
        cv_line = cv_set.check_tally(cv_data, f"epoch {epoch} cv")
        loss_text = " ".join(f"{k} {v:.4f}" for k, v in cv.items() if v is not None)
        epoch_seconds.append(time.time() - t0)
        logging.info("%s", train_line)
        logging.info("%s", cv_line)
        logging.info("Epoch %d (of 0..%d) done in %.1fs: %d batches, %d steps (total %d), %d batches skipped "
                     "(non-finite), %d fp16 overflow steps; cv %s", epoch, max_epoch - 1, epoch_seconds[-1],
                     stats.batches, stats.steps, executor.step, stats.skipped_batches, stats.overflow_steps,
                     loss_text)
        if run.info.is_main:
            logging.info("%s", progress_line(epoch, max_epoch, stats.losses, cv, epoch_seconds))
            executor.tb.cv(epoch, cv)
            executor.tb.epoch(epoch, stats.losses, executor.raw_model.udps_scales())
            executor.tb.flush()
        train_losses = {f"train_{k}": v for k, v in stats.losses.items()}
        last = save_state(run, executor, f"epoch_{epoch}", epoch, None, cv,
                          {**train_losses, "skipped_batches": stats.skipped_batches,
                           "train_data": stats.data.counts, "cv_data": cv_data.counts,
                           "udps_kernel_selfcheck": selfcheck.self_check_results()})
    return last


def finish(run: Run, last: Optional[str]) -> None:
    """Point final.pt at the last epoch's checkpoint; a resume past the last epoch reuses that epoch's file."""
    if not run.info.is_main:
        return
    model_dir = run.args.model_dir
    if last is None:
        max_epoch = int(run.config["max_epoch"])
        done = os.path.join(model_dir, f"epoch_{max_epoch - 1}.pt")
        if not os.path.isfile(done):
            raise RunDirError(f"nothing to train: the checkpoint {run.ckpt_path} is at epoch "
                              f"{run.ckpt.get('epoch')} and max_epoch is {max_epoch} (epochs 0..{max_epoch - 1}), "
                              f"but {done} does not exist; raise max_epoch to train on")
        last = done
        logging.info("all %d epochs were trained already", max_epoch)
    link_final(model_dir, last)
    checked = selfcheck.summary()   # empty when no Triton call was made (a CPU run): nothing to report then
    logging.info("training done; final.pt -> %s%s", os.path.basename(last),
                 f"; UDPS Triton kernel self-check: {checked}" if checked else "")


def save_state(run: Run, executor: Executor, tag: str, epoch: int, batch_in_epoch: Optional[int],
               cv: Optional[Dict[str, Any]], extra: Optional[Dict[str, Any]] = None) -> Optional[str]:
    """Write checkpoint ``tag`` (model, optimizer, scheduler, scaler, every rank's RNG) and its metadata yaml;
    every rank must call it (the RNG states are gathered), rank 0 writes. Returns the path (None off rank 0)."""
    rng = gather_rng_states(run.info.distributed, run.info.world_size)
    if not run.info.is_main:
        return None
    optimizer = executor.optimizer
    state = {"model": executor.raw_model.state_dict(), "optimizer": optimizer.state_dict(),
             "scheduler": executor.scheduler.state_dict(), "scaler": executor.scaler.state_dict(), "rng": rng,
             "epoch": epoch, "step": executor.step, "batch_in_epoch": batch_in_epoch, "run_id": run.run_id}
    cv = cv or {}
    meta = {"epoch": epoch, "step": executor.step, "batch_in_epoch": batch_in_epoch, "run_id": run.run_id,
            "lr": optimizer.param_groups[0]["lr"], "cv_loss": cv.get("loss"), "cv_loss_ctc": cv.get("loss_ctc"),
            "cv_loss_att": cv.get("loss_att"), **(extra or {}),
            "units": units_fingerprint(run.config["tokenizer_conf"]["symbol_table_path"]), "config": run.config,
            "data": run.data, **ran_with(run), **({"resume_changes": run.resume_changes} if run.resume_changes else {})}
    path = save_checkpoint(run.args.model_dir, tag, state, meta)
    logging.info("saved %s", path)
    return path


def build_data(run: Run):
    """The train and cv datasets (cv made deterministic) and their DataLoaders, sharing one generator."""
    args = run.args
    tokenizer = init_tokenizer(run.config)
    dataset_conf = dict(run.config.get("dataset_conf") or {})
    min_frames = min_input_frames(run.config)
    admission = TargetAdmission(tokenizer, ctc_output_frames(run.config))
    train_set = init_dataset(args.data_type, args.train_data, tokenizer, dataset_conf, partition=True,
                             min_frames=min_frames, admission=admission)
    cv_set = init_dataset(args.data_type, args.cv_data, tokenizer, eval_dataset_conf(dataset_conf), partition=True,
                          min_frames=min_frames, admission=admission)
    unread = unread_share(len(train_set.items), run.info.world_size) if run.info.distributed else 0.0
    what = f"{args.train_data} lists {len(train_set.items)} {'utterances' if args.data_type == 'raw' else 'shards'}"
    if unread >= 1.0:
        raise UserError(f"{what} for {run.info.world_size} ranks: a rank without any would end every epoch before "
                        f"a step; write more, smaller shards (run.sh --num_utts_per_shard)")
    if unread > 0.05:
        logging.warning("%s for %d ranks: each epoch leaves about %.0f%% of them unread (ranks get one more or one "
                        "less, and an epoch ends at the first rank out of batches); write more, smaller shards "
                        "(run.sh --num_utts_per_shard)", what, run.info.world_size, 100 * unread)
    # An explicit generator, reseeded per epoch, keeps DataLoader iterator creation off the global RNG, so a
    # resumed run draws the same dropout masks as an uninterrupted one.
    loader_gen = torch.Generator()
    loader_kwargs = dict(batch_size=None, num_workers=args.num_workers, pin_memory=args.device == "cuda",
                         generator=loader_gen)
    if args.num_workers > 0:
        loader_kwargs["prefetch_factor"] = args.prefetch
    return (train_set, cv_set), (DataLoader(train_set, **loader_kwargs), DataLoader(cv_set, **loader_kwargs)), \
        loader_gen


def build_executor(run: Run) -> Tuple[Executor, int, int]:
    """The model (checkpoint weights loaded, DDP-wrapped when distributed), optimizer, scheduler and scaler with
    the checkpoint's state, in an Executor; returns it with the start epoch and batch."""
    args, info, config = run.args, run.info, run.config
    model = build_model(config)
    built = {family_of(t) for t in attention_sites(model).values()}
    logging.info("model: %s encoder, %s decoder, attention families %s, %.2fM parameters", config.get("encoder"),
                 config.get("decoder"), ", ".join(f for f in FAMILIES if f in built),
                 sum(p.numel() for p in model.parameters()) / 1e6)
    for family in FAMILIES.values():
        if family.conf_key and config.get(family.conf_key) and family.name not in built:
            # kept, not refused: run.sh --families trains one YAML in every family
            logging.warning("%s is unused: this model has no %s attention", family.conf_key, family.display)
    if run.ckpt:
        fit_weights(model, run.ckpt["model"], run.ckpt_path)
        logging.info("loaded %s%s", run.ckpt_path, f" (--enc_init {args.enc_init} is for a new run: not used)"
                     if args.enc_init else "")
    elif args.enc_init:
        init_modules(model, args.enc_init, args.enc_init_mods, verify=args.verify_checkpoint)
    model.to(run.device)
    optimizer = build_optimizer(config, model.parameters())
    scheduler = build_scheduler(config, optimizer)
    start_epoch, start_batch, step = resume_state(run, model, optimizer, scheduler)
    restore_rng(run)
    ddp_model = model
    if info.distributed:
        ddp_model = DistributedDataParallel(model, device_ids=[info.local_rank] if args.device == "cuda" else None,
                                            find_unused_parameters=needs_unused_params(model))
    tb = TensorboardLogger((args.tensorboard_dir or os.path.join(args.model_dir, "tensorboard"))
                           if info.is_main else None)
    executor = Executor(model=ddp_model, optimizer=optimizer, scheduler=scheduler, config=config,
                        device=run.device, dist_info=info, dtype=run.dtype, tb=tb, step=step)
    executor.save_fn = lambda tag, epoch, batch, cv: save_state(run, executor, tag, epoch, batch, cv)
    if "scaler" in run.ckpt:
        executor.scaler.load_state_dict(run.ckpt["scaler"])
    return executor, start_epoch, start_batch


def warn_of_the_schedule(run: Run, train_set) -> None:
    """Before the first epoch: a warm-up longer than the run (scheduler.warmup_shortfall), from the utterances of a
    raw list (a shard list does not say how many it holds) over this process's share."""
    if not run.info.is_main or train_set.data_type != "raw":
        return
    utts = len(range(run.info.rank, len(train_set.items), run.info.world_size))
    batches = most_batches(utts, (run.config.get("dataset_conf") or {}).get("batch_conf"), run.args.num_workers)
    shortfall = warmup_shortfall(run.config, batches)
    if shortfall:
        logging.warning("%s", progress_warning(shortfall))


def train(run: Run) -> None:
    """Set up (checkpoint choice, data, model), the epoch loop, finish."""
    choose_checkpoint(run)
    seed_all(run.seed)
    sets, loaders, loader_gen = build_data(run)
    warn_of_the_schedule(run, sets[0])
    executor, start_epoch, start_batch = build_executor(run)
    last = train_epochs(run, executor, sets, loaders, loader_gen, start_epoch, start_batch)
    finish(run, last)
    executor.tb.close()
    cleanup()
