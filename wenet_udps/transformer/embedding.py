"""Positional encodings (registry ``POS_ENC_CLASSES``: ``abs_pos``, ``abs_pos_whisper``, ``rel_pos``, ``no_pos``).

Every class has ``forward(x (B, T, D), offset) -> (x (B, T, D), pos_emb (1, T, D))`` and
``position_encoding(offset, size) -> (1 or B, size, D)``; ``offset`` is the absolute index of the first frame, so
streaming chunks get the same encodings as the full sequence.
"""
import math
from typing import Union

import torch
from torch import nn


def sinusoid_rows(position: torch.Tensor, d_model: int) -> torch.Tensor:
    """(N, d_model), the encodings of the float32 positions ``position`` (N,): ``[t, 2i] = sin(t / 10000^(2i/d))``,
    ``[t, 2i+1] = cos(t / 10000^(2i/d))``."""
    position = position.unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32, device=position.device)
                         * -(math.log(10000.0) / d_model))
    pe = torch.zeros(position.size(0), d_model, device=position.device)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return pe


def sinusoid_table(length: int, d_model: int, start: int = 0) -> torch.Tensor:
    """(length - start, d_model), the :func:`sinusoid_rows` of positions ``start .. length-1``."""
    return sinusoid_rows(torch.arange(start, length, dtype=torch.float32), d_model)


def whisper_sinusoid_rows(position: torch.Tensor, d_model: int) -> torch.Tensor:
    """(N, d_model), Whisper's encoder sinusoids of the float32 positions ``position`` (N,): ``[t, i] = sin(t *
    r^i)`` and ``[t, d/2 + i] = cos(t * r^i)`` for ``i < d/2``, with ``r = 10000^(-1/(d/2 - 1))``; d_model must be
    even and at least 4."""
    if d_model % 2 or d_model < 4:
        raise ValueError(f"encoder_conf.pos_enc_layer_type abs_pos_whisper needs an even output_size >= 4, "
                         f"got {d_model}")
    rate = math.log(10000.0) / (d_model // 2 - 1)
    angle = position.unsqueeze(1) * torch.exp(
        -rate * torch.arange(d_model // 2, dtype=torch.float32, device=position.device))
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)


def whisper_sinusoid_table(length: int, d_model: int, start: int = 0) -> torch.Tensor:
    """(length - start, d_model), the :func:`whisper_sinusoid_rows` of positions ``start .. length-1``."""
    return whisper_sinusoid_rows(torch.arange(start, length, dtype=torch.float32), d_model)


class PositionalEncoding(nn.Module):
    """Sinusoidal absolute encoding: ``x * sqrt(d_model) + pe[offset:offset+T]`` (then dropout).

    ``pe`` (1, max_len, d_model) is a persistent buffer (``...pos_enc.pe`` in WeNet checkpoints) holding
    :func:`sinusoid_table`. Positions past ``max_len`` (utterances longer than ~200 s at 40 ms per frame) are
    computed from the same formula on the fly, so any length encodes; the saved buffer keeps WeNet's shape.
    """

    table = staticmethod(sinusoid_table)  # (length, d_model) -> encodings; a subclass may swap the formula
    rows = staticmethod(sinusoid_rows)    # the same formula at given positions (N,) -> (N, d_model)

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
            pos_emb = self._at(index)
        return self.dropout(pos_emb) if apply_dropout else pos_emb

    def _at(self, index: torch.Tensor) -> torch.Tensor:
        """(B, size, D), the encodings of the positions ``index`` (B, size): the saved buffer's rows, or the
        formula's rows of these positions alone when any is past ``max_len``, and always in a traced graph (the
        exported streaming step graphs take the offset as a tensor: a table gathered there is a constant of
        ``max_len`` rows, and a deployed stream failed past them, about 200 s; eagerly a table from position 0
        cost each chunk time in the stream's length)."""
        if torch.jit.is_tracing() or int(index.max()) >= self.max_len:
            flat = self.rows(index.reshape(-1).to(torch.float32), self.d_model).to(self.pe)
            return flat.view(index.size(0), index.size(1), self.d_model)
        return nn.functional.embedding(index, self.pe[0])

    def _rows(self, start: int, size: int) -> torch.Tensor:
        """(1, size, D), positions ``start .. start+size-1``: the saved buffer's rows, or past ``max_len`` the
        formula's rows of these positions alone (a stream asks for a chunk's rows at a growing offset: a table from
        position 0 cost it time in its length, 5.4 ms a chunk at 10 min)."""
        if start + size <= self.max_len:
            return self.pe[:, start:start + size]
        return self.table(start + size, self.d_model, start).to(self.pe).unsqueeze(0)



class WhisperPositionalEncoding(PositionalEncoding):
    """WeNet's ``abs_pos_whisper``: ``x + pe`` with Whisper's sinusoids (:func:`whisper_sinusoid_table`), unscaled.

    ``abs_pos`` multiplies x by sqrt(d_model) before adding encodings of norm sqrt(D/2): in the small tiny_zh
    Conformer (D = 128) the scaled input's norm was about 76 against the positions' 8; unscaled it was 25-35 (trained
    models of docs/small_confs.md, the removed probe position_share.py of fd101fd). The small confs use it for that
    larger share: their decoder's source attention then drops fewer repeated words.
    """

    table = staticmethod(whisper_sinusoid_table)
    rows = staticmethod(whisper_sinusoid_rows)

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
