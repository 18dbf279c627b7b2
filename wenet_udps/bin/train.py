"""Train a WeNet-style CTC/attention model.

One process (CPU or one GPU):
    python -m wenet_udps.bin.train --config conf/train.yaml --train_data data/train/data.list \
        --cv_data data/dev/data.list --model_dir exp/conformer [--override att_udps=true ...]

DDP on one machine (4 GPUs; gloo and --device cpu for CPU processes):
    torchrun --standalone --nnodes=1 --nproc_per_node=4 -m wenet_udps.bin.train --device cuda \
        --dist_backend nccl --config ... --model_dir exp/conformer

Several machines (run on each, NODE_RANK 0 on host0, which writes the checkpoints; run.sh --num_nodes does this):
    torchrun --nnodes=2 --nproc_per_node=8 --node_rank=NODE_RANK --rdzv_backend=static \
        --rdzv_endpoint=host0:29400 --max_restarts=0 -m wenet_udps.bin.train --device cuda --dist_backend nccl ...
Every rank checks at start-up that all ranks have the same config, data lists and code (wenet_udps.train.
same_settings); rank 0 alone reads and writes --model_dir and sends the others the checkpoint it resumes from. A
lost rank stops the others within --dist_timeout seconds, naming it (wenet_udps.train.distributed).

Resume exactly where a run stopped with ``--checkpoint exp/x/epoch_N.pt`` (or a ``step_N.pt`` written every
``save_interval`` steps). ``--checkpoint auto`` resumes from the newest valid epoch_N.pt/step_N.pt in
``--model_dir`` (a truncated or modified one is skipped with a warning for the next older one) and starts afresh
when there is none: the one command to start or continue a run.
The experiment dir is locked while training (a second run on it is refused, naming the pid), and a new run refuses
a dir holding another run's checkpoints unless it resumes that run or ``--force`` deletes them.
Fine-tuning: ``--enc_init CKPT [--enc_init_mods encoder.]`` starts a new run with those modules copied from another
model (e.g. a mini LibriSpeech encoder for FSDD's digits), the rest fresh (wenet_udps.train.init_modules).
Epochs are numbered from 0 everywhere (logs, epoch_N.pt, TensorBoard), as WeNet numbers them.
Writes ``model_dir/train.yaml`` (the config with overrides, input_dim, output_dim, absolute paths) for decoding
and export, checkpoints (wenet_udps.train.checkpoint) and TensorBoard logs (tags in docs/design.md).
"""
import argparse
import logging
from typing import List, Optional

from wenet_udps.utils.omp import short_spin

short_spin()  # before torch loads OpenMP (python -m wenet_udps.bin.train imports nothing that loads it earlier)
import torch  # noqa: E402

from wenet_udps.config import finalize_config, load_config  # noqa: E402
from wenet_udps.train.checkpoint import add_verify_flag  # noqa: E402
from wenet_udps.train.distributed import DEFAULT_TIMEOUT, init_distributed, peer_failure  # noqa: E402
from wenet_udps.train.executor import AMP_DTYPES  # noqa: E402
from wenet_udps.train.init_modules import parse_prefixes  # noqa: E402
from wenet_udps.train.resume_check import data_record  # noqa: E402
from wenet_udps.train.same_settings import check_same_settings, settings_record  # noqa: E402
from wenet_udps.train.trainer import Run, resolve_checkpoint, train  # noqa: E402
from wenet_udps.utils import cli  # noqa: E402
from wenet_udps.utils.cli import run_cli  # noqa: E402
from wenet_udps.utils.schema import SEED_MAX, SEED_WHY  # noqa: E402


