"""Cosine attention through torch's SDPA: unit queries and keys, the learnable scale folded into one side.

Per head, with a (and b) the learnable scales of :mod:`~wenet_udps.transformer.score_scale`:

    plain:    scores_ij = a q_i.k_j / (|q_i| |k_j|)
    rel-pos:  scores_ij = (a q_i.k_j + b q_i.p_j) / (|q_i| |k_j|)    (the position term shares the q/k denominator,
                                                                   as in the paper author's UDPS variant)

Both are separable: q^ = q / |q| and k~_j = (a k_j + b p_j) / |k_j| give scores = q^ . k~, one scaled-dot call with
scale 1 (the position term folds into the keys as the UDPS kernel folds it into its numerator keys), so cosine
attention costs what scaled-dot costs, and runs on the flash/memory-efficient SDPA kernels on a GPU. Each norm is
floored at sqrt(eps), so |q| |k| >= eps, the floor UDPS puts on (|q| + |k|)^2. Norms are computed in float32 (float64
stays float64) with autocast off; the unit vectors and the plain keys a k / |k| (bounded by |a|) go back to the
input's dtype, where they cannot overflow. The rel-pos keys are not bounded: b p / |k| reaches b |p| / sqrt(eps) where
|k| is near its floor (b |p_d| > 65 at the default eps 1e-6), past float16's 65504, so float16 rel-pos keys stay
float32 and that SDPA call runs in float32 (no flash kernel: a float16 rel-pos cosine model attends at float32's
cost; bfloat16 has float32's range and stays bfloat16).
"""
import math
from typing import Optional

import torch

from wenet_udps.kernels.reference import DEFAULT_EPS, upcast
from wenet_udps.kernels.scaled_dot import scaled_dot_attention


def inverse_norms(x: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """1 / max(|x|, sqrt(eps)) over the last dimension, in float32 or wider: x (..., d) -> (..., 1). Call it with
    autocast off (the callers below do)."""
    return torch.linalg.vector_norm(upcast(x), dim=-1, keepdim=True).clamp_min(math.sqrt(eps)).reciprocal()


def unit_rows(x: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """x / max(|x|, sqrt(eps)) over the last dimension, in x's dtype: (..., d) -> (..., d)."""
    with torch.autocast(device_type=x.device.type, enabled=False):
        inv = inverse_norms(x, eps)
        if x.dtype in (torch.float32, torch.float64):
            return x * inv
        return (upcast(x) * inv).to(x.dtype)


def cosine_keys(k: torch.Tensor, scale: torch.Tensor, pos: Optional[torch.Tensor] = None,
                pos_scale: Optional[torch.Tensor] = None, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """The keys of one SDPA call: (``scale`` k + ``pos_scale`` p) / max(|k|, sqrt(eps)), in k's dtype, but float32
    for a float16 k with ``pos`` (the position term is unbounded, see the module's docstring).

    k (B, H, T2, d); scale, pos_scale broadcastable to (1, H, 1, 1); pos (1 or B, H, T2, d) or None. The scales
    multiply the (B, H, T2, 1) inverse norms, so a plain key costs one pass over k besides its norm.
    """
    with torch.autocast(device_type=k.device.type, enabled=False):
        inv = inverse_norms(k, eps)
        wide = k.dtype not in (torch.float32, torch.float64)
        kf = upcast(k) if wide else k
        out = kf * (upcast(scale) * inv).to(kf.dtype)
        if pos is None:
            return out.to(k.dtype)
        out = torch.addcmul(out, upcast(pos) if wide else pos.to(kf.dtype), (upcast(pos_scale) * inv).to(kf.dtype))
        return out if k.dtype == torch.float16 else out.to(k.dtype)


def cosine_attention(q: torch.Tensor, k_tilde: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                     dropout_p: float = 0.0, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """softmax(q^ . k~) v: q (B, H, T1, d) raw queries, k~ (B, H, T2, d) from :func:`cosine_keys` (or unit keys
    times the scale), v (B, H, T2, dv), mask (B, 1|T1, T2) bool or empty -> (B, H, T1, dv) in q's dtype; a fully
    masked query row gives zeros (:func:`~wenet_udps.kernels.scaled_dot.scaled_dot_attention`). Computed in k~'s
    dtype: float32 keys of float16 queries (rel-pos) run in float32 with autocast off, which would cast them back."""
    q_unit = unit_rows(q, eps)
    if k_tilde.dtype == q_unit.dtype:
        return scaled_dot_attention(q_unit, k_tilde, v.to(k_tilde.dtype), mask, dropout_p, scale=1.0)
    with torch.autocast(device_type=q.device.type, enabled=False):
        out = scaled_dot_attention(q_unit.to(k_tilde.dtype), k_tilde, v.to(k_tilde.dtype), mask, dropout_p, scale=1.0)
    return out.to(q.dtype)
