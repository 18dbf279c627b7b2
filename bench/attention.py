"""Attention kernel benchmark: scaled-dot (torch SDPA, naive) vs UDPS (reference, fused, tiled compiled/eager,
dispatch, and the C++ CPU kernel where it builds).

Every implementation runs on the same inputs (B, H, T, d_k) with a key padding mask (lengths in [T/2, T]; with
``--no-padding`` every length is T and the mask all True, as the encoder passes it for a batch of equal lengths, so
no implementation can skip padded keys: equal work); repeats are interleaved (one
round runs every implementation once, in a shuffled order) so load from other processes hits all of them alike, and
the table reports the median time and its ratio to SDPA's median. Peak memory of forward+backward is measured in a
fresh subprocess per (implementation, T): peak RSS growth on CPU, ``torch.cuda.max_memory_allocated`` on GPU.

    python -m bench.attention --out docs/bench_attention.md          # T in 64 128 256 512 1024 2048
    python -m bench.attention --quick                                # T in 64 128, 3 repeats
    python -m bench.attention --threads 1 --clock cpu --no-memory    # steadier on a loaded machine
    python -m bench.attention --threads 1 --T 128 512 --profile      # where the time goes: top ops per impl
    python -m bench.attention --threads 1 --clock cpu --no-memory --no-padding --T 256 512 1024 2048 \
        --impls "sdpa (scaled-dot)" "udps cpp (ext)" --ext-from /path/to/other/checkout   # before/after, one run
    python -m bench.attention --threads 2 --neighbour suite --no-memory --batch 4 --T 300 \
        --impls "sdpa (scaled-dot)" "udps cpp (ext)"                # beside another job (issue 49)

``--neighbour`` (busyloop, matmul, suite: bench/_harness.py) times next to a process competing for the cores.
``--ext-from DIR`` adds "udps cpp (ext, DIR)": the C++ kernel as the checkout DIR builds it (its own build, named by
its path), timed in the same rounds as this checkout's, so a kernel change is compared before/after in one run.
"""
import argparse
import functools
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

ROOT = Path(__file__).resolve().parents[1]

from wenet_udps.utils.omp import short_spin  # noqa: E402

short_spin()  # as training processes run, set before torch loads OpenMP
import torch  # noqa: E402

from bench._harness import (NEIGHBOURS, interleaved_medians, make_inputs, neighbour, step, udps_call,  # noqa: E402
                      write_table)
from wenet_udps.kernels import cpu_tiled  # noqa: E402
from wenet_udps.kernels.cpu_ext import ext_available, udps_attention_ext  # noqa: E402
from wenet_udps.kernels.cpu_fused import udps_attention_fused  # noqa: E402
from wenet_udps.kernels.dispatch import scaled_dot_attention, udps_attention  # noqa: E402
from wenet_udps.kernels.reference import udps_attention_reference  # noqa: E402


def naive_scaled_dot(q, k, v, mask):
    """softmax(q k^T / sqrt(d_k)) v, one op per step (what WeNet's attention does)."""
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    keep = mask.unsqueeze(1)
    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    attn = torch.softmax(scores, dim=-1).masked_fill(~keep, 0.0)
    return torch.matmul(attn, v)


IMPLS: Dict[str, Callable] = {
    "sdpa (scaled-dot)": lambda q, k, v, mask: scaled_dot_attention(q, k, v, mask, 0.0),
    "naive scaled-dot": naive_scaled_dot,
    "udps reference": udps_call(udps_attention_reference),
    "udps fused (eager)": udps_call(udps_attention_fused),
    "udps tiled (compiled)": udps_call(cpu_tiled.udps_attention_tiled),
    "udps tiled (eager)": udps_call(functools.partial(cpu_tiled.udps_attention_tiled, compiled=False)),
    "udps (dispatch)": udps_call(udps_attention),
}
if ext_available():  # built on first use; needs a C++ compiler and ninja (else a warning says why)
    IMPLS["udps cpp (ext)"] = udps_call(udps_attention_ext)
