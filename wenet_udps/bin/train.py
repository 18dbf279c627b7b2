"""Train a WeNet-style CTC/attention model.

One process (CPU or one GPU):
    python -m wenet_udps.bin.train --config conf/train.yaml --train_data data/train/data.list \
        --cv_data data/dev/data.list --model_dir exp/conformer [--override att_udps=true ...]

DDP on one machine (4 GPUs; gloo and --device cpu for CPU processes):
    torchrun --standalone --nnodes=1 --nproc_per_node=4 -m wenet_udps.bin.train --device cuda \
        --dist_backend nccl --config ... --model_dir exp/conformer

Several machines (run on each, same --rdzv_id/--rdzv_endpoint):
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_id=job42 --rdzv_backend=c10d \
        --rdzv_endpoint=host0:29400 -m wenet_udps.bin.train --device cuda --dist_backend nccl ...

Resume exactly where a run stopped with ``--checkpoint exp/x/epoch_N.pt`` (or a ``step_N.pt`` written every
``save_interval`` steps); ``--checkpoint latest`` picks the newest complete checkpoint in ``--model_dir``.
Writes ``model_dir/train.yaml`` (the config with overrides, input_dim, output_dim, absolute paths) for decoding
and export, checkpoints (wenet_udps.train.checkpoint) and TensorBoard logs (tags in docs/design.md).
"""
import argparse
import copy
import logging
import os
import random
import sys
import time
from typing import Any, Dict, List, Optional

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from wenet_udps.dataset import init_dataset
from wenet_udps.model_builder import build_model
from wenet_udps.text import init_tokenizer
from wenet_udps.train.checkpoint import latest_checkpoint, link_final, load_checkpoint, rng_state, \
    save_checkpoint, set_rng_state
from wenet_udps.train.config import apply_overrides, finalize_config, load_config, save_yaml
from wenet_udps.train.distributed import DistInfo, cleanup, init_distributed
from wenet_udps.train.executor import AMP_DTYPES, Executor
from wenet_udps.train.scheduler import build_optimizer, build_scheduler
from wenet_udps.train.tensorboard import TensorboardLogger


def get_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="training YAML")
    p.add_argument("--train_data", required=True, help="data.list (raw) or shard list")
    p.add_argument("--cv_data", required=True, help="cross-validation data.list or shard list")
    p.add_argument("--model_dir", required=True, help="output directory (train.yaml, checkpoints)")
    p.add_argument("--data_type", default="raw", choices=["raw", "shard"])
    p.add_argument("--checkpoint", default=None, help="resume from this checkpoint ('latest': newest in model_dir)")
    p.add_argument("--override", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="change one config value (checked: key must exist, type must match); repeatable")
    p.add_argument("--num_workers", type=int, default=0, help="DataLoader workers per process")
    p.add_argument("--prefetch", type=int, default=2, help="batches prefetched per worker")
    p.add_argument("--symbol_table", default=None, help="units file (default: tokenizer_conf.symbol_table_path)")
    p.add_argument("--cmvn", default=None, help="global CMVN JSON (default: cmvn_conf.cmvn_file)")
    p.add_argument("--seed", type=int, default=None, help="default: the config's seed, else 777")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dist_backend", default=None, choices=["nccl", "gloo"],
                   help="default: nccl with --device cuda, else gloo")
    p.add_argument("--dtype", default="fp32", choices=list(AMP_DTYPES), help="fp16: autocast + GradScaler")
    p.add_argument("--use_amp", action="store_true", help="same as --dtype fp16")
    p.add_argument("--tensorboard_dir", default=None, help="default: MODEL_DIR/tensorboard")
    return p


def _cv_conf(dataset_conf: Dict[str, Any]) -> Dict[str, Any]:
    """Deterministic evaluation: no shuffling, augmentation, speed perturbation or dither."""
    conf = copy.deepcopy(dataset_conf)
    for key in ("speed_perturb", "spec_aug", "spec_sub", "spec_trim", "shuffle", "list_shuffle"):
        conf[key] = False
    for key in ("fbank_conf", "mfcc_conf"):
        if conf.get(key):
            conf[key]["dither"] = 0.0
    return conf


