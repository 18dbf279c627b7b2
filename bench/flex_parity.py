"""FlexAttention with a UDPS score_mod vs the reference formula: forward error, whether backward runs, and speed.

The score_mod divides by (|q_i| + |k_j|)^2 from norm vectors captured outside; alpha is a constant here. On CPU
(torch 2.13) the forward matches, the backward raises, and the compiled forward (inductor's C++ flex template) is
slower than the reference formula even without a score_mod: FlexAttention is a speed reference for the GPU
(bench/attention_gpu.py), not a CPU path (docs/benchmarks.md).

    python bench/flex_parity.py                      # B=2 H=4 T=128 d=64 on the CPU
    python bench/flex_parity.py --device cuda --T 1024
    python bench/flex_parity.py --time --T 64 128 512 --threads 1   # compiled flex (UDPS / plain) vs SDPA, fwd
"""
import argparse
import statistics
import time

import torch
from torch.nn.attention.flex_attention import flex_attention

from wenet_udps.kernels.reference import DEFAULT_EPS, udps_attention_reference


def udps_score_mod(qn: torch.Tensor, kn: torch.Tensor, alpha: float, d: int):
    def score_mod(score, b, h, i, j):  # score arrives as q.k / sqrt(d)
        den = qn[b, h, i] + kn[b, h, j]
        return 4.0 * alpha * score * d ** 0.5 / torch.clamp(den * den, min=DEFAULT_EPS)
    return score_mod


def time_forward(t: int, args) -> str:
    """Median ms of compiled flex with the UDPS score_mod, compiled flex without one and SDPA (interleaved), and
    the first compiled call's seconds (the compile)."""
    q, k, v = (torch.randn(8, 4, t, 64) for _ in range(3))
    qn, kn = torch.linalg.vector_norm(q, dim=-1), torch.linalg.vector_norm(k, dim=-1)
    score_mod = udps_score_mod(qn, kn, args.alpha, 64)
    compiled = torch.compile(flex_attention, dynamic=False)
    fns = {"flex udps": lambda: compiled(q, k, v, score_mod=score_mod), "flex plain": lambda: compiled(q, k, v),
           "sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)}
    times, first = {name: [] for name in fns}, {}
    with torch.no_grad():
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            first[name] = time.perf_counter() - start
        for _ in range(args.repeats):
            for name, fn in fns.items():
                start = time.process_time()
                fn()
                times[name].append(time.process_time() - start)
    ms = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
    return (f"| {t} | {ms['sdpa']:.2f} | {ms['flex udps']:.2f} ({ms['flex udps'] / ms['sdpa']:.2f}x) | "
            f"{ms['flex plain']:.2f} ({ms['flex plain'] / ms['sdpa']:.2f}x) | {first['flex udps']:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--T", type=int, nargs="+", default=[128])
    parser.add_argument("--alpha", type=float, default=5.0)
    parser.add_argument("--time", action="store_true", help="time the compiled forward (CPU, B=8 H=4 d=64)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.time:
        print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), B=8 H=4 d=64, no mask, fp32; "
              f"CPU-clock median of {args.repeats} interleaved repeats\n")
        print("| T | sdpa ms | flex + UDPS score_mod ms | flex, no score_mod ms | first call s |")
        print("|---|---|---|---|---|")
        for t in args.T:
            print(time_forward(t, args), flush=True)
        return
    torch.manual_seed(0)
    batch, heads, d, t = 2, 4, 64, args.T[0]
    q, k, v = (torch.randn(batch, heads, t, d, device=args.device) for _ in range(3))
    qn, kn = torch.linalg.vector_norm(q, dim=-1), torch.linalg.vector_norm(k, dim=-1)
    score_mod = udps_score_mod(qn, kn, args.alpha, d)
    ref = udps_attention_reference(q, 4.0 * args.alpha * k, kn, v)
    print(f"torch {torch.__version__}, {args.device}, B={batch} H={heads} T={t} d={d}")
    compiled = torch.compile(flex_attention, dynamic=False)
    for name, fn in (("eager", flex_attention), ("compiled", compiled)):
        out = fn(q, k, v, score_mod=score_mod)
        print(f"forward ({name}): max abs error vs reference {(out - ref).abs().max().item():.2e}")
    try:
        compiled(q.clone().requires_grad_(True), k, v, score_mod=score_mod).sum().backward()
        print("backward: runs")
    except Exception as exc:  # noqa: BLE001 - the point is to report what torch says
        print(f"backward: {type(exc).__name__}: {str(exc).splitlines()[0]}")


if __name__ == "__main__":
    main()