BASELINE = "sdpa (scaled-dot)"


def inputs_for(t: int, args):
    """q, k, v, grad, mask of the benchmark's shapes (see _harness.make_inputs)."""
    return make_inputs(args.batch, args.heads, t, args.d_k, args.torch_dtype, args.device,
                       padding=not args.no_padding)[:5]


def add_ext_from(checkout: Path) -> str:
    """Registers the C++ kernel of another checkout (its kernels/cpu_ext.py builds its own csrc/) as an
    implementation; returns its name. The rest of the package is this checkout's. ValueError when it has none."""
    path = checkout.resolve() / "wenet_udps" / "kernels" / "cpu_ext.py"
    if not path.is_file():
        raise ValueError(f"--ext-from {checkout}: no {path}")
    spec = importlib.util.spec_from_file_location(f"cpu_ext_of_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not module.ext_available():
        raise ValueError(f"--ext-from {checkout}: its C++ kernel does not build (see the warning)")
    name = f"udps cpp (ext, {checkout})"
    IMPLS[name] = udps_call(module.udps_attention_ext)
    return name


def time_config(names: List[str], t: int, args, backward: bool) -> Dict[str, float]:
    """Median seconds per implementation, repeats interleaved in shuffled order."""
    return interleaved_medians(IMPLS, inputs_for(t, args), backward, args.repeats, seed=t, names=names,
                               clock=args.clock, cuda=args.device == "cuda")


def _status_mib(field: str) -> float:
    """A memory field of /proc/self/status (Linux), e.g. VmRSS (current) or VmHWM (peak since the last reset)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def measure_memory_child(name: str, t: int, args) -> float:
    """Peak memory growth (MiB) of one forward+backward, measured in this (fresh) process."""
    inputs = inputs_for(t, args)
    if args.device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step(IMPLS[name], *inputs, backward=True)
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2 ** 20
    # A warm-up run of the same shapes, so one-time allocations (libraries, compilation) do not count.
    step(IMPLS[name], *inputs, backward=True)
    # Reset the peak-RSS mark (ru_maxrss would carry the parent's peak over fork+exec).
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = _status_mib("VmRSS")
    step(IMPLS[name], *inputs, backward=True)
    return _status_mib("VmHWM") - base


def measure_memory(name: str, t: int, args) -> float:
    cmd = [sys.executable, "-m", "bench.attention", "--_memory", name, "--T", str(t), "--batch", str(args.batch),
           "--heads", str(args.heads), "--d-k", str(args.d_k), "--dtype", args.dtype, "--device", args.device,
           *(["--no-padding"] if args.no_padding else []),
           *(["--ext-from", str(args.ext_from)] if args.ext_from else [])]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])["peak_mib"]


def profile_line(name: str, t: int, args, backward: bool, calls: int = 10, top: int = 8) -> str:
    """One implementation's ops by self CPU time, ms per call (after a warm-up call): which passes cost what."""
    inputs = inputs_for(t, args)
    step(IMPLS[name], *inputs, backward=backward)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            step(IMPLS[name], *inputs, backward=backward)
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events) / calls / 1e3
    ops = ", ".join(f"{e.key.replace('aten::', '')} {e.self_cpu_time_total / calls / 1e3:.2f} ({e.count // calls})"
                    for e in events[:top])
    return f"| {t} | {'fwd+bwd' if backward else 'fwd'} | {name} | {total:.2f} | {ops} |"


