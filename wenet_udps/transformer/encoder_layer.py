"""Encoder blocks: Transformer (self-attention + feed-forward) and Conformer (macaron FF, attention, conv, FF).

Both share ``forward(x, mask, pos_emb, mask_pad, att_cache, cnn_cache) -> (x, mask, new_att_cache, new_cnn_cache)``:

- x (B, T, D); mask (B, T, T_key) or (B, 1, T_key) attention mask, True = attend (empty when streaming with a
  cache that holds exactly the allowed left context); pos_emb (1 or B, T_key, D) for the rel-pos attentions;
- mask_pad (B, 1, T) padding mask for the convolution (empty = none);
- att_cache (B, H, T_cache, 2*d_k) cached keys|values, T_key = T_cache + T; cnn_cache (B, D, K-1) conv left context.
"""
from typing import Optional, Tuple

import torch
from torch import nn

_EMPTY_MASK = torch.ones((0, 0, 0), dtype=torch.bool)
_EMPTY_ATT_CACHE = torch.zeros((0, 0, 0, 0))
_EMPTY_CNN_CACHE = torch.zeros((0, 0, 0))


class TransformerEncoderLayer(nn.Module):
    """Self-attention then feed-forward, each with a residual; LayerNorms ``norm1``/``norm2``.

    Args:
        size: model dimension D.
        self_attn: an attention module from ``ATTENTION_CLASSES``.
        feed_forward: a ``PositionwiseFeedForward``.
        dropout_rate: dropout on each branch before the residual sum.
        normalize_before: pre-norm (True, WeNet's default) or post-norm.
    """

    def __init__(self, *, size: int, self_attn: nn.Module, feed_forward: nn.Module, dropout_rate: float,
                 normalize_before: bool = True):
        super().__init__()
        self.self_attn = self_attn
        self.feed_forward = feed_forward
        self.norm1 = nn.LayerNorm(size, eps=1e-5)
        self.norm2 = nn.LayerNorm(size, eps=1e-5)
        self.dropout = nn.Dropout(dropout_rate)
        self.size = size
        self.normalize_before = normalize_before

    def forward(self, x: torch.Tensor, mask: torch.Tensor, pos_emb: torch.Tensor,
                mask_pad: torch.Tensor = _EMPTY_MASK, att_cache: torch.Tensor = _EMPTY_ATT_CACHE,
                cnn_cache: torch.Tensor = _EMPTY_CNN_CACHE
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """See the module docstring; the returned cnn cache is always empty (no convolution here)."""
        residual = x
        if self.normalize_before:
            x = self.norm1(x)
        x_att, new_att_cache = self.self_attn(x, x, x, mask, pos_emb=pos_emb, cache=att_cache)
        x = residual + self.dropout(x_att)
        if not self.normalize_before:
            x = self.norm1(x)

        residual = x
        if self.normalize_before:
            x = self.norm2(x)
        x = residual + self.dropout(self.feed_forward(x))
        if not self.normalize_before:
            x = self.norm2(x)
        return x, mask, new_att_cache, x.new_zeros((0, 0, 0))


class ConformerEncoderLayer(nn.Module):
    """Conformer block: 0.5*FF (macaron) -> self-attention -> convolution -> 0.5*FF -> ``norm_final``.

    Without ``feed_forward_macaron`` the FF is added at full weight; without ``conv_module`` there is no
    convolution and no ``norm_final`` (WeNet's layout, so parameter names match its checkpoints).

    Args:
        size: model dimension D.
        self_attn: an attention module from ``ATTENTION_CLASSES``.
        feed_forward: the second (or only) feed-forward.
        feed_forward_macaron: the first feed-forward, or None.
        conv_module: a ``ConvolutionModule``, or None.
        dropout_rate: dropout on each branch before the residual sum.
        normalize_before: pre-norm (True) or post-norm.
    """

    def __init__(self, *, size: int, self_attn: nn.Module, feed_forward: nn.Module,
                 feed_forward_macaron: Optional[nn.Module] = None, conv_module: Optional[nn.Module] = None,
                 dropout_rate: float = 0.1, normalize_before: bool = True):
        super().__init__()
        self.self_attn = self_attn
        self.feed_forward = feed_forward
        self.feed_forward_macaron = feed_forward_macaron
        self.conv_module = conv_module
        self.norm_ff = nn.LayerNorm(size, eps=1e-5)
        self.norm_mha = nn.LayerNorm(size, eps=1e-5)
        if feed_forward_macaron is not None:
            self.norm_ff_macaron = nn.LayerNorm(size, eps=1e-5)
            self.ff_scale = 0.5
        else:
            self.ff_scale = 1.0
        if conv_module is not None:
            self.norm_conv = nn.LayerNorm(size, eps=1e-5)
            self.norm_final = nn.LayerNorm(size, eps=1e-5)
        self.dropout = nn.Dropout(dropout_rate)
        self.size = size
        self.normalize_before = normalize_before

    def forward(self, x: torch.Tensor, mask: torch.Tensor, pos_emb: torch.Tensor,
                mask_pad: torch.Tensor = _EMPTY_MASK, att_cache: torch.Tensor = _EMPTY_ATT_CACHE,
                cnn_cache: torch.Tensor = _EMPTY_CNN_CACHE
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """See the module docstring. Each branch: x + scale * dropout(branch(norm(x))), pre- or post-norm."""
        if self.feed_forward_macaron is not None:
            residual = x
            if self.normalize_before:
                x = self.norm_ff_macaron(x)
            x = residual + self.ff_scale * self.dropout(self.feed_forward_macaron(x))
            if not self.normalize_before:
                x = self.norm_ff_macaron(x)

        residual = x
        if self.normalize_before:
            x = self.norm_mha(x)
        x_att, new_att_cache = self.self_attn(x, x, x, mask, pos_emb=pos_emb, cache=att_cache)
        x = residual + self.dropout(x_att)
        if not self.normalize_before:
            x = self.norm_mha(x)

        new_cnn_cache = x.new_zeros((0, 0, 0))
        if self.conv_module is not None:
            residual = x
            if self.normalize_before:
                x = self.norm_conv(x)
            x, new_cnn_cache = self.conv_module(x, mask_pad, cnn_cache)
            x = residual + self.dropout(x)
            if not self.normalize_before:
                x = self.norm_conv(x)

        residual = x
        if self.normalize_before:
            x = self.norm_ff(x)
        x = residual + self.ff_scale * self.dropout(self.feed_forward(x))
        if not self.normalize_before:
            x = self.norm_ff(x)

        if self.conv_module is not None:
            x = self.norm_final(x)
        return x, mask, new_att_cache, new_cnn_cache
