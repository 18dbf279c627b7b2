"""GPU preflight: run this before a multi-day job, and attach its JSON to a bug report.

    python -m wenet_udps.bin.gpu_check --corpus aishell --dtype bf16 --json exp/gpu_check.json
    python -m wenet_udps.bin.gpu_check --device cpu --config conf/tiny_en/train_conformer.yaml   # CI smoke test

Checks, each with a verdict in a printed table and in the JSON (with torch/triton/CUDA versions, device, date):
1. Triton UDPS kernel parity with the reference formula (output and every gradient) for fp32/fp16/bf16 and each mask
   kind, at the conf's head dim; on CPU fp32 only, in the Triton interpreter.
2. One training step (forward, backward, optimizer step) of the conf's real model, batch shrunk only, per attention
   variant (att_udps false and true), under autocast to ``--dtype``; over all visible GPUs with DDP (nccl) when
   there are several.
3. One decode (attention rescoring) per variant.
4. UDPS (Triton) vs flash SDPA: fwd+bwd time and peak memory at each ``--lengths`` T (CUDA only; fp16 with
   ``--dtype fp16``, else bf16).
Exits 1 if any check fails. The last line says ALL PASSED only when every check ran and passed; on a machine that
cannot run some (no CUDA: fp16/bf16 kernel parity, the speed check) it names them, "N checks skipped", and exits 0
(the CPU smoke test), and the JSON lists them under ``not_run``.
"""
import argparse
import datetime
import json
import os
import socket
from pathlib import Path
from typing import Dict, List, Optional

import torch

from wenet_udps.config import read_conf
from wenet_udps.utils import cli
from wenet_udps.utils.atomic import write_json, write_text
from wenet_udps.utils.schema import BATCH_SIZE_MAX, BATCH_WHY

ROOT = Path(__file__).resolve().parents[2]
CONF_NAME = "train_conformer.yaml"
FAILED = "fail"


def _lengths(text: str) -> List[int]:
    """``--lengths``: comma-separated sequence lengths, each >= 1."""
    return [cli.positive_int(t) for t in text.split(",") if t.strip()] or [cli.positive_int(text)]


def _args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = cli.ArgumentParser(prog="python -m wenet_udps.bin.gpu_check", description=__doc__.split("\n")[0])
    parser.add_argument("--device", type=cli.device, default="cuda" if torch.cuda.is_available() else "cpu",
                        help="cuda | cpu")
    conf = parser.add_mutually_exclusive_group()
    conf.add_argument("--corpus", default="aishell", help=f"checks conf/<corpus>/{CONF_NAME} (default aishell)")
    conf.add_argument("--config", type=cli.existing_file, help="a training conf instead of --corpus's")
    parser.add_argument("--dtype", choices=["fp32", "fp16", "bf16"], default=None,
                        help="autocast dtype of the training step (default bf16 on cuda, fp32 on cpu)")
    parser.add_argument("--lengths", type=_lengths, default=[512, 1024, 2048, 4096],
                        help="T of the speed/memory check, comma-separated (default 512,1024,2048,4096)")
    parser.add_argument("--batch", type=cli.int_range(1, BATCH_SIZE_MAX, why=BATCH_WHY), default=2,
                        help="utterances of the training step (per GPU)")
    parser.add_argument("--frames", type=cli.positive_int, default=400,
                        help="feature frames per utterance of the training step")
    parser.add_argument("--json", type=cli.output_file, help="write the report here")
    args = parser.parse_args(argv)
    args.config = Path(args.config) if args.config else ROOT / "conf" / args.corpus / CONF_NAME
    if not args.config.is_file():
        parser.error(f"no conf at {args.config}; valid --corpus: "
                     f"{', '.join(sorted(p.parent.name for p in (ROOT / 'conf').glob('*/' + CONF_NAME)))}")
    args.json = Path(args.json) if args.json else None
    args.dtype = args.dtype or ("bf16" if args.device == "cuda" else "fp32")
    return args


def _config(path: Path, udps: bool) -> Dict:
    """The conf as training builds it, without the data-dependent parts (CMVN stats; vocabulary if not set)."""
    config = read_conf(str(path))  # the one conf reader: base: resolved
    config.setdefault("input_dim", config.get("dataset_conf", {}).get("fbank_conf", {}).get("num_mel_bins", 80))
    config.setdefault("output_dim", 5000)
    config.pop("cmvn", None)
    config.pop("cmvn_conf", None)
    config["att_udps"] = udps
    return config