def _seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _needs_unused_params(model) -> bool:
    """DDP must look for unused parameters when a branch is off (CTC or decoder alone, bitransformer's
    right decoder with reverse_weight 0)."""
    if model.ctc_weight in (0.0, 1.0):
        return True
    return hasattr(model.decoder, "right_decoder") and model.reverse_weight == 0.0


def _gather_rng(info: DistInfo) -> List[Dict[str, Any]]:
    """Every rank's RNG state (rank order), so each rank resumes its own dropout stream."""
    state = rng_state()
    if not info.distributed:
        return [state]
    states: List[Any] = [None] * info.world_size
    dist.all_gather_object(states, state)
    return states


def main(argv: Optional[List[str]] = None) -> None:
    args = get_parser().parse_args(argv)
    dtype = "fp16" if args.use_amp else args.dtype
    backend = args.dist_backend or ("nccl" if args.device == "cuda" else "gloo")
    info = init_distributed(backend, args.device)
    logging.basicConfig(level=logging.INFO if info.is_main else logging.WARNING,
                        format=f"%(asctime)s [rank {info.rank}] %(levelname)s %(message)s", force=True)
    device = torch.device(f"cuda:{info.local_rank}" if args.device == "cuda" else "cpu")

    config = apply_overrides(load_config(args.config), args.override)
    config = finalize_config(config, symbol_table=args.symbol_table, cmvn=args.cmvn)
    os.makedirs(args.model_dir, exist_ok=True)
    if info.is_main:
        save_yaml(config, os.path.join(args.model_dir, "train.yaml"))

    seed = int(args.seed if args.seed is not None else config.get("seed", 777))
    _seed_all(seed)
    tokenizer = init_tokenizer(config)
    dataset_conf = dict(config.get("dataset_conf") or {})
    train_set = init_dataset(args.data_type, args.train_data, tokenizer, dataset_conf, partition=True)
    cv_set = init_dataset(args.data_type, args.cv_data, tokenizer, _cv_conf(dataset_conf), partition=True)
    # An explicit generator, reseeded per epoch, keeps DataLoader iterator creation off the global RNG, so a
    # resumed run draws the same dropout masks as an uninterrupted one.
    loader_gen = torch.Generator()
    loader_kwargs = dict(batch_size=None, num_workers=args.num_workers, pin_memory=args.device == "cuda",
                         generator=loader_gen)
    if args.num_workers > 0:
        loader_kwargs["prefetch_factor"] = args.prefetch
    train_loader = DataLoader(train_set, **loader_kwargs)
    cv_loader = DataLoader(cv_set, **loader_kwargs)

    model = build_model(config)
    num_params = sum(p.numel() for p in model.parameters())
    logging.info("model: %s encoder, %s decoder, att_udps %s, %.2fM parameters", config.get("encoder"),
                 config.get("decoder"), config.get("att_udps", False), num_params / 1e6)

    ckpt_path = args.checkpoint
    if ckpt_path == "latest":
        ckpt_path = latest_checkpoint(args.model_dir)
        if ckpt_path is None:
            logging.info("--checkpoint latest: no checkpoint in %s, starting from scratch", args.model_dir)
    ckpt: Dict[str, Any] = {}
    if ckpt_path:
        ckpt = load_checkpoint(ckpt_path)
        model.load_state_dict(ckpt["model"])
        logging.info("loaded %s", ckpt_path)
    model.to(device)
    optimizer = build_optimizer(config, model.parameters())
    scheduler = build_scheduler(config, optimizer)
    start_epoch, start_batch, step = 0, 0, 0
    if "optimizer" in ckpt:
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        step = int(ckpt["step"])
        if ckpt.get("batch_in_epoch") is not None:
            start_epoch, start_batch = int(ckpt["epoch"]), int(ckpt["batch_in_epoch"])
        else:
            start_epoch = int(ckpt["epoch"]) + 1
    elif ckpt:
        logging.warning("%s holds weights only: optimizer, scheduler and epoch start afresh", ckpt_path)
    # Same seed on every rank builds the same model; each rank then gets its own dropout stream.
    _seed_all(seed + info.rank)
    if "rng" in ckpt:
        states = ckpt["rng"]
        if len(states) != info.world_size:
            logging.warning("checkpoint has RNG states of %d ranks, this run has %d; using rank 0's",
                            len(states), info.world_size)
        set_rng_state(states[info.rank] if len(states) == info.world_size else states[0])

    ddp_model = model
    if info.distributed:
        ddp_model = DistributedDataParallel(model, device_ids=[info.local_rank] if args.device == "cuda" else None,
                                            find_unused_parameters=_needs_unused_params(model))
    tb = TensorboardLogger((args.tensorboard_dir or os.path.join(args.model_dir, "tensorboard"))
                           if info.is_main else None)
    executor: Optional[Executor] = None

    def save(tag: str, epoch: int, batch_in_epoch: Optional[int], cv: Optional[Dict[str, Any]],
             extra: Optional[Dict[str, Any]] = None) -> Optional[str]:
        rng = _gather_rng(info)
        if not info.is_main:
            return None
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                 "scheduler": scheduler.state_dict(), "scaler": executor.scaler.state_dict(), "rng": rng,
                 "epoch": epoch, "step": executor.step, "batch_in_epoch": batch_in_epoch}
        meta = {"epoch": epoch, "step": executor.step, "batch_in_epoch": batch_in_epoch,
                "lr": optimizer.param_groups[0]["lr"], "cv_loss": None if cv is None else cv.get("loss"),
                "cv_loss_ctc": None if cv is None else cv.get("loss_ctc"),
                "cv_loss_att": None if cv is None else cv.get("loss_att"), **(extra or {}), "config": config}
        path = save_checkpoint(args.model_dir, tag, state, meta)
        logging.info("saved %s", path)
        return path

    executor = Executor(model=ddp_model, optimizer=optimizer, scheduler=scheduler, config=config, device=device,
                        dist_info=info, dtype=dtype, tb=tb, step=step,
                        save_fn=lambda tag, epoch, batch, cv: save(tag, epoch, batch, cv))
    if "scaler" in ckpt:
        executor.scaler.load_state_dict(ckpt["scaler"])
    max_epoch = int(config["max_epoch"])
    last = None
    for epoch in range(start_epoch, max_epoch):
        train_set.set_epoch(epoch)
        cv_set.set_epoch(epoch)
        loader_gen.manual_seed(seed + epoch)
        t0 = time.time()
        stats = executor.train_epoch(train_loader, epoch, start_batch=start_batch if epoch == start_epoch else 0)
        cv = executor.cv(cv_loader)
        loss_text = " ".join(f"{k} {v:.4f}" for k, v in cv.items() if v is not None)
        logging.info("Epoch %d/%d done in %.1fs: %d batches, %d steps (total %d), %d batches skipped "
                     "(non-finite), %d fp16 overflow steps, %d bad audio files; cv %s", epoch + 1, max_epoch,
                     time.time() - t0, stats.batches, stats.steps, executor.step, stats.skipped_batches,
                     stats.overflow_steps, stats.bad_audio, loss_text)
        if info.is_main:
            tb.cv(epoch, cv)
            tb.epoch(epoch, stats.losses, model.udps_scales())
            tb.flush()
        train_losses = {f"train_{k}": v for k, v in stats.losses.items()}
        last = save(f"epoch_{epoch}", epoch, None, cv,
                    {**train_losses, "skipped_batches": stats.skipped_batches, "num_skipped": stats.bad_audio})
    if info.is_main and last is not None:
        link_final(args.model_dir, last)
        logging.info("training done; final.pt -> %s", os.path.basename(last))
    tb.close()
    cleanup()


if __name__ == "__main__":
    main(sys.argv[1:])
