"""Input layers (registry ``SUBSAMPLING_CLASSES``: ``linear``, ``conv2d``, ``conv2d6``, ``conv2d8``).

Each maps features (B, T, idim) to (B, T', odim) and owns the positional encoding (``pos_enc``), as in WeNet,
so checkpoints have ``embed.conv.*``, ``embed.out.*`` (``embed.linear.*`` for 6x/8x) and ``embed.pos_enc.pe``.

``forward(x, x_mask, offset=0) -> (x (B, T', odim), pos_emb (1, T', odim), x_mask (B, 1, T'))``.
``subsampling_rate`` is the frame-rate reduction and ``right_context`` the extra input frames one output frame
needs (so a streaming window of ``(chunk-1) * subsampling_rate + right_context + 1`` frames gives ``chunk`` outputs).
"""
from typing import Union

import torch
from torch import nn


class BaseSubsampling(nn.Module):
    """Shared parts: the positional encoding and the streaming bookkeeping attributes."""

    subsampling_rate = 1
    right_context = 0

    def __init__(self, *, pos_enc_class: nn.Module):
        super().__init__()
        self.pos_enc = pos_enc_class

    @classmethod
    def min_frames(cls) -> int:
        """The fewest input frames that give one output frame (the data pipeline drops shorter utterances)."""
        return 1

    @classmethod
    def output_frames(cls, frames: int) -> int:
        """The output frames of ``frames`` input frames (what CTC can align a target to)."""
        return frames

    def position_encoding(self, offset: Union[int, torch.Tensor], size: int) -> torch.Tensor:
        """The positional encoding of output frames ``offset .. offset+size-1`` (1 or B, size, odim)."""
        return self.pos_enc.position_encoding(offset, size)


class LinearNoSubsampling(BaseSubsampling):
    """No subsampling: Linear -> LayerNorm -> Dropout (``out.0``, ``out.1``)."""

    def __init__(self, *, idim: int, odim: int, dropout_rate: float, pos_enc_class: nn.Module):
        super().__init__(pos_enc_class=pos_enc_class)
        self.out = nn.Sequential(nn.Linear(idim, odim), nn.LayerNorm(odim, eps=1e-5), nn.Dropout(dropout_rate))

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor, offset: Union[int, torch.Tensor] = 0):
        """x (B, T, idim), x_mask (B, 1, T) -> (B, T, odim), pos_emb, x_mask unchanged."""
        x, pos_emb = self.pos_enc(self.out(x), offset)
        return x, pos_emb, x_mask


class _Conv2dSubsampling(BaseSubsampling):
    """Stride-2/3 valid 2-D convolutions over (time, frequency), ReLU after each, then a linear projection.

    ``kernels_strides`` lists (kernel, stride) per convolution; a valid convolution maps length n to
    ``(n - kernel) // stride + 1``, which is what both the mask slicing and the linear input size follow.
    """

    def __init__(self, *, idim: int, odim: int, pos_enc_class: nn.Module, kernels_strides, linear_name: str):
        super().__init__(pos_enc_class=pos_enc_class)
        layers = []
        freq = idim
        right_context = 0
        rate = 1
        for i, (kernel, stride) in enumerate(kernels_strides):
            layers += [nn.Conv2d(1 if i == 0 else odim, odim, kernel, stride), nn.ReLU()]
            freq = (freq - kernel) // stride + 1
            right_context += (kernel - 1) * rate
            rate *= stride
        if freq < 1:
            raise ValueError(f"input_size {idim} is too small for {type(self).__name__} (needs >= "
                             f"{self._min_idim(kernels_strides)} feature bins)")
        self.conv = nn.Sequential(*layers)
        self.kernels_strides = tuple(kernels_strides)
        self.subsampling_rate = rate
        self.right_context = right_context
        self.linear_name = linear_name
        # WeNet names the projection ``out.0`` (conv2d) or ``linear`` (conv2d6/conv2d8); keep both layouts.
        projection = nn.Linear(odim * freq, odim)
        setattr(self, linear_name, nn.Sequential(projection) if linear_name == "out" else projection)

    KERNELS_STRIDES: tuple = ()

    @classmethod
    def min_frames(cls) -> int:
        return cls._min_idim(cls.KERNELS_STRIDES)

    @classmethod
    def output_frames(cls, frames: int) -> int:
        for kernel, stride in cls.KERNELS_STRIDES:
            frames = max(0, (frames - kernel) // stride + 1)
        return frames

    @staticmethod
    def _min_idim(kernels_strides) -> int:
        n = 1
        for kernel, stride in reversed(kernels_strides):
            n = (n - 1) * stride + kernel
        return n

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor, offset: Union[int, torch.Tensor] = 0):
        """x (B, T, idim), x_mask (B, 1, T) -> x (B, T', odim), pos_emb (1, T', odim), x_mask (B, 1, T')."""
        x = self.conv(x.unsqueeze(1))  # (B, odim, T', F')
        b, c, t, f = x.size()
        x = getattr(self, self.linear_name)(x.transpose(1, 2).reshape(b, t, c * f))
        x, pos_emb = self.pos_enc(x, offset)
        # A valid conv output frame j covers inputs j*stride .. j*stride+kernel-1; it is valid iff its last
        # input frame is, i.e. keep input-mask entries kernel-1, kernel-1+stride, ...
        for kernel, stride in self.kernels_strides:
            x_mask = x_mask[:, :, kernel - 1::stride]
        return x, pos_emb, x_mask


class Conv2dSubsampling4(_Conv2dSubsampling):
    """4x subsampling: two 3x3 stride-2 convolutions (``conv.0``, ``conv.2``) and ``out.0``."""

    KERNELS_STRIDES = ((3, 2), (3, 2))

    def __init__(self, *, idim: int, odim: int, dropout_rate: float, pos_enc_class: nn.Module):
        super().__init__(idim=idim, odim=odim, pos_enc_class=pos_enc_class, kernels_strides=self.KERNELS_STRIDES,
                         linear_name="out")


class Conv2dSubsampling6(_Conv2dSubsampling):
    """6x subsampling: 3x3 stride 2 then 5x5 stride 3 (``conv.0``, ``conv.2``) and ``linear``."""

    KERNELS_STRIDES = ((3, 2), (5, 3))

    def __init__(self, *, idim: int, odim: int, dropout_rate: float, pos_enc_class: nn.Module):
        super().__init__(idim=idim, odim=odim, pos_enc_class=pos_enc_class, kernels_strides=self.KERNELS_STRIDES,
                         linear_name="linear")


class Conv2dSubsampling8(_Conv2dSubsampling):
    """8x subsampling: three 3x3 stride-2 convolutions (``conv.0/2/4``) and ``linear``."""

    KERNELS_STRIDES = ((3, 2), (3, 2), (3, 2))

    def __init__(self, *, idim: int, odim: int, dropout_rate: float, pos_enc_class: nn.Module):
        super().__init__(idim=idim, odim=odim, pos_enc_class=pos_enc_class,
                         kernels_strides=self.KERNELS_STRIDES, linear_name="linear")


SUBSAMPLING_CLASSES = {
    "linear": LinearNoSubsampling,
    "conv2d": Conv2dSubsampling4,
    "conv2d6": Conv2dSubsampling6,
    "conv2d8": Conv2dSubsampling8,
}
