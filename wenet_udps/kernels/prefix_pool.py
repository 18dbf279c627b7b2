"""Attention of beam hypotheses over their prefixes, where one utterance's hypotheses keep their keys in one pool.

In a beam search the hypotheses of an utterance form a tree: each descends from a parent, and those with a common
ancestor have equal prefixes up to it, and so equal self-attention keys and values. Kept once per utterance, in a
pool of columns with each row's membership (``transformer/step_cache.py``), a step reads each pooled key once for all
the hypotheses of its utterance, which are the query rows of one matrix product, and masks out the columns a row does
not hold; a per-hypothesis copy of the prefix, reordered with the survivors at every step, cost O(prefix) memory
traffic per step per block (docs/benchmarks.md). Attention does not depend on the order of the keys, so the result is
the attention over each row's own prefix, to float rounding:

    scaled-dot:  softmax(scale q.k)            UDPS:  softmax(scale q.k / max((|q| + |k|)^2, eps))

with scale 1/sqrt(d) (scaled-dot) or 4 alpha (UDPS, per head). Rows with no kept key give zeros, as
:func:`~wenet_udps.kernels.scaled_dot.scaled_dot_attention` and the UDPS reference. Eager torch, in-place steps, for
decoding (no gradient).
"""
import math
from typing import Optional, Union

import torch

from wenet_udps.kernels.reference import DEFAULT_EPS, upcast


def prefix_pool_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, member: torch.Tensor,
                          pos: torch.Tensor, mask: Optional[torch.Tensor], scale: Union[float, torch.Tensor],
                          norm: Optional[torch.Tensor] = None, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """Attention of N = B*g query rows (B groups of g consecutive rows) over their group's pool of P key columns.

    q (N, H, T1, d); keys (B, H, d, P), values (B, H, dv, P): feature-major, column c of group b at [b, :, :, c];
    member (N, P) bool: the columns row n's prefix holds; pos (B, P) long: each column's position in the prefixes;
    mask (N, 1|T1, L) bool over positions (True = attend; every pos < L), empty or None: a query row attends to the
    columns of its prefix whose position it keeps; scale: a float or a tensor broadcastable to (1, H, 1, 1). ``norm``
    (B, H, P), the keys' norms |k|: given, the scores are UDPS's; None, scaled-dot's.
    -> (N, H, T1, dv) in values' dtype; scores in float32 (float64 stays float64).
    """
    n, h, t1, _ = q.shape
    groups, columns = keys.size(0), keys.size(-1)
    if n % groups:
        raise ValueError(f"{n} query rows do not split into the {groups} groups of the pool")
    g = n // groups
    # A group's rows as more query rows: (N, H, T1, d) -> (B, H, g*T1, d).
    qf = upcast(q).view(groups, g, h, t1, -1).transpose(1, 2).reshape(groups, h, g * t1, -1)
    scores = torch.matmul(qf, upcast(keys))  # (B, H, g*T1, P)
    if norm is not None:
        q_norm = torch.linalg.vector_norm(qf, dim=-1, keepdim=True)  # (B, H, g*T1, 1)
        # max(den^2, eps) as the reference: den >= 0, so clamping den at sqrt(eps) first is the same.
        scores.div_((q_norm + upcast(norm).unsqueeze(2)).clamp_min_(math.sqrt(eps)).square_())
    scores.mul_(scale)
    # Query row (i, t) of a group keeps the columns row i holds: (B, 1, g*T1, P), a view when T1 = 1 (a step).
    keep = member.view(groups, 1, g, 1, columns).expand(groups, 1, g, t1, columns).reshape(groups, 1, g * t1, columns)
    row_valid = None
    # All kept (a beam search's causal row): membership alone decides, which saves a gather and two passes.
    if mask is not None and mask.size(-1) > 0 and not bool(mask.all()):
        at = pos.repeat_interleave(g, 0).unsqueeze(1).expand(n, t1, columns)  # (N, T1, P)
        keep = keep & mask.expand(n, t1, mask.size(-1)).gather(2, at).view(groups, 1, g * t1, columns)
        row_valid = keep.any(dim=-1, keepdim=True)
    scores.masked_fill_(keep.logical_not(), -math.inf)
    p = torch.softmax(scores, dim=-1)
    if row_valid is not None:
        p = p.masked_fill(~row_valid, 0.0)  # a row with no kept key: softmax gave NaN, the result is zeros
    out = torch.matmul(p, upcast(values).transpose(-2, -1))  # (B, H, g*T1, dv)
    return out.view(groups, h, g, t1, -1).transpose(1, 2).reshape(n, h, t1, -1).to(values.dtype)
