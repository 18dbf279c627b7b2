"""Attention of beam hypotheses over their prefixes, where the hypotheses of one utterance share their leading keys.

In a beam search the hypotheses of an utterance descend from one ancestor a few tokens back: their prefixes are equal
up to there, and so are their self-attention keys and values. Kept once per utterance (``shared``, S positions) and
per hypothesis only after it (``own``, R positions), a step reads each shared key once for all the hypotheses of its
utterance, which become extra query rows of one matrix product, instead of once per hypothesis from a copy of the
prefix per hypothesis (reordered with the survivors at every step: O(prefix) memory traffic per step per block, most
of a 5-minute utterance's decoding time, docs/benchmarks.md). Scores of both parts are joined before one softmax,
so the result is the attention over the S + R keys, to float rounding:

    scaled-dot:  softmax(scale q.k)            UDPS:  softmax(scale q.k / max((|q| + |k|)^2, eps))

with scale 1/sqrt(d) (scaled-dot) or 4 alpha (UDPS, per head). Rows with no kept key give zeros, as
:func:`~wenet_udps.kernels.scaled_dot.scaled_dot_attention` and the UDPS reference. Eager torch, in-place steps, for
decoding (no gradient).
"""
import math
from typing import Optional, Union

import torch

from wenet_udps.kernels.reference import DEFAULT_EPS, upcast


def _fold(x: torch.Tensor, groups: int) -> torch.Tensor:
    """(B*g, H, T1, E) -> (B, H, g*T1, E): the rows of a group as more query rows."""
    n, h, t1, e = x.shape
    return x.view(groups, n // groups, h, t1, e).transpose(1, 2).reshape(groups, h, n // groups * t1, e)


def _unfold(x: torch.Tensor, rows: int, t1: int) -> torch.Tensor:
    """(B, H, g*T1, E) -> (B*g, H, T1, E), the inverse of :func:`_fold`."""
    b, h, _, e = x.shape
    return x.view(b, h, rows // b, t1, e).transpose(1, 2).reshape(rows, h, t1, e)


def shared_prefix_attention(q: torch.Tensor, shared_k: torch.Tensor, shared_v: torch.Tensor, own_k: torch.Tensor,
                            own_v: torch.Tensor, mask: Optional[torch.Tensor], scale: Union[float, torch.Tensor],
                            shared_norm: Optional[torch.Tensor] = None, own_norm: Optional[torch.Tensor] = None,
                            eps: float = DEFAULT_EPS) -> torch.Tensor:
    """Attention of N = B*g query rows (B groups of g consecutive rows) over S shared keys and R own keys.

    q (N, H, T1, d); shared_k (B, H, S, d), shared_v (B, H, S, dv): positions 0..S-1, the same for every row of a
    group; own_k (N, H, R, d), own_v (N, H, R, dv): each row's positions S..S+R-1; mask (N, 1|T1, S+R) bool
    (True = attend), empty or None; scale: a float or a tensor broadcastable to (1, H, 1, 1). ``shared_norm``
    (B, H, S) and ``own_norm`` (N, H, R), the keys' norms |k|: given, the scores are UDPS's; None, scaled-dot's.
    -> (N, H, T1, dv) in v's dtype; scores in float32 (float64 stays float64).
    """
    n, h, t1, _ = q.shape
    groups, s = shared_k.size(0), shared_k.size(2)
    if n % groups:
        raise ValueError(f"{n} query rows do not split into the {groups} groups of the shared keys")
    # Everything per key runs folded, (B, H, g*T1, S + R): the shared keys' terms broadcast over a group's rows as
    # they are; only the few own positions are moved between the layouts.
    qf = _fold(upcast(q), groups)
    dots = torch.cat((torch.matmul(qf, upcast(shared_k).transpose(-2, -1)),
                      _fold(torch.matmul(upcast(q), upcast(own_k).transpose(-2, -1)), groups)), dim=-1)
    if shared_norm is not None:
        q_norm = torch.linalg.vector_norm(qf, dim=-1, keepdim=True)  # (B, H, g*T1, 1)
        own = _fold(upcast(own_norm).unsqueeze(2).expand(n, h, t1, own_norm.size(-1)), groups)
        for part, k_norm in ((dots[..., :s], upcast(shared_norm).unsqueeze(2)), (dots[..., s:], own)):
            # max(den^2, eps) as the reference: den >= 0, so clamping den at sqrt(eps) first is the same.
            part.div_((q_norm + k_norm).clamp_min_(math.sqrt(eps)).square_())
    scores = dots.mul_(scale)
    row_valid = None
    # All kept (a beam search's causal row): nothing to mask, which saves three passes over the scores.
    if mask is not None and mask.size(-1) > 0 and not bool(mask.all()):
        keep = _fold(mask.expand(n, t1, mask.size(-1)).unsqueeze(1), groups)  # (B, 1, g*T1, S + R)
        scores.masked_fill_(~keep, -math.inf)
        row_valid = keep.any(dim=-1, keepdim=True)
    p = torch.softmax(scores, dim=-1)
    if row_valid is not None:
        p = p.masked_fill(~row_valid, 0.0)  # a row with no kept key: softmax gave NaN, the result is zeros
    out = _unfold(torch.matmul(p[..., :s], upcast(shared_v)), n, t1)
    out = out + torch.matmul(_unfold(p[..., s:], n, t1), upcast(own_v))
    return out.to(own_v.dtype)
