"""Unit Dot Product Similarity (UDPS): the similarity and the reference attention formula.

    S_udot(a, b) = 4 (a . b) / (|a| + |b|)^2,    S_udot(0, 0) = 0

UDPS attention (per head) is ``softmax(scores) @ v`` with

    scores_ij = (q_i . k~_j) / max((|q_i| + n_j)^2, eps)

where ``k~`` are the *numerator keys* and ``n`` the *key norms* used in the denominator. Keeping the two apart
lets one kernel serve every variant exactly:

- plain UDPS: ``k~ = 4 alpha k``, ``n = |k|``;
- the reference rel-pos Conformer variant: ``4 (alpha q.k + beta q.p) = q . (4 alpha k + 4 beta p)``, so
  ``k~ = 4 (alpha k + beta p)`` and ``n = |k|`` (the position term shares the q/k denominator, as in the reference).

Norms, the denominator and the scores are computed in float32 whatever the input dtype, so fp16/bf16 autocast
cannot overflow ``D``; fully masked query rows give zeros, never NaN. The fast implementations (``cpu_tiled``,
``triton_udps``) are tested against :func:`udps_attention_reference`; ``dispatch`` picks among them.
"""
from typing import Optional

import torch

DEFAULT_EPS = 1e-6


def upcast(x: torch.Tensor) -> torch.Tensor:
    """x in at least float32 (float64 stays float64): the dtype UDPS norms and scores are computed in."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def udps_similarity(a: torch.Tensor, b: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """S_udot over ``dim`` with broadcasting; S(0, 0) = 0 with finite gradients there.

    Args:
        a, b: tensors broadcastable to each other.
        dim: the vector dimension.
    Returns:
        The similarity, with ``dim`` reduced, in ``[-1, 1]``.
    """
    a, b = torch.broadcast_tensors(a, b)
    dot = (a * b).sum(dim)
    denom = (torch.linalg.vector_norm(a, dim=dim) + torch.linalg.vector_norm(b, dim=dim)).square()
    nonzero = denom > 0
    # Divide by 1 where the denominator is 0 so neither the value nor the gradient becomes NaN.
    return torch.where(nonzero, 4.0 * dot / torch.where(nonzero, denom, torch.ones_like(denom)), torch.zeros_like(dot))


def udps_scores(q: torch.Tensor, k_num: torch.Tensor, k_norm: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """The score matrix (q . k~) / max((|q| + n)^2, eps) in float32.

    q (B, H, T1, d), k_num (B or 1, H, T2, d), k_norm (B or 1, H, T2) -> (B, H, T1, T2).
    """
    # Autocast would run the matmul in half precision again, where q . k~ can overflow.
    with torch.autocast(device_type=q.device.type, enabled=False):
        qf = upcast(q)
        num = torch.matmul(qf, upcast(k_num).transpose(-2, -1))
        q_norm = torch.linalg.vector_norm(qf, dim=-1)
        denom = q_norm.unsqueeze(-1) + upcast(k_norm).unsqueeze(-2)
        if _in_place_ok(num, denom):
            # Decoding: the same ops in place, without allocating two more (B, H, T1, T2) tensors.
            return num.div_(denom.square_().clamp_min_(eps))
        return num / denom.square().clamp_min(eps)


def exporting() -> bool:
    """TorchScript scripting/tracing, ONNX export or an enclosing torch.compile: the plain formula, which they can
    record and fuse (the fast kernels are autograd Functions with Python-level plans and launches of their own)."""
    return (torch.jit.is_scripting() or torch.jit.is_tracing() or torch.onnx.is_in_onnx_export()
            or torch.compiler.is_compiling())


def _in_place_ok(*tensors: torch.Tensor) -> bool:
    """Whether ops may overwrite these fresh intermediates: autograd does not record them (no_grad or no input
    requires grad) and no graph is being recorded (see :func:`exporting`)."""
    return not any(t.requires_grad for t in tensors) and not exporting()


def _keep_mask(mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """(B, T1|1, T2) keep-mask -> (B, 1, T1|1, T2), or None when there is no mask."""
    if mask is None or mask.size(-1) == 0:
        return None
    return mask.unsqueeze(1)


def udps_attention_reference(q: torch.Tensor, k_num: torch.Tensor, k_norm: torch.Tensor, v: torch.Tensor,
                             mask: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
                             eps: float = DEFAULT_EPS, dropout_p: float = 0.0,
                             training: bool = False) -> torch.Tensor:
    """The straightforward formula, one pass per step (the reference the fast paths are tested against).

    Args:
        q: queries (B, H, T1, d_k).
        k_num: numerator keys (B or 1, H, T2, d_k), scales already folded in.
        k_norm: key norms for the denominator (B or 1, H, T2), float32.
        v: values (B, H, T2, d_v).
        mask: keep-mask (B, 1, T2) or (B, T1, T2), True = attend; None for no mask.
        bias: optional additive score term (B or 1, H, T1, T2) (e.g. a separately normalised position term).
    Returns:
        (B, H, T1, d_v) in v's dtype.
    """
    scores = udps_scores(q, k_num, k_norm, eps)
    in_place = _in_place_ok(scores)
    if bias is not None:
        scores = scores.add_(upcast(bias)) if in_place and not bias.requires_grad else scores + upcast(bias)
    keep = _keep_mask(mask)
    drop = None if keep is None else ~keep
    if drop is not None:
        # finfo.min rather than -inf: a fully masked row stays finite (uniform), then is zeroed below.
        fill = torch.finfo(scores.dtype).min
        scores = scores.masked_fill_(drop, fill) if in_place else scores.masked_fill(drop, fill)
    attn = torch.softmax(scores, dim=-1)
    if drop is not None:
        attn = attn.masked_fill_(drop, 0.0) if in_place else attn.masked_fill(drop, 0.0)
    if dropout_p > 0.0 and training:
        attn = torch.nn.functional.dropout(attn, p=dropout_p)
    return torch.matmul(attn.to(v.dtype), v)