def _prefixes(text: str) -> List[str]:
    try:
        return parse_prefixes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def get_parser() -> cli.ArgumentParser:
    p = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, type=cli.existing_file, help="training YAML")
    p.add_argument("--train_data", required=True, type=cli.existing_file, help="data.list (raw) or shard list")
    p.add_argument("--cv_data", required=True, type=cli.existing_file, help="cross-validation data.list or shard list")
    p.add_argument("--model_dir", required=True, type=cli.output_dir, help="output directory (train.yaml, checkpoints)")
    p.add_argument("--data_type", default="raw", choices=["raw", "shard"])
    p.add_argument("--checkpoint", default=None, type=cli.existing_file_or("auto"),
                   help="resume from this checkpoint; 'auto': the newest valid epoch_N.pt/step_N.pt in --model_dir "
                        "(none: start afresh)")
    p.add_argument("--enc_init", default=None, type=cli.existing_file,
                   help="start a new run from this checkpoint's --enc_init_mods (fine-tuning; a resumed run "
                        "ignores it)")
    p.add_argument("--enc_init_mods", default="encoder.", type=_prefixes,
                   help="comma-separated module-name prefixes copied from --enc_init (default: encoder.)")
    p.add_argument("--force", action="store_true",
                   help="delete the checkpoints of another run in --model_dir instead of refusing to start; resume "
                        "although the data or conf differ from the checkpoint's (the differences are recorded)")
    p.add_argument("--override", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="change one config value (checked: key must exist, type must match); repeatable")
    p.add_argument("--num_workers", type=cli.workers_int, default=0, help="DataLoader workers per process")
    p.add_argument("--prefetch", type=cli.positive_int, default=2, help="batches prefetched per worker")
    p.add_argument("--symbol_table", default=None, type=cli.existing_file,
                   help="units file (default: tokenizer_conf.symbol_table_path)")
    p.add_argument("--cmvn", default=None, type=cli.existing_file,
                   help="global CMVN JSON (default: cmvn_conf.cmvn_file)")
    p.add_argument("--seed", type=cli.int_range(0, SEED_MAX, why=SEED_WHY), default=None,
                   help="default: the config's seed, else 777")
    p.add_argument("--device", default="cpu", type=cli.device, help="cpu | cuda")
    p.add_argument("--dist_backend", default=None, choices=["nccl", "gloo"],
                   help="default: nccl with --device cuda, else gloo")
    p.add_argument("--dist_timeout", type=cli.float_range(0.0, low_open=True), default=DEFAULT_TIMEOUT,
                   help="seconds a collective waits for the slowest rank before the run stops, naming a lost rank "
                        "(default: %(default)g)")
    p.add_argument("--dtype", default="fp32", choices=list(AMP_DTYPES), help="fp16: autocast + GradScaler")
    p.add_argument("--use_amp", action="store_true", help="same as --dtype fp16")
    p.add_argument("--tensorboard_dir", default=None, type=cli.output_dir, help="default: MODEL_DIR/tensorboard")
    p.add_argument("--check_resume", action="store_true", help="only check that --checkpoint may be resumed with "
                   "this data and conf (max_epoch may change; run.sh stage 4 asks first), write nothing, exit")
    add_verify_flag(p)
    return p


def set_up(args: argparse.Namespace) -> Run:
    """Distributed init, logging, the checked config (written to model_dir/train.yaml by rank 0, in
    :func:`wenet_udps.train.trainer.choose_checkpoint`)."""
    dtype = "fp16" if args.use_amp else args.dtype
    backend = args.dist_backend or ("nccl" if args.device == "cuda" else "gloo")
    info = init_distributed(backend, args.device, args.dist_timeout)
    logging.basicConfig(level=logging.INFO if info.is_main else logging.WARNING,
                        format=f"%(asctime)s [rank {info.rank}] %(levelname)s %(message)s", force=True)
    device = torch.device(f"cuda:{info.local_rank}" if args.device == "cuda" else "cpu")
    config = finalize_config(load_config(args.config, args.override), symbol_table=args.symbol_table,
                             cmvn=args.cmvn)
    seed = int(args.seed if args.seed is not None else config["seed"])
    config["seed"] = seed  # the record (train.yaml, every checkpoint's yaml) is the seed that ran
    cmvn = (config.get("cmvn_conf") or {}).get("cmvn_file") if config.get("cmvn") else None
    return Run(args=args, info=info, device=device, config=config, seed=seed, dtype=dtype,
               data=data_record(args.train_data, args.cv_data, cmvn))


def main(argv: Optional[List[str]] = None) -> None:
    args = get_parser().parse_args(argv)
    run = set_up(args)
    if args.check_resume:
        logging.info("--check_resume: %s", "resuming is allowed" if resolve_checkpoint(run) else "nothing to resume")
        return
    if run.info.distributed:  # every rank trains the same thing or none does: checked before anything is written
        check_same_settings(settings_record(run.config, run.data, {"dtype": run.dtype, "data_type": args.data_type,
                                                                   "num_workers": args.num_workers}))
    try:
        train(run)
    except RuntimeError as e:  # a failed collective: name the rank that is gone, if one is
        lost = peer_failure(run.info, e)
        if lost is None:
            raise
        raise lost from e
    finally:
        if run.lock is not None:
            run.lock.release()


if __name__ == "__main__":
    run_cli(main, "wenet_udps.bin.train")
