"""The Conformer convolution module, with a left-context cache for causal streaming."""
from typing import Tuple

import torch
from torch import nn

_EMPTY_MASK = torch.ones((0, 0, 0), dtype=torch.bool)
_EMPTY_CACHE = torch.zeros((0, 0, 0))

NORM_TYPES = ("batch_norm", "layer_norm")


class ConvolutionModule(nn.Module):
    """pointwise_conv1 (C -> 2C) -> GLU -> depthwise_conv (kernel K) -> norm -> activation -> pointwise_conv2.

    Args:
        channels: C.
        kernel_size: K; must be odd unless ``causal``.
        activation: activation module after the norm (default ReLU; Conformer configs use swish).
        norm: ``batch_norm`` (WeNet's default) or ``layer_norm``; the parameters are ``norm.*`` either way.
        causal: pad K-1 frames on the left only, so an output frame never sees the future; needed for
            streaming with a conv cache that gives the same result as the full sequence.
        bias: biases on the three convolutions.
    """

    def __init__(self, *, channels: int, kernel_size: int = 15, activation: nn.Module = None,
                 norm: str = "batch_norm", causal: bool = False, bias: bool = True):
        super().__init__()
        if norm not in NORM_TYPES:
            raise ValueError(f"unknown cnn_module_norm {norm!r}; valid choices: {', '.join(NORM_TYPES)}")
        if causal:
            padding = 0
            self.lorder = kernel_size - 1
        else:
            if kernel_size % 2 != 1:
                raise ValueError(f"cnn_module_kernel must be odd for a non-causal conv module, got {kernel_size}")
            padding = (kernel_size - 1) // 2
            self.lorder = 0
        self.pointwise_conv1 = nn.Conv1d(channels, 2 * channels, kernel_size=1, bias=bias)
        self.depthwise_conv = nn.Conv1d(channels, channels, kernel_size, stride=1, padding=padding,
                                        groups=channels, bias=bias)
        self.use_layer_norm = norm == "layer_norm"
        self.norm = nn.LayerNorm(channels) if self.use_layer_norm else nn.BatchNorm1d(channels)
        self.pointwise_conv2 = nn.Conv1d(channels, channels, kernel_size=1, bias=bias)
        self.activation = activation if activation is not None else nn.ReLU()

    def forward(self, x: torch.Tensor, mask_pad: torch.Tensor = _EMPTY_MASK,
                cache: torch.Tensor = _EMPTY_CACHE) -> Tuple[torch.Tensor, torch.Tensor]:
        """Convolve over time.

        Args:
            x: (B, T, C).
            mask_pad: (B, 1, T) True = valid; padded frames are zeroed at the input, before the depthwise
                convolution and at the output, so padding never leaks into valid frames. Empty = no padding.
            cache: (B, C, K-1) the last K-1 input frames of the previous chunk (causal only); empty = start.
        Returns:
            (B, T, C) and the new cache (B, C, K-1) (empty (0, 0, 0) when not causal).
        """
        x = x.transpose(1, 2)  # (B, C, T)
        if mask_pad.size(2) > 0:
            x = x.masked_fill(~mask_pad, 0.0)
        if self.lorder > 0:
            if cache.size(2) == 0:
                x = nn.functional.pad(x, (self.lorder, 0), "constant", 0.0)
            else:
                if cache.size(0) != x.size(0) or cache.size(1) != x.size(1):
                    raise ValueError(f"cnn cache {tuple(cache.shape)} does not match input (B={x.size(0)}, "
                                     f"C={x.size(1)})")
                x = torch.cat((cache.to(x.dtype), x), dim=2)
            new_cache = x[:, :, -self.lorder:]
        else:
            new_cache = x.new_zeros((0, 0, 0))
        x = nn.functional.glu(self.pointwise_conv1(x), dim=1)
        if mask_pad.size(2) > 0:
            # pointwise_conv1's bias makes zeroed padding non-zero again; re-zero it so the depthwise conv sees
            # the same zeros at the end of a short utterance in a batch as its own zero padding gives when the
            # utterance is decoded alone (WeNet skips this, so its batch outputs depend on the padding).
            # The causal left context (cache or left pad) is kept as WeNet has it.
            context = mask_pad.new_ones(mask_pad.size(0), 1, x.size(2) - mask_pad.size(2))
            x = x.masked_fill(~torch.cat((context, mask_pad), dim=2), 0.0)
        x = self.depthwise_conv(x)
        if self.use_layer_norm:
            x = self.activation(self.norm(x.transpose(1, 2))).transpose(1, 2)
        else:
            x = self.activation(self.norm(x))
        x = self.pointwise_conv2(x)
        if mask_pad.size(2) > 0:
            x = x.masked_fill(~mask_pad, 0.0)
        return x.transpose(1, 2), new_cache
