"""Scaled-dot attention (the baseline): torch's fused ``scaled_dot_product_attention`` with WeNet's mask semantics."""
from typing import Optional

import torch
from torch import nn


def scaled_dot_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                         dropout_p: float, scale: Optional[float] = None) -> torch.Tensor:
    """softmax(q.k * scale) v through torch's SDPA; a fully masked query row yields zeros (SDPA alone gives NaN).

    q (B, H, T1, E), k (B, H, T2, E), v (B, H, T2, Ev), mask (B, 1|T1, T2) bool or empty -> (B, H, T1, Ev).
    """
    if mask.size(-1) == 0:
        return nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, scale=scale)
    keep = mask.unsqueeze(1)
    row_valid = keep.any(dim=-1, keepdim=True)
    out = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep | ~row_valid, dropout_p=dropout_p,
                                                     scale=scale)
    return out * row_valid.to(out.dtype)
