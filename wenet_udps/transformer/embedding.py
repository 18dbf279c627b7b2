"""Positional encodings (registry ``POS_ENC_CLASSES``: ``abs_pos``, ``rel_pos``, ``no_pos``).

Every class has ``forward(x (B, T, D), offset) -> (x (B, T, D), pos_emb (1, T, D))`` and
``position_encoding(offset, size) -> (1 or B, size, D)``; ``offset`` is the absolute index of the first frame, so
streaming chunks get the same encodings as the full sequence.
"""
import math
from typing import Union

import torch
from torch import nn


class PositionalEncoding(nn.Module):
    """Sinusoidal absolute encoding: ``x * sqrt(d_model) + pe[offset:offset+T]`` (then dropout).

    ``pe`` (1, max_len, d_model) is a persistent buffer (``...pos_enc.pe`` in WeNet checkpoints):
    ``pe[t, 2i] = sin(t / 10000^(2i/d))``, ``pe[t, 2i+1] = cos(t / 10000^(2i/d))``.
    """

    def __init__(self, *, d_model: int, dropout_rate: float, max_len: int = 5000):
        super().__init__()
        self.d_model = d_model
        self.xscale = math.sqrt(d_model)
        self.max_len = max_len
        self.dropout = nn.Dropout(p=dropout_rate)
        position = torch.arange(0, max_len, dtype=torch.float32).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * -(math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
        self.register_buffer("pe", pe.unsqueeze(0), persistent=True)

    def forward(self, x: torch.Tensor, offset: Union[int, torch.Tensor] = 0):
        """x (B, T, D) -> (encoded x (B, T, D), pos_emb (1 or B, T, D))."""
        pos_emb = self.position_encoding(offset, x.size(1), apply_dropout=False)
        x = x * self.xscale + pos_emb.to(x.dtype)
        return self.dropout(x), self.dropout(pos_emb)

    def position_encoding(self, offset: Union[int, torch.Tensor], size: int,
                          apply_dropout: bool = True) -> torch.Tensor:
        """Encodings of positions ``offset .. offset+size-1``.

        Args:
            offset: int or 0-dim tensor -> (1, size, D); a (B,) tensor of per-utterance offsets -> (B, size, D)
                (negative positions are clamped to 0).
            size: number of positions.
            apply_dropout: apply this module's dropout (WeNet does for streaming position look-ups).
        """
        if isinstance(offset, int) or (torch.is_tensor(offset) and offset.dim() == 0):
            start = int(offset)
            if start < 0 or start + size > self.max_len:
                raise ValueError(f"positions {start}..{start + size - 1} are outside the positional encoding "
                                 f"table of max_len {self.max_len}; the input is too long for this model")
            pos_emb = self.pe[:, start:start + size]
        else:
            index = (offset.unsqueeze(1) + torch.arange(0, size, device=offset.device)).clamp_min(0)
            if int(index.max()) >= self.max_len:
                raise ValueError(f"positions up to {int(index.max())} are outside the positional encoding "
                                 f"table of max_len {self.max_len}; the input is too long for this model")
            pos_emb = nn.functional.embedding(index, self.pe[0])
        return self.dropout(pos_emb) if apply_dropout else pos_emb


class RelPositionalEncoding(PositionalEncoding):
    """WeNet's relative-position flavour (no rel_shift): returns ``x * sqrt(d_model)`` and the ``pe`` slice apart.

    The rel-pos attentions project ``pos_emb`` (``linear_pos``) and add its dot product with the queries.
    """

    def forward(self, x: torch.Tensor, offset: Union[int, torch.Tensor] = 0):
        """x (B, T, D) -> (scaled x (B, T, D), pos_emb (1 or B, T, D))."""
        pos_emb = self.position_encoding(offset, x.size(1), apply_dropout=False)
        return self.dropout(x * self.xscale), self.dropout(pos_emb.to(x.dtype))


class NoPositionalEncoding(nn.Module):
    """No positional information: x is only passed through dropout and ``pos_emb`` is zeros."""

    def __init__(self, *, d_model: int, dropout_rate: float, max_len: int = 5000):
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.dropout = nn.Dropout(p=dropout_rate)
        # Empty, not saved: follows .to(device/dtype) so position_encoding() returns zeros where the model lives.
        self.register_buffer("zero", torch.zeros(0), persistent=False)

    def forward(self, x: torch.Tensor, offset: Union[int, torch.Tensor] = 0):
        """x (B, T, D) -> (x (B, T, D), zeros (1, T, D))."""
        return self.dropout(x), x.new_zeros(1, x.size(1), self.d_model)

    def position_encoding(self, offset: Union[int, torch.Tensor], size: int,
                          apply_dropout: bool = True) -> torch.Tensor:
        """Zeros (1, size, D), whatever the offset."""
        return self.zero.new_zeros(1, size, self.d_model)


POS_ENC_CLASSES = {
    "abs_pos": PositionalEncoding,
    "rel_pos": RelPositionalEncoding,
    "no_pos": NoPositionalEncoding,
}
