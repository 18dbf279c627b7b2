"""Does compiling the CPU tiled UDPS kernel pay at small T? Per-call times and the one-time compile cost.

For each T (shapes of the main job by default: B=8 utterances, H=4 heads, d_k=32), per attention call: SDPA
(scaled-dot), the UDPS reference formula (eager, what the dispatch runs below ``TILED_MIN_SCORES``), and the tiled
kernel compiled and eager; forward+backward (training) and forward under no_grad (decoding); median of interleaved
repeats. The compile cost is the first compiled fwd+bwd call of a fresh process minus a steady one, with an empty
inductor cache ("cold", a new machine) and again with the cache it left ("warm", every later process: decode runs,
resumed training). "break-even calls" = compile cost / (reference - compiled) per call: a process must make that many
such calls before compiling pays.

    python -m bench.compile_cost --out docs/bench_compile_cost.md
    python -m bench.compile_cost --T 64 128 --repeats 5 --no-compile-cost
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict

ROOT = Path(__file__).resolve().parents[1]

from wenet_udps.utils.omp import short_spin  # noqa: E402

short_spin()  # as training processes run, set before torch loads OpenMP
import torch  # noqa: E402

from bench._harness import interleaved_medians, make_inputs, step, udps_call, write_table  # noqa: E402
from wenet_udps.kernels.cpu_tiled import udps_attention_tiled  # noqa: E402
from wenet_udps.kernels.dispatch import TILED_MIN_SCORES  # noqa: E402
from wenet_udps.kernels.reference import udps_attention_reference  # noqa: E402
from wenet_udps.kernels.scaled_dot import scaled_dot_attention  # noqa: E402

IMPLS: Dict[str, Callable] = {
    "sdpa (scaled-dot)": lambda q, k, v, mask: scaled_dot_attention(q, k, v, mask, 0.0),
    "udps reference": udps_call(udps_attention_reference),
    "udps tiled compiled": udps_call(udps_attention_tiled),
    "udps tiled eager": udps_call(udps_attention_tiled, compiled=False),
}


def call(fn, inputs, backward: bool) -> float:
    """Seconds of one call (the first compiles)."""
    start = time.perf_counter()
    step(fn, *inputs, backward=backward)
    return time.perf_counter() - start


def per_call(t: int, args, backward: bool) -> Dict[str, float]:
    inputs = make_inputs(args.batch, args.heads, t, args.d_k)[:5]
    return interleaved_medians(IMPLS, inputs, backward, args.repeats, seed=t)


def compile_child(t: int, args) -> float:
    """First compiled fwd+bwd call minus the median of later ones, in this fresh process."""
    inputs = make_inputs(args.batch, args.heads, t, args.d_k)[:5]
    fn = IMPLS["udps tiled compiled"]
    first = call(fn, inputs, True)
    steady = statistics.median(call(fn, inputs, True) for _ in range(5))
    return first - steady


def compile_cost(t: int, args, cache_dir: str) -> float:
    cmd = [sys.executable, "-m", "bench.compile_cost", "--_compile", "--T", str(t), "--batch", str(args.batch),
           "--heads", str(args.heads), "--d-k", str(args.d_k)]
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--T", type=int, nargs="+", default=[64, 100, 150, 250])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-k", dest="d_k", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, help="torch.set_num_threads")
    parser.add_argument("--no-compile-cost", dest="compile_cost", action="store_false")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--_compile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args._compile:
        print(json.dumps({"seconds": compile_child(args.T[0], args)}))
        return
    lines = [f"torch {torch.__version__}, {torch.get_num_threads()} threads; B={args.batch} H={args.heads} "
             f"d_k={args.d_k}, key padding mask; per call: median of {args.repeats} interleaved repeats; "
             f"scores per call = B*H*T^2 (the dispatch compiles at >= {TILED_MIN_SCORES}).", "",
             "| T | scores per call | pass | sdpa ms | udps reference ms | tiled compiled ms | tiled eager ms | "
             "compile cold s | compile warm s | break-even calls (cold / warm) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for t in args.T:
        cost = ("", "")
        if args.compile_cost:
            with tempfile.TemporaryDirectory() as cache:
                cost = (compile_cost(t, args, cache), compile_cost(t, args, cache))
        for backward in (True, False):
            ms = {name: s * 1e3 for name, s in per_call(t, args, backward).items()}
            saving = (ms["udps reference"] - ms["udps tiled compiled"]) / 1e3
            even = "never" if saving <= 0 else (
                " / ".join(f"{c / saving:.0f}" for c in cost) if args.compile_cost else "")
            costs = [f"{c:.1f}" if c != "" else "" for c in cost] if backward else ["", ""]
            lines.append(f"| {t} | {args.batch * args.heads * t * t} | {'fwd+bwd' if backward else 'fwd (no_grad)'} | "
                         f"{ms['sdpa (scaled-dot)']:.2f} | {ms['udps reference']:.2f} | "
                         f"{ms['udps tiled compiled']:.2f} | {ms['udps tiled eager']:.2f} | {costs[0]} | {costs[1]} | "
                         f"{even} |")
            print(lines[-1], flush=True)
    write_table(lines, args.out)


if __name__ == "__main__":
    main()
