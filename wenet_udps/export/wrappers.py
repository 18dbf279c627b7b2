"""Export-friendly views of an ``ASRModel``: tensor-only inputs and outputs, no Python-side state.

Traced by ``torch.jit.trace`` (TorchScript) and ``torch.onnx.export`` alike; the same code path serves both
attention types, as tracing records whatever ops the attention runs (scaled-dot or UDPS).
"""
from typing import Tuple

import torch
from torch import nn


class FullEncoder(nn.Module):
    """Whole-utterance encoder + CTC head.

    forward(speech (B, T, F) float, speech_lengths (B,) int64)
        -> encoder_out (B, T', D), encoder_out_lens (B,) int64, ctc_log_probs (B, T', V).
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, speech: torch.Tensor, speech_lengths: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        encoder_out, encoder_mask = self.model.encoder(speech, speech_lengths, -1, -1)
        lens = encoder_mask.squeeze(1).sum(1).to(torch.int64)
        return encoder_out, lens, self.model.ctc_activation(encoder_out)


class ChunkEncoder(nn.Module):
    """One streaming step of the encoder (``encoder.forward_chunk``) + CTC head, batch size 1.

    forward(chunk (1, W, F), offset (1,) int64 output frames so far, att_cache (L, H, C, 2*d_k),
            cnn_cache (L, 1, D, K-1), att_mask (1, 1, C + T') bool)
        -> out (1, T', D), ctc_log_probs (1, T', V), new_att_cache, new_cnn_cache.

    ``left_chunks > 0``: the cache has a fixed size C = chunk_size * left_chunks (zeros at the start, the unfilled
    slots masked out by ``att_mask``), so the traced graph's cache slicing is valid for every step.
    ``left_chunks < 0``: the cache grows (C = all previous output frames) and ``att_mask`` is all True.
    Transformer encoders (no convolution module) take and return an empty-like (L, 1, D, 0) cnn cache.
    """

    def __init__(self, model: nn.Module, chunk_size: int, left_chunks: int):
        super().__init__()
        if chunk_size <= 0:
            raise ValueError(f"chunk_size must be > 0 for the chunk encoder, got {chunk_size}")
        self.model = model
        self.chunk_size = chunk_size
        self.required_cache_size = chunk_size * left_chunks if left_chunks > 0 else -1

    def forward(self, chunk: torch.Tensor, offset: torch.Tensor, att_cache: torch.Tensor, cnn_cache: torch.Tensor,
                att_mask: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        out, new_att_cache, new_cnn_cache = self.model.encoder.forward_chunk(
            chunk, offset, self.required_cache_size, att_cache, cnn_cache, att_mask)
        return out, self.model.ctc_activation(out), new_att_cache, new_cnn_cache


class RescoringDecoder(nn.Module):
    """Attention decoder over N hypotheses of one utterance (WeNet runtime layout: sos prepended).

    forward(hyps (N, L) int64, hyps_lens (N,) int64, encoder_out (1, T', D))
        -> l2r log-probs (N, L, V), r2l log-probs (N, L, V) (zeros without a right-to-left decoder).
    """

    def __init__(self, model: nn.Module, reverse_weight: float):
        super().__init__()
        self.model = model
        self.reverse_weight = reverse_weight

    def forward(self, hyps: torch.Tensor, hyps_lens: torch.Tensor, encoder_out: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor]:
        l2r, r2l = self.model.forward_attention_decoder(hyps, hyps_lens, encoder_out, self.reverse_weight)
        if self.reverse_weight <= 0.0:
            r2l = torch.zeros_like(l2r)
        return l2r, r2l


def chunk_window(encoder: nn.Module, chunk_size: int) -> Tuple[int, int]:
    """(input frames per chunk, input-frame stride between chunks) for ``chunk_size`` output frames."""
    subsampling = encoder.embed.subsampling_rate
    context = encoder.embed.right_context + 1
    return (chunk_size - 1) * subsampling + context, subsampling * chunk_size


def initial_caches(model: nn.Module, chunk_size: int, left_chunks: int, dtype=torch.float32
                   ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Zero att_cache (L, H, C, 2*d_k) and cnn_cache (L, 1, D, K-1) for the first chunk."""
    encoder = model.encoder
    layers = len(encoder.encoders)
    attn = encoder.encoders[0].self_attn
    heads, d_k = attn.h, attn.d_k
    cache_len = chunk_size * left_chunks if left_chunks > 0 else 0
    att_cache = torch.zeros(layers, heads, cache_len, 2 * d_k, dtype=dtype)
    conv = getattr(encoder.encoders[0], "conv_module", None)
    lorder = getattr(conv, "lorder", 0) if conv is not None else 0
    cnn_cache = torch.zeros(layers, 1, encoder.output_size(), lorder, dtype=dtype)
    return att_cache, cnn_cache


def chunk_mask(att_cache_len: int, valid_cache: int, chunk_out: int) -> torch.Tensor:
    """(1, 1, C + T') bool: the first C - valid_cache cache slots (not yet filled) are masked out."""
    mask = torch.ones(1, 1, att_cache_len + chunk_out, dtype=torch.bool)
    mask[:, :, :att_cache_len - valid_cache] = False
    return mask
