"""Positional encodings (registry ``POS_ENC_CLASSES``: ``abs_pos``, ``abs_pos_whisper``, ``rel_pos``, ``no_pos``).

Every class has ``forward(x (B, T, D), offset) -> (x (B, T, D), pos_emb (1, T, D))`` and
``position_encoding(offset, size) -> (1 or B, size, D)``; ``offset`` is the absolute index of the first frame, so
streaming chunks get the same encodings as the full sequence.
"""
import math
from typing import Union

import torch
from torch import nn


def sinusoid_table(length: int, d_model: int, start: int = 0) -> torch.Tensor:
    """(length - start, d_model), the rows of positions ``start .. length-1``: ``[t, 2i] = sin(t / 10000^(2i/d))``,
    ``[t, 2i+1] = cos(t / 10000^(2i/d))``."""
    position = torch.arange(start, length, dtype=torch.float32).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * -(math.log(10000.0) / d_model))
    pe = torch.zeros(length - start, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return pe


def whisper_sinusoid_table(length: int, d_model: int, start: int = 0) -> torch.Tensor:
    """(length - start, d_model), positions ``start .. length-1``: Whisper's encoder sinusoids, ``[t, i] = sin(t *
    r^i)`` and ``[t, d/2 + i] = cos(t * r^i)`` for ``i < d/2``, with ``r = 10000^(-1/(d/2 - 1))``; d_model must be
    even and at least 4."""
    if d_model % 2 or d_model < 4:
        raise ValueError(f"encoder_conf.pos_enc_layer_type abs_pos_whisper needs an even output_size >= 4, "
                         f"got {d_model}")
    rate = math.log(10000.0) / (d_model // 2 - 1)
    angle = torch.arange(start, length, dtype=torch.float32).unsqueeze(1) * torch.exp(
        -rate * torch.arange(d_model // 2, dtype=torch.float32))
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)


class PositionalEncoding(nn.Module):
    """Sinusoidal absolute encoding: ``x * sqrt(d_model) + pe[offset:offset+T]`` (then dropout).

    ``pe`` (1, max_len, d_model) is a persistent buffer (``...pos_enc.pe`` in WeNet checkpoints) holding
    :func:`sinusoid_table`. Positions past ``max_len`` (utterances longer than ~200 s at 40 ms per frame) are
    computed from the same formula on the fly, so any length encodes; the saved buffer keeps WeNet's shape.
    """

    table = staticmethod(sinusoid_table)  # (length, d_model) -> encodings; a subclass may swap the formula

    def __init__(self, *, d_model: int, dropout_rate: float, max_len: int = 5000):
        super().__init__()
        self.d_model = d_model
        self.xscale = math.sqrt(d_model)
        self.max_len = max_len
        self.dropout = nn.Dropout(p=dropout_rate)
        self.register_buffer("pe", self.table(max_len, d_model).unsqueeze(0), persistent=True)

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
            if start < 0:
                raise ValueError(f"positional encoding offset must be >= 0, got {start}")
            pos_emb = self._rows(start, size)
        else:
            index = (offset.unsqueeze(1) + torch.arange(0, size, device=offset.device)).clamp_min(0)
            pos_emb = nn.functional.embedding(index, self._table(int(index.max()) + 1)[0])
        return self.dropout(pos_emb) if apply_dropout else pos_emb


    def _rows(self, start: int, size: int) -> torch.Tensor:
        """(1, size, D), positions ``start .. start+size-1``: the saved buffer's rows, or past ``max_len`` the
        formula's rows of these positions alone (a stream asks for a chunk's rows at a growing offset: a table from
        position 0 cost it time in its length, 5.4 ms a chunk at 10 min)."""
        if start + size <= self.max_len:
            return self.pe[:, start:start + size]
        return self.table(start + size, self.d_model, start).to(self.pe).unsqueeze(0)

    def _table(self, length: int) -> torch.Tensor:
        """(1, >= length, D): the saved buffer, or the formula's longer table when ``length > max_len``."""
        if length <= self.max_len:
            return self.pe
        return self.table(length, self.d_model).to(self.pe).unsqueeze(0)


class WhisperPositionalEncoding(PositionalEncoding):
    """WeNet's ``abs_pos_whisper``: ``x + pe`` with Whisper's sinusoids (:func:`whisper_sinusoid_table`), unscaled.

    ``abs_pos`` multiplies x by sqrt(d_model) before adding encodings of norm sqrt(D/2): in the small tiny_zh
    Conformer (D = 128) the scaled input's norm was about 76 against the positions' 8; unscaled it was 25-35 (trained
    models of docs/small_confs.md, the removed probe position_share.py of fd101fd). The small confs use it for that
    larger share: their decoder's source attention then drops fewer repeated words.
    """

    table = staticmethod(whisper_sinusoid_table)

    def __init__(self, *, d_model: int, dropout_rate: float, max_len: int = 1500):
        super().__init__(d_model=d_model, dropout_rate=dropout_rate, max_len=max_len)
        self.xscale = 1.0


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
    "abs_pos_whisper": WhisperPositionalEncoding,
    "rel_pos": RelPositionalEncoding,
    "no_pos": NoPositionalEncoding,
}
