"""Transformer and Conformer encoders with U2 chunk streaming (registry ``ENCODER_CLASSES``).

Constructors take WeNet's ``encoder_conf`` keys as keyword-only arguments plus ``attention_conf`` (extra keyword
arguments for the attention class, e.g. UDPS's ``alpha_init``); the signatures are the schema that
``wenet_udps.utils.schema`` checks ``encoder_conf`` against. The self-attention class is looked up in ``ATTENTION_CLASSES`` by ``selfattention_layer_type``.
"""
from typing import Dict, List, Optional, Tuple

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from wenet_udps.transformer.attention import attention_classes
from wenet_udps.transformer.convolution import ConvolutionModule
from wenet_udps.transformer.embedding import POS_ENC_CLASSES
from wenet_udps.transformer.encoder_layer import ConformerEncoderLayer, TransformerEncoderLayer
from wenet_udps.transformer.positionwise_feed_forward import ACTIVATION_CLASSES, PositionwiseFeedForward
from wenet_udps.transformer.subsampling import SUBSAMPLING_CLASSES
from wenet_udps.utils.mask import add_optional_chunk_mask, make_pad_mask
from wenet_udps.utils.registry import lookup

def _build_attention(name: str, n_head: int, n_feat: int, dropout_rate: float,
                     attention_conf: Dict) -> nn.Module:
    """An encoder self-attention module from the registry; ``attention_conf`` was checked by the model builder."""
    # Only kind "self": cross-attention reuses its cache as is (decoder memory), wrong for encoder streaming.
    cls = lookup(attention_classes("self"), name, "encoder_conf.selfattention_layer_type")
    return cls(n_head=n_head, n_feat=n_feat, dropout_rate=dropout_rate, **attention_conf)


