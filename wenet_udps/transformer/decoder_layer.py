"""One Transformer decoder block: self-attention, source (cross) attention, feed-forward."""
from typing import Optional, Tuple

import torch
from torch import nn

from wenet_udps.transformer.step_cache import StepCache


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
                memory_cache: Optional[torch.Tensor] = None
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run the block over whole target sequences.

        Args:
            tgt: (B, L, D) decoder input.
            tgt_mask: (B, L, L) bool, True = attend (causal & padding).
            memory: (B, T, D) encoder output.
            memory_mask: (B, 1, T) or (B, L, T) bool.
            memory_cache: ``src_attn.memory_cache(memory, memory)``, made once per decoding so that it is not
                projected again; None computes it from ``memory``.
        Returns:
            output (B, L, D), tgt_mask, memory, memory_mask.
        """
        x = self._block(tgt, tgt_mask, memory, memory_mask, None, memory_cache)
        return x, tgt_mask, memory, memory_mask

    def step(self, tgt: torch.Tensor, tgt_mask: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor,
             cache: StepCache, block: int, memory_cache: Optional[torch.Tensor] = None) -> torch.Tensor:
        """A decoding step: the positions not yet in the cache (the newest one), the earlier ones' self-attention
        entries (keys and values; UDPS also the key norms) taken from it.

        Args:
            tgt: (N, L_new, D) the input of the positions not in the cache: one per step, all of them when the
                cache is empty.
            tgt_mask: (N, L_new, L) bool, their rows of the causal mask over all L positions.
            memory: (B, T, D) the encoder output of the B utterances, N = B * g: rows b*g .. b*g + g - 1 are the
                prefixes (hypotheses) of utterance b; memory_mask (B, 1, T); memory_cache as ``forward``'s.
            cache: the decoder's step cache (L - L_new earlier positions), ``block`` this block's index in it; the
                new positions' entries are written into it. Projecting only the new positions keeps a step's
                projections from growing with the prefix as WeNet's layer-output cache does.
        Returns:
            output (N, L_new, D).
        """
        return self._block(tgt, tgt_mask, memory, memory_mask, (cache, block), memory_cache)

    def _block(self, tgt: torch.Tensor, tgt_mask: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor,
               cache: Optional[Tuple[StepCache, int]], memory_cache: Optional[torch.Tensor]
               ) -> torch.Tensor:
        """The block; ``cache`` None: whole sequences (teacher forcing), else a decoding step over that (step cache,
        block index)."""
        residual = tgt
        if self.normalize_before:
            tgt = self.norm1(tgt)
        if cache is None:
            att = self.self_attn(tgt, tgt, tgt, tgt_mask)[0]
        else:
            att = self.self_attn.step(tgt, tgt_mask, *cache)
        x = residual + self.dropout(att)
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
        return x

    def _src_attend(self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor,
                    memory_cache: Optional[torch.Tensor]) -> torch.Tensor:
        """x (N, T1, D) over memory (B, T, D), N = B * g: the g prefixes of an utterance attend to its memory as
        g * T1 query rows of one call, so a decoding step reads each utterance's memory entries once, not once per
        hypothesis from a copy per hypothesis (the queries do not interact, so the result is the same)."""
        shape = x.shape
        folded = shape[0] != memory.size(0)  # (one prefix per utterance, e.g. teacher forcing or export: as is)
        if folded:
            x = x.reshape(memory.size(0), -1, shape[-1])
        if memory_cache is None:
            out = self.src_attn(x, memory, memory, memory_mask)[0]
        else:
            out = self.src_attn(x, memory, memory, memory_mask, cache=memory_cache)[0]
        return out.reshape(shape) if folded else out
