"""UDPS attention on CPU below the tiled kernel's size: the reference formula in fewer passes, no compiling.

Autograd of the reference formula makes about 25 passes over (B, H, T1, T2) tensors for a forward+backward (each
elementwise step, its out-of-place backward, the mask fills) and keeps many of them alive. Here a hand-derived
backward (an autograd Function, eager torch ops only, so deterministic and nothing to compile) makes 6 passes
besides the 4 matmuls, and the forward 5 (docs/kernels.md, "Where does UDPS attention spend its time"):

    forward   N = q k~^T;  r = 1 / max(|q_i| + n_j, sqrt(eps));  S = N r r + mask bias;  P = softmax(S);  O = P v
    backward  dv = P^T dO;  dS = softmax_backward(dO v^T, P);  Y = dS r;  G = Y S
              da_i = -2 sum_j G_ij;  dn_j = -2 sum_i G_ij;  dN = Y r
              dq = dN k~ + da_i q_i / |q_i|;  dk~ = dN^T q

(G = dS S / den is the denominator's share; ``live`` zeroes it where the eps floor is active, which is rare and
checked on O(T) norms: den >= min|q| + min n.) Rows with no kept key give zeros, as in the reference. Scores are
float32 (float64 stays float64) with autocast off; the output has v's dtype.
"""
import math
from typing import Optional

import torch

from wenet_udps.kernels.reference import DEFAULT_EPS, upcast


def _forward(q, k_num, k_norm, v, keep, eps):
    """(out, saved): the forward math on (B, H, T1|T2, d) tensors; ``saved`` feeds :func:`_backward`."""
    a = torch.linalg.vector_norm(q, dim=-1, keepdim=True)
    den = a + k_norm.unsqueeze(-2)
    live = None
    # Factor 2: the check runs in Python floats, the floor below in the tensor's dtype; near it take the exact path.
    if den.numel() and float(a.amin() + k_norm.amin()) ** 2 < 2.0 * eps:
        # Some |q_i| + n_j may be below the floor: D = max(den^2, eps) there, and no gradient flows into the norms.
        live = den.square() >= eps
        den.clamp_min_(math.sqrt(eps))
    r = den.reciprocal_()
    s = torch.matmul(q, k_num.transpose(-2, -1)).mul_(r).mul_(r)
    row_valid = None
    if keep is not None:
        # Added, not filled: masked_fill_ with a mask broadcast over heads is about 15x slower than add_ here. Half of
        # finfo.min, not -inf: exp gives exactly 0 in a row with a kept key, and the sum and G = Y S stay finite.
        s.add_(s.new_zeros(keep.shape).masked_fill_(~keep, torch.finfo(s.dtype).min / 2))
        row_valid = keep.any(dim=-1, keepdim=True)
        if bool(row_valid.all()):
            row_valid = None
    p = torch.softmax(s, dim=-1)
    out = torch.matmul(p, v)
    if row_valid is not None:
        # A row with no kept key still has a p (over masked keys); its output (and so its gradient) is zeroed.
        out = out * row_valid
    return out, (a, r, s, p, live, row_valid)


def _backward(q, k_num, v, saved, d_out):
    a, r, s, p, live, row_valid = saved
    if row_valid is not None:
        d_out = d_out * row_valid
    dv = torch.matmul(p.transpose(-2, -1), d_out)
    ds = torch._softmax_backward_data(torch.matmul(d_out, v.transpose(-2, -1)), p, -1, p.dtype)
    y = ds.mul_(r)
    g = y * s
    if live is not None:
        g.masked_fill_(~live, 0.0)
    da = g.sum(dim=-1, keepdim=True).mul_(-2.0)
    dn = g.sum(dim=-2).mul_(-2.0)
    d_num = y.mul_(r)
    # d|q|/dq = q / |q|, 0 at q = 0 (as torch's norm backward).
    dq = torch.matmul(d_num, k_num).addcmul_(torch.where(a > 0, da / a, torch.zeros_like(a)), q)
    return dq, torch.matmul(d_num.transpose(-2, -1), q), dn, dv


def _sum_to(grad: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A gradient summed over the batch dimension that ``like`` broadcast (batch 1)."""
    return grad.sum(0, keepdim=True) if like.size(0) != grad.size(0) else grad


class UDPSFusedFunction(torch.autograd.Function):
    """forward(q (B, H, T1, d), k_num (B|1, H, T2, d), k_norm (B|1, H, T2), v (B, H, T2, dv),
    keep (B|1, 1, T1|1, T2) bool or None, eps) -> (B, H, T1, dv); inputs float32 or float64."""

    @staticmethod
    def forward(ctx, q, k_num, k_norm, v, keep, eps):
        out, saved = _forward(q, k_num, k_norm, v, keep, eps)
        a, r, s, p, live, row_valid = saved
        ctx.save_for_backward(q, k_num, v, a, r, s, p, live, row_valid)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k_num, v, *saved = ctx.saved_tensors
        dq, dk, dn, dv = _backward(q, k_num, v, saved, grad_out)
        return dq, _sum_to(dk, k_num), _sum_to(dn, k_num), dv, None, None


def udps_attention_fused(q: torch.Tensor, k_num: torch.Tensor, k_norm: torch.Tensor, v: torch.Tensor,
                         mask: Optional[torch.Tensor] = None, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """UDPS attention (no bias, no dropout) with the reference's numbers up to float rounding; any float dtype.

    q (B, H, T1, d), k_num (B|1, H, T2, d), k_norm (B|1, H, T2), v (B, H, T2, dv), mask (B|1, 1|T1, T2) bool
    (True = attend) or None -> (B, H, T1, dv) in v's dtype.
    """
    keep = None if mask is None else mask.unsqueeze(1)
    with torch.autocast(device_type=q.device.type, enabled=False):
        args = (upcast(q), upcast(k_num), upcast(k_norm), upcast(v), keep, eps)
        if torch.is_grad_enabled() and any(x.requires_grad for x in args[:4]):
            out = UDPSFusedFunction.apply(*args)
        else:
            # Inference (decoding): no Function, nothing saved.
            out = _forward(*args)[0]
    return out.to(v.dtype)