def _batch(config: Dict, utts: int, frames: int, device: torch.device, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    speech = torch.randn(utts, frames, config["input_dim"], generator=gen)
    lengths = torch.tensor([frames - (i * frames) // (4 * utts) for i in range(utts)])
    tokens = max(2, frames // 40)
    text = torch.randint(1, config["output_dim"] - 1, (utts, tokens), generator=gen)
    return speech.to(device), lengths.to(device), text.to(device), torch.full((utts,), tokens).to(device)


def model_checks(args, rank: int = 0, world: int = 1) -> List[Dict]:
    """A training step and a decode per variant on this rank's device (DDP when ``world`` > 1)."""
    from wenet_udps.model_builder import build_model
    from wenet_udps.train.scheduler import build_optimizer
    device = torch.device(f"cuda:{rank}" if args.device == "cuda" else "cpu")
    amp = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    checks = []
    for udps in (False, True):
        name = f"att_udps={str(udps).lower()}"
        config = _config(args.config, udps)
        torch.manual_seed(0)
        model = build_model(config).to(device)
        wrapped = model
        if world > 1:
            wrapped = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank], find_unused_parameters=True)
        optimizer = build_optimizer(config, model.parameters())
        scaler = torch.amp.GradScaler(device.type) if amp == torch.float16 else None
        batch = _batch(config, args.batch, args.frames, device, seed=rank)
        check = {"check": f"train step {name} ({args.dtype}, world {world})"}
        try:
            with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
                loss = wrapped(*batch)["loss"]
            (scaler.scale(loss) if scaler else loss).backward()
            grads_finite = all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
            scaler.step(optimizer) if scaler else optimizer.step()
            params_finite = all(torch.isfinite(p).all() for p in model.parameters())
            ok = bool(torch.isfinite(loss)) and grads_finite and params_finite
            checks.append({**check, "verdict": "pass" if ok else FAILED, "loss": loss.item(),
                           "grads_finite": bool(grads_finite), "params_finite": bool(params_finite)})
        except Exception as exc:  # noqa: BLE001 - reported as a failed check, the others still run
            checks.append({**check, "verdict": FAILED, "error": f"{type(exc).__name__}: {exc}"[:500]})
        check = {"check": f"decode {name} (attention_rescoring)"}
        try:
            model.eval()
            with torch.inference_mode(), torch.autocast(device.type, dtype=amp, enabled=amp is not None):
                hyps = model.decode(["attention_rescoring"], batch[0], batch[1], beam_size=4)["attention_rescoring"]
            checks.append({**check, "verdict": "pass" if len(hyps) == args.batch else FAILED, "utterances": len(hyps)})
        except Exception as exc:  # noqa: BLE001
            checks.append({**check, "verdict": FAILED, "error": f"{type(exc).__name__}: {exc}"[:500]})
    return checks


def _ddp_worker(rank: int, world: int, port: int, args, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    torch.distributed.init_process_group("nccl", rank=rank, world_size=world)
    try:
        checks = model_checks(args, rank, world)
    finally:
        torch.distributed.destroy_process_group()
    write_json(Path(out_dir, f"rank{rank}.json"), checks)


def distributed_model_checks(args) -> List[Dict]:
    """model_checks over every visible GPU (nccl) when there are several; a failure on any rank fails the check."""
    world = torch.cuda.device_count() if args.device == "cuda" else 1
    if world <= 1:
        return model_checks(args)
    import tempfile
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as out_dir:
        torch.multiprocessing.spawn(_ddp_worker, args=(world, port, args, out_dir), nprocs=world)
        ranks = [json.loads(Path(out_dir, f"rank{r}.json").read_text()) for r in range(world)]
    for check, *others in zip(*ranks):
        if any(o["verdict"] == FAILED for o in others):
            check.update(verdict=FAILED, other_ranks=others)
    return ranks[0]


def report(args, checks: List[Dict]) -> Dict:
    from wenet_udps.kernels.selfcheck import environment, self_check_results
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    device = torch.device(args.device)
    return {"date": datetime.date.today().isoformat(), "torch": torch.__version__, "triton": triton_version,
            "cuda": torch.version.cuda, "device": environment(device).split(", ")[2],
            "gpus": torch.cuda.device_count() if args.device == "cuda" else 0, "config": str(args.config),
            "dtype": args.dtype, "ok": not any(c["verdict"] == FAILED for c in checks), "checks": checks,
            "not_run": not_run(checks),
            "self_check": self_check_results()}  # the dispatch's own checks during the training steps (CUDA)


def not_run(checks: List[Dict]) -> List[str]:
    """The checks this machine could not run (verdict ``skipped (...)`` or ``not measured (...)``: fp16/bf16 kernel
    parity and the speed check without CUDA)."""
    return [c["check"] for c in checks if c["verdict"].startswith(("skipped", "not measured"))]


def verdict_line(result: Dict) -> str:
    """The last line: FAILED when a check failed; ALL PASSED only when every check ran and passed; otherwise the
    checks that passed and, by name, those not run (exit status 0: nothing that ran failed, but a skipped check is
    not a passed one)."""
    if not result["ok"]:
        return "FAILED: do not start a long job before this is understood"
    skipped = result["not_run"]
    if not skipped:
        return "ALL PASSED"
    return (f"PASSED {len(result['checks']) - len(skipped)} of {len(result['checks'])} checks; {len(skipped)} checks "
            f"skipped, not run on this machine ({result['device']}), so not known to work: {'; '.join(skipped)}")


def main(argv: Optional[List[str]] = None) -> int:
    args = _args(argv)
    if args.device == "cpu":
        # Triton runs on CPU tensors in its interpreter, selected when triton is first imported.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from wenet_udps.kernels import preflight
    config = _config(args.config, True)
    enc = config["encoder_conf"]
    heads, head_dim = enc["attention_heads"], enc["output_size"] // enc["attention_heads"]
    device = torch.device(args.device)
    checks = preflight.parity(device, head_dim, head_dim)
    checks += distributed_model_checks(args)
    # Flash SDPA takes fp16/bf16 only: an fp32 run is timed in bf16.
    speed_dtype = preflight.DTYPES["fp16" if args.dtype == "fp16" else "bf16"]
    checks += preflight.speed(device, speed_dtype, args.lengths, heads, head_dim)
    result = report(args, checks)
    width = max(len(c["check"]) for c in checks)
    print(f"gpu_check {result['date']}: torch {result['torch']}, triton {result['triton']}, CUDA {result['cuda']}, "
          f"{result['device']}, {args.config}")
    for c in checks:
        numbers = ", ".join(f"{k} {v:.3g}" for k, v in c.items() if isinstance(v, float))
        print(f"{c['check']:<{width}}  {c['verdict']:<22}  {c.get('error', numbers)}")
    print(verdict_line(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        write_text(args.json, json.dumps(result, indent=2) + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    cli.run_cli(main, "wenet_udps.bin.gpu_check")
