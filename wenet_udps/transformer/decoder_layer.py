"""One Transformer decoder block: self-attention, source (cross) attention, feed-forward."""
from typing import Optional, Tuple

import torch
from torch import nn


class DecoderLayer(nn.Module):
    """Decoder block with WeNet's parameter names (self_attn, src_attn, feed_forward, norm1/2/3).

    Args:
        size: model dimension D.
        self_attn: attention over the target prefix (any ``ATTENTION_CLASSES`` self-attention type).
        src_attn: attention over the encoder output (``crossattn`` / ``udps_crossattn``).
        feed_forward: position-wise feed-forward module.
        dropout_rate: dropout on each residual branch.
        normalize_before: pre-norm (True, WeNet's default) or post-norm.
    """

    def __init__(self, *, size: int, self_attn: nn.Module, src_attn: nn.Module, feed_forward: nn.Module,
                 dropout_rate: float, normalize_before: bool = True):
        super().__init__()
        self.size = size
        self.self_attn = self_attn
        self.src_attn = src_attn
        self.feed_forward = feed_forward
        # eps 1e-5 is WeNet's LayerNorm default, so checkpoints behave the same.
        self.norm1 = nn.LayerNorm(size, eps=1e-5)
        self.norm2 = nn.LayerNorm(size, eps=1e-5)
        self.norm3 = nn.LayerNorm(size, eps=1e-5)
        self.dropout = nn.Dropout(dropout_rate)
        self.normalize_before = normalize_before

    def forward(self, tgt: torch.Tensor, tgt_mask: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor,
                cache: Optional[torch.Tensor] = None, memory_cache: Optional[torch.Tensor] = None
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run the block.

        Args:
            tgt: (B, L, D) decoder input.
            tgt_mask: (B, L, L) bool, True = attend (causal & padding).
            memory: (B, T, D) encoder output.
            memory_mask: (B, 1, T) or (B, L, T) bool.
            cache: (B, L-1, D) this block's output for the first L-1 positions (incremental decoding);
                only the last position is then computed.
            memory_cache: ``src_attn.memory_cache(memory, memory)``, made once per decoding so a step does not
                project the memory again; None computes it from ``memory``.
        Returns:
            output (B, L, D), tgt_mask, memory, memory_mask.
        """
        residual = tgt
        if self.normalize_before:
            tgt = self.norm1(tgt)
        if cache is None:
            tgt_q, tgt_q_mask = tgt, tgt_mask
        else:
            if cache.shape != (tgt.size(0), tgt.size(1) - 1, self.size):
                raise ValueError(f"decoder cache shape {tuple(cache.shape)} does not match "
                                 f"{(tgt.size(0), tgt.size(1) - 1, self.size)}")
            tgt_q = tgt[:, -1:, :]
            residual = residual[:, -1:, :]
            tgt_q_mask = tgt_mask[:, -1:, :]
        x = residual + self.dropout(self.self_attn(tgt_q, tgt, tgt, tgt_q_mask)[0])
        if not self.normalize_before:
            x = self.norm1(x)

        residual = x
        if self.normalize_before:
            x = self.norm2(x)
        x = residual + self.dropout(self._src_attend(x, memory, memory_mask, memory_cache))
        if not self.normalize_before:
            x = self.norm2(x)

        residual = x
        if self.normalize_before:
            x = self.norm3(x)
        x = residual + self.dropout(self.feed_forward(x))
        if not self.normalize_before:
            x = self.norm3(x)

        if cache is not None:
            x = torch.cat([cache, x], dim=1)
        return x, tgt_mask, memory, memory_mask

    def _src_attend(self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor,
                    memory_cache: Optional[torch.Tensor]) -> torch.Tensor:
        if memory_cache is None:
            return self.src_attn(x, memory, memory, memory_mask)[0]
        return self.src_attn(x, memory, memory, memory_mask, cache=memory_cache)[0]
