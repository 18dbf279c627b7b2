"""FlexAttention with a UDPS score_mod vs the reference formula: forward error, and whether backward runs.

The score_mod divides by (|q_i| + |k_j|)^2 from norm vectors captured outside; alpha is a constant here. On CPU
(torch 2.13) the forward matches, the backward raises: FlexAttention is a speed reference (bench/attention_gpu.py),
not the fallback (docs/benchmarks.md).

    python bench/flex_parity.py                      # B=2 H=4 T=128 d=64 on the CPU
    python bench/flex_parity.py --device cuda --T 1024
"""
import argparse

import torch
from torch.nn.attention.flex_attention import flex_attention

from wenet_udps.kernels.reference import DEFAULT_EPS, udps_attention_reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--T", type=int, default=128)
    parser.add_argument("--alpha", type=float, default=5.0)
    args = parser.parse_args()
    torch.manual_seed(0)
    batch, heads, d = 2, 4, 64
    q, k, v = (torch.randn(batch, heads, args.T, d, device=args.device) for _ in range(3))
    qn, kn = torch.linalg.vector_norm(q, dim=-1), torch.linalg.vector_norm(k, dim=-1)

    def score_mod(score, b, h, i, j):  # score arrives as q.k / sqrt(d)
        den = qn[b, h, i] + kn[b, h, j]
        return 4.0 * args.alpha * score * d ** 0.5 / torch.clamp(den * den, min=DEFAULT_EPS)
    ref = udps_attention_reference(q, 4.0 * args.alpha * k, kn, v)
    print(f"torch {torch.__version__}, {args.device}, B={batch} H={heads} T={args.T} d={d}")
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
