"""UDPS attention for one query row per head (an attention-decoding step): the denominators fold into the keys.

With a single query q per (batch, head), the UDPS score of key j is

    S_j = (q . k_j) * c_j,    c_j = 4 alpha / max((|q| + |k_j|)^2, eps)

and c_j depends on j alone, so S_j = q . (c_j k_j): torch's fused SDPA with the scaled keys ``k' = c k`` and scale 1
gives UDPS exactly (up to float rounding). That is one pass over the keys (their norms; ``k'`` in the same pass as the
numerator scale 4 alpha, which a step would otherwise apply separately) instead of the matrix products of
``cpu_fused``, which on head-split views (B, H, T2, d) strided over (B, T2, H, d) first copy k and v whole
(docs/kernels.md, "How does the attention search avoid repeated work?"). With two or more query rows c_ij
depends on i too, so this does not apply.
No backward of its own: it serves calls that record no gradient (decoding); :mod:`dispatch` decides when.
"""
import math
from typing import Optional

import torch

from wenet_udps.kernels.reference import DEFAULT_EPS, upcast
from wenet_udps.kernels.scaled_dot import scaled_dot_attention


def udps_attention_one_query(q: torch.Tensor, k: torch.Tensor, scale: torch.Tensor, v: torch.Tensor,
                             mask: Optional[torch.Tensor] = None, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """UDPS attention of one query row: q (B, H, 1, d), raw keys k (B, H, T2, d), the numerator scale ``scale``
    (4 alpha, broadcastable to (B, H, 1, 1)), v (B, H, T2, dv), mask (B, 1, T2) bool (True = attend) or None/empty
    -> (B, H, 1, dv) in v's dtype. Norms and scores in float32 (float64 stays float64); a row with no kept key gives
    zeros, as the reference."""
    if q.size(-2) != 1:
        raise ValueError(f"udps_attention_one_query takes one query row per head, got q of shape {tuple(q.shape)}")
    q32, k32 = upcast(q), upcast(k)
    den = torch.linalg.vector_norm(q32, dim=-1, keepdim=True) + torch.linalg.vector_norm(k32, dim=-1).unsqueeze(-1)
    # max(den^2, eps) as the reference: den >= 0, so clamping den at sqrt(eps) first is the same.
    factor = upcast(scale) / den.clamp_min_(math.sqrt(eps)).square_()
    empty = torch.empty(0, dtype=torch.bool, device=q.device)
    out = scaled_dot_attention(q32, k32 * factor, upcast(v), empty if mask is None else mask, 0.0, scale=1.0)
    return out.to(v.dtype)