def machine_line(args) -> str:
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    dev = torch.cuda.get_device_name() if args.device == "cuda" else f"{cpu}, {torch.get_num_threads()} threads"
    # libgomp's waiting decides what a parallel region costs on busy cores: part of the conditions.
    omp = ", ".join(f"{k}={os.environ[k]}" for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if k in os.environ)
    return (f"{dev} ({omp or 'libgomp default'}), neighbour {args.neighbour}; torch {torch.__version__}; "
            f"{args.dtype}; B={args.batch} H={args.heads} d_k={args.d_k}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--T", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 2048])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-k", dest="d_k", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default=None, help="float32 | bfloat16 | float16 (default: fp32 on CPU, "
                                                      "bf16 on GPU)")
    parser.add_argument("--impls", nargs="+", default=list(IMPLS), help=f"subset of: {list(IMPLS)}")
    parser.add_argument("--skip-reference-above", type=int, default=1024,
                        help="skip 'udps reference' and 'naive scaled-dot' timing above this T (they take minutes)")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's choice)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="cpu: process CPU time (steadier on a shared machine; use with --threads 1)")
    parser.add_argument("--neighbour", choices=list(NEIGHBOURS), default="none",
                        help="a process competing for the cores while timing (see the description)")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument("--no-padding", action="store_true",
                        help="every length T, the mask all True (equal work; default: lengths in [T/2, T])")
    parser.add_argument("--ext-from", type=Path, help="also time the C++ kernel of this checkout (before/after)")
    parser.add_argument("--quick", action="store_true", help="T in 64 128, 3 repeats")
    parser.add_argument("--out", type=Path, help="write the Markdown table here too")
    parser.add_argument("--profile", action="store_true",
                        help="instead of timing: torch.profiler's top ops (self CPU ms per call) of each --impls entry")
    parser.add_argument("--_memory", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    args.torch_dtype = getattr(torch, args.dtype)
    if args.threads:
        torch.set_num_threads(args.threads)
    args.clock_name, args.clock = args.clock, (time.process_time if args.clock == "cpu" else time.perf_counter)
    if args.ext_from:
        try:
            args.impls.append(add_ext_from(args.ext_from))
        except ValueError as exc:
            parser.error(str(exc))
    if args._memory:
        print(json.dumps({"peak_mib": measure_memory_child(args._memory, args.T[0], args)}))
        return
    unknown = [n for n in args.impls if n not in IMPLS]
    if unknown or BASELINE not in args.impls:
        parser.error(f"--impls must include {BASELINE!r}; unknown: {unknown}; valid: {list(IMPLS)}")
    if args.quick:
        args.T, args.repeats = [64, 128], 3
    if args.profile:
        for t in args.T:
            for backward in (False, True):
                for name in args.impls:
                    print(profile_line(name, t, args, backward), flush=True)
        return

    slow = {"udps reference", "naive scaled-dot"}
    masks = "no padding (every length T, mask all True)" if args.no_padding else "key padding mask, lengths in [T/2, T]"
    lines = [f"Machine: {machine_line(args)}; {masks}; {args.clock_name} clock, median "
             f"of {args.repeats} interleaved repeats; ratio = time / SDPA time; peak MiB = peak memory growth of one "
             "fwd+bwd (CPU: peak RSS in a fresh process).", "",
             "| T | implementation | fwd ms | fwd ratio | fwd+bwd ms | fwd+bwd ratio | fwd+bwd peak MiB |",
             "|---|---|---|---|---|---|---|"]
    for t in args.T:
        names = [n for n in args.impls if not (t > args.skip_reference_above and n in slow)]
        with neighbour(args.neighbour):
            fwd = time_config(names, t, args, backward=False)
            both = time_config(names, t, args, backward=True)
        for name in names:
            mem = "" if args.no_memory else f"{measure_memory(name, t, args):.0f}"
            lines.append(f"| {t} | {name} | {fwd[name] * 1e3:.1f} | {fwd[name] / fwd[BASELINE]:.2f} | "
                         f"{both[name] * 1e3:.1f} | {both[name] / both[BASELINE]:.2f} | {mem} |")
            print(lines[-1], flush=True)
    write_table(lines, args.out)


if __name__ == "__main__":
    main()