class BaseEncoder(nn.Module):
    """Input layer (with positional encoding), a stack of blocks (``encoders``), ``after_norm``.

    Subclasses fill ``self.encoders``. Streaming follows WeNet's U2: with ``use_dynamic_chunk`` (random chunk
    sizes in training) or ``static_chunk_size`` the model learns chunk-limited attention, and
    :meth:`forward_chunk` decodes with attention and convolution caches.
    """

    def __init__(self, *, input_size: int, output_size: int = 256, dropout_rate: float = 0.1,
                 positional_dropout_rate: float = 0.1, input_layer: str = "conv2d",
                 pos_enc_layer_type: str = "abs_pos", normalize_before: bool = True, static_chunk_size: int = 0,
                 use_dynamic_chunk: bool = False, global_cmvn: Optional[nn.Module] = None,
                 use_dynamic_left_chunk: bool = False, gradient_checkpointing: bool = False):
        super().__init__()
        self._output_size = output_size
        self.global_cmvn = global_cmvn
        pos_enc_class = lookup(POS_ENC_CLASSES, pos_enc_layer_type, "encoder_conf.pos_enc_layer_type")
        subsampling_class = lookup(SUBSAMPLING_CLASSES, input_layer, "encoder_conf.input_layer")
        self.embed = subsampling_class(
            idim=input_size, odim=output_size, dropout_rate=dropout_rate,
            pos_enc_class=pos_enc_class(d_model=output_size, dropout_rate=positional_dropout_rate))
        self.normalize_before = normalize_before
        self.after_norm = nn.LayerNorm(output_size, eps=1e-5)
        self.static_chunk_size = static_chunk_size
        self.use_dynamic_chunk = use_dynamic_chunk
        self.use_dynamic_left_chunk = use_dynamic_left_chunk
        self.gradient_checkpointing = gradient_checkpointing
        self.encoders = nn.ModuleList()

    def output_size(self) -> int:
        """The encoder output dimension D."""
        return self._output_size

    def forward(self, xs: torch.Tensor, xs_lens: torch.Tensor, decoding_chunk_size: int = 0,
                num_decoding_left_chunks: int = -1) -> Tuple[torch.Tensor, torch.Tensor]:
        """Encode a padded batch.

        Args:
            xs: (B, T, input_size) features.
            xs_lens: (B,) valid frames.
            decoding_chunk_size: for chunk-trained models: < 0 full context, > 0 that chunk size, 0 in training
                a random chunk (dynamic chunk training); in eval mode 0 means full context (WeNet forbids 0 for
                decoding, so this only removes a random mask from evaluation).
            num_decoding_left_chunks: left chunks visible with ``decoding_chunk_size > 0``; < 0 all.
        Returns:
            encoder_out (B, T', D) and encoder_mask (B, 1, T') (True = valid frame).
        """
        masks = ~make_pad_mask(xs_lens, xs.size(1)).unsqueeze(1)
        if self.global_cmvn is not None:
            xs = self.global_cmvn(xs)
        xs, pos_emb, masks = self.embed(xs, masks)
        if decoding_chunk_size == 0 and not self.training:
            decoding_chunk_size = -1
        chunk_masks = add_optional_chunk_mask(xs, masks, self.use_dynamic_chunk, self.use_dynamic_left_chunk,
                                              decoding_chunk_size, self.static_chunk_size,
                                              num_decoding_left_chunks)
        mask_pad = masks
        for layer in self.encoders:
            if self.gradient_checkpointing and self.training:
                xs, chunk_masks, _, _ = checkpoint(layer, xs, chunk_masks, pos_emb, mask_pad, use_reentrant=False)
            else:
                xs, chunk_masks, _, _ = layer(xs, chunk_masks, pos_emb, mask_pad)
        if self.normalize_before:
            xs = self.after_norm(xs)
        return xs, masks

    def forward_chunk(self, xs: torch.Tensor, offset: int, required_cache_size: int,
                      att_cache: torch.Tensor = torch.zeros((0, 0, 0, 0)),
                      cnn_cache: torch.Tensor = torch.zeros((0, 0, 0, 0)),
                      att_mask: torch.Tensor = torch.ones((0, 0, 0), dtype=torch.bool),
                      ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Encode one chunk of one utterance, given the caches of the previous chunks.

        Args:
            xs: (1, window, input_size) raw features of this chunk, ``window = (chunk-1) * subsampling_rate +
                right_context + 1`` frames (the last chunk may be shorter).
            offset: output frames produced so far (absolute index of this chunk's first output frame).
            required_cache_size: output frames of left context to keep for the next chunk
                (``chunk * num_left_chunks``); < 0 keep everything, 0 keep nothing.
            att_cache: (elayers, H, T_cache, 2*d_k) cached keys|values per layer; empty at the start.
            cnn_cache: (elayers, 1, D, K-1) conv left context per layer; empty at the start.
            att_mask: (1, chunk, T_cache + chunk) or empty (attend to the whole cache and chunk).
        Returns:
            out (1, chunk, D), new_att_cache (elayers, H, T_cache', 2*d_k), new_cnn_cache (elayers, 1, D, K-1).
        """
        if xs.size(0) != 1:
            raise ValueError(f"forward_chunk decodes one utterance at a time, got batch size {xs.size(0)}")
        tmp_masks = torch.ones(1, 1, xs.size(1), dtype=torch.bool, device=xs.device)
        if self.global_cmvn is not None:
            xs = self.global_cmvn(xs)
        xs, _, _ = self.embed(xs, tmp_masks, offset)
        elayers, cache_t1 = att_cache.size(0), att_cache.size(2)
        chunk_size = xs.size(1)
        attention_key_size = cache_t1 + chunk_size
        # Keys are the cached frames followed by this chunk: their positions start cache_t1 frames back.
        pos_emb = self.embed.position_encoding(offset - cache_t1, attention_key_size)
        if required_cache_size < 0:
            next_cache_start = 0
        elif required_cache_size == 0:
            next_cache_start = attention_key_size
        else:
            next_cache_start = max(attention_key_size - required_cache_size, 0)
        new_att_caches: List[torch.Tensor] = []
        new_cnn_caches: List[torch.Tensor] = []
        for i, layer in enumerate(self.encoders):
            xs, _, new_att_cache, new_cnn_cache = layer(
                xs, att_mask, pos_emb,
                att_cache=att_cache[i:i + 1] if elayers > 0 else att_cache,
                cnn_cache=cnn_cache[i] if cnn_cache.size(0) > 0 else cnn_cache)
            new_att_caches.append(new_att_cache[:, :, next_cache_start:, :])
            new_cnn_caches.append(new_cnn_cache.unsqueeze(0))
        if self.normalize_before:
            xs = self.after_norm(xs)
        return xs, torch.cat(new_att_caches, dim=0), torch.cat(new_cnn_caches, dim=0)

    def forward_chunk_by_chunk(self, xs: torch.Tensor, decoding_chunk_size: int,
                               num_decoding_left_chunks: int = -1) -> Tuple[torch.Tensor, torch.Tensor]:
        """Simulate streaming: feed one utterance chunk by chunk through :meth:`forward_chunk`.

        With causal convolution (or none) the result equals :meth:`forward` with the same
        ``decoding_chunk_size`` / ``num_decoding_left_chunks`` in eval mode.

        Args:
            xs: (1, T, input_size).
            decoding_chunk_size: output frames per chunk (> 0).
            num_decoding_left_chunks: left chunks kept in the attention cache; < 0 all.
        Returns:
            (1, T', D) output and a (1, 1, T') all-True mask.
        """
        if decoding_chunk_size <= 0:
            raise ValueError(f"decoding_chunk_size must be > 0 for chunk-by-chunk decoding, got "
                             f"{decoding_chunk_size}")
        if not (self.static_chunk_size > 0 or self.use_dynamic_chunk):
            raise ValueError("chunk-by-chunk decoding needs a model trained for streaming "
                             "(encoder_conf.use_dynamic_chunk or static_chunk_size > 0)")
        subsampling = self.embed.subsampling_rate
        context = self.embed.right_context + 1
        stride = subsampling * decoding_chunk_size
        decoding_window = (decoding_chunk_size - 1) * subsampling + context
        num_frames = xs.size(1)
        required_cache_size = decoding_chunk_size * num_decoding_left_chunks
        att_cache = torch.zeros((0, 0, 0, 0), dtype=xs.dtype, device=xs.device)
        cnn_cache = torch.zeros((0, 0, 0, 0), dtype=xs.dtype, device=xs.device)
        outputs = []
        offset = 0
        for cur in range(0, num_frames - context + 1, stride):
            end = min(cur + decoding_window, num_frames)
            y, att_cache, cnn_cache = self.forward_chunk(xs[:, cur:end, :], offset, required_cache_size,
                                                         att_cache, cnn_cache)
            outputs.append(y)
            offset += y.size(1)
        ys = torch.cat(outputs, dim=1) if outputs else xs.new_zeros(1, 0, self._output_size)
        return ys, torch.ones(1, 1, ys.size(1), dtype=torch.bool, device=ys.device)


class TransformerEncoder(BaseEncoder):
    """WeNet's Transformer encoder (``encoder: transformer``): blocks of self-attention + feed-forward."""

    def __init__(self, *, input_size: int, output_size: int = 256, attention_heads: int = 4,
                 linear_units: int = 2048, num_blocks: int = 6, dropout_rate: float = 0.1,
                 positional_dropout_rate: float = 0.1, attention_dropout_rate: float = 0.0,
                 input_layer: str = "conv2d", pos_enc_layer_type: str = "abs_pos", normalize_before: bool = True,
                 static_chunk_size: int = 0, use_dynamic_chunk: bool = False,
                 global_cmvn: Optional[nn.Module] = None, use_dynamic_left_chunk: bool = False,
                 selfattention_layer_type: str = "selfattn", activation_type: str = "relu",
                 gradient_checkpointing: bool = False, attention_conf: Optional[Dict] = None):
        super().__init__(input_size=input_size, output_size=output_size, dropout_rate=dropout_rate,
                         positional_dropout_rate=positional_dropout_rate, input_layer=input_layer,
                         pos_enc_layer_type=pos_enc_layer_type, normalize_before=normalize_before,
                         static_chunk_size=static_chunk_size, use_dynamic_chunk=use_dynamic_chunk,
                         global_cmvn=global_cmvn, use_dynamic_left_chunk=use_dynamic_left_chunk,
                         gradient_checkpointing=gradient_checkpointing)
        activation_class = lookup(ACTIVATION_CLASSES, activation_type, "encoder_conf.activation_type")
        self.encoders = nn.ModuleList([
            TransformerEncoderLayer(
                size=output_size,
                self_attn=_build_attention(selfattention_layer_type, attention_heads, output_size,
                                           attention_dropout_rate, attention_conf or {}),
                feed_forward=PositionwiseFeedForward(idim=output_size, hidden_units=linear_units,
                                                     dropout_rate=dropout_rate, activation=activation_class()),
                dropout_rate=dropout_rate, normalize_before=normalize_before)
            for _ in range(num_blocks)])


class ConformerEncoder(BaseEncoder):
    """WeNet's Conformer encoder (``encoder: conformer``): macaron FF, (rel-pos) self-attention, conv module."""

    def __init__(self, *, input_size: int, output_size: int = 256, attention_heads: int = 4,
                 linear_units: int = 2048, num_blocks: int = 6, dropout_rate: float = 0.1,
                 positional_dropout_rate: float = 0.1, attention_dropout_rate: float = 0.0,
                 input_layer: str = "conv2d", pos_enc_layer_type: str = "rel_pos", normalize_before: bool = True,
                 static_chunk_size: int = 0, use_dynamic_chunk: bool = False,
                 global_cmvn: Optional[nn.Module] = None, use_dynamic_left_chunk: bool = False,
                 positionwise_conv_kernel_size: int = 1, macaron_style: bool = True,
                 selfattention_layer_type: str = "rel_selfattn", activation_type: str = "swish",
                 use_cnn_module: bool = True, cnn_module_kernel: int = 15, causal: bool = False,
                 cnn_module_norm: str = "batch_norm", gradient_checkpointing: bool = False,
                 attention_conf: Optional[Dict] = None):
        super().__init__(input_size=input_size, output_size=output_size, dropout_rate=dropout_rate,
                         positional_dropout_rate=positional_dropout_rate, input_layer=input_layer,
                         pos_enc_layer_type=pos_enc_layer_type, normalize_before=normalize_before,
                         static_chunk_size=static_chunk_size, use_dynamic_chunk=use_dynamic_chunk,
                         global_cmvn=global_cmvn, use_dynamic_left_chunk=use_dynamic_left_chunk,
                         gradient_checkpointing=gradient_checkpointing)
        if positionwise_conv_kernel_size != 1:
            # WeNet keeps this key for old configs but always builds the linear feed-forward; refuse rather
            # than silently ignore a value that asks for something else.
            raise ValueError(f"encoder_conf.positionwise_conv_kernel_size must be 1 (linear feed-forward), got "
                             f"{positionwise_conv_kernel_size}")
        activation_class = lookup(ACTIVATION_CLASSES, activation_type, "encoder_conf.activation_type")

        def feed_forward() -> PositionwiseFeedForward:
            return PositionwiseFeedForward(idim=output_size, hidden_units=linear_units, dropout_rate=dropout_rate,
                                           activation=activation_class())

        self.encoders = nn.ModuleList([
            ConformerEncoderLayer(
                size=output_size,
                self_attn=_build_attention(selfattention_layer_type, attention_heads, output_size,
                                           attention_dropout_rate, attention_conf or {}),
                feed_forward=feed_forward(),
                feed_forward_macaron=feed_forward() if macaron_style else None,
                conv_module=ConvolutionModule(channels=output_size, kernel_size=cnn_module_kernel,
                                              activation=activation_class(), norm=cnn_module_norm,
                                              causal=causal) if use_cnn_module else None,
                dropout_rate=dropout_rate, normalize_before=normalize_before)
            for _ in range(num_blocks)])


ENCODER_CLASSES = {
    "transformer": TransformerEncoder,
    "conformer": ConformerEncoder,
}
