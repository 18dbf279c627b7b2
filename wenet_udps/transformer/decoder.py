"""Attention decoders: ``DECODER_CLASSES`` = ``transformer`` (left-to-right) and ``bitransformer`` (plus right-to-left).

Parameter names equal WeNet's (``embed.0.weight``, ``embed.1.pe``, ``decoders.N.{self_attn,src_attn,feed_forward,
norm1,norm2,norm3}``, ``after_norm``, ``output_layer``; ``left_decoder.*`` / ``right_decoder.*`` for the
bidirectional one), so WeNet checkpoints load.
"""
from typing import Dict, List, Optional, Tuple

import torch
from torch import nn

from wenet_udps.transformer.attention import attention_classes
from wenet_udps.transformer.decoder_layer import DecoderLayer
from wenet_udps.transformer.embedding import PositionalEncoding
from wenet_udps.transformer.positionwise_feed_forward import ACTIVATION_CLASSES, PositionwiseFeedForward
from wenet_udps.transformer.step_cache import StepCache
from wenet_udps.utils.mask import make_pad_mask, subsequent_mask
from wenet_udps.utils.registry import lookup
from wenet_udps.utils.schema import route

# Token input layers of the decoder (WeNet's ``input_layer``); only the embedding + absolute positions exists.
DECODER_INPUT_LAYERS = ("embed",)


def _keep_torch_init(weight: torch.Tensor) -> None:
    """Leave ``nn.Embedding``'s N(0, 1) (PyTorch's default, and WeNet's). Draws nothing from the RNG, so a
    model built with this choice is bitwise the one built before the key existed."""


def _scaled_normal_init(weight: torch.Tensor) -> None:
    """N(0, 1/D): after the sqrt(D) scale each dimension has unit variance, the scale of the sinusoidal
    positions (tensor2tensor's and fairseq's initialisation). With N(0, 1) the positions are ~6 % of the
    decoder input's norm at D=128, and a decoder trained for minutes did not learn to count repeated tokens
    (妈妈 -> 妈). Not free: on FSDD it also made scaled-dot worse on an unseen speaker (docs/small_confs.md)."""
    nn.init.normal_(weight, mean=0.0, std=weight.size(1) ** -0.5)


# Initialisations of the decoder's token embedding (``decoder_conf.embed_init``).
EMBED_INITS = {"torch": _keep_torch_init, "scaled": _scaled_normal_init}

# Arguments every attention class receives from the decoder itself, never from ``attention_conf``.
_ATTENTION_CORE_ARGS = ("n_head", "n_feat", "dropout_rate")


class TransformerDecoder(nn.Module):
    """Left-to-right Transformer decoder over the encoder output.

    Args:
        vocab_size: output vocabulary V.
        encoder_output_size: model dimension D (equals the encoder's).
        attention_heads, linear_units, num_blocks: block sizes.
        dropout_rate: residual/feed-forward dropout; positional_dropout_rate: after the embedding.
        self_attention_dropout_rate, src_attention_dropout_rate: attention-weight dropout.
        input_layer: ``embed`` (token embedding + absolute positional encoding).
        embed_init: ``EMBED_INITS`` name: ``torch`` (N(0, 1), WeNet's) or ``scaled`` (N(0, 1/D)).
        use_output_layer: project to V (False leaves D-dim outputs).
        normalize_before: pre-norm blocks plus a final ``after_norm``.
        activation_type: feed-forward activation (``relu`` like WeNet's decoder).
        selfattention_layer_type, src_attention_layer_type: ``ATTENTION_CLASSES`` names of the two sites.
        attention_conf: extra keyword arguments for the attention classes (e.g. UDPS ``alpha_init``);
            each site gets only the keys its class accepts.
    """

    def __init__(self, *, vocab_size: int, encoder_output_size: int, attention_heads: int = 4,
                 linear_units: int = 2048, num_blocks: int = 6, dropout_rate: float = 0.1,
                 positional_dropout_rate: float = 0.1, self_attention_dropout_rate: float = 0.0,
                 src_attention_dropout_rate: float = 0.0, input_layer: str = "embed", embed_init: str = "torch",
                 use_output_layer: bool = True, normalize_before: bool = True, activation_type: str = "relu",
                 selfattention_layer_type: str = "selfattn", src_attention_layer_type: str = "crossattn",
                 attention_conf: Optional[Dict] = None):
        super().__init__()
        if input_layer not in DECODER_INPUT_LAYERS:
            raise ValueError(f"unknown decoder_conf.input_layer {input_layer!r}; valid choices: "
                             f"{', '.join(DECODER_INPUT_LAYERS)}")
        d = encoder_output_size
        # Each site takes its kind only (a self type has no memory cache, a cross type no step cache).
        self_cls = lookup(attention_classes("self"), selfattention_layer_type, "decoder_conf.selfattention_layer_type")
        src_cls = lookup(attention_classes("cross"), src_attention_layer_type, "decoder_conf.src_attention_layer_type")
        if self_cls.uses_pos_emb:
            raise ValueError(f"decoder_conf.selfattention_layer_type {selfattention_layer_type!r} needs relative "
                             "position embeddings, which the decoder does not have")
        activation = lookup(ACTIVATION_CLASSES, activation_type, "decoder_conf.activation_type")
        # One attention_conf serves both sites (checked by the model builder): each takes the keys it accepts.
        confs = {site: route(attention_conf or {}, cls, _ATTENTION_CORE_ARGS)
                 for site, cls in (("self", self_cls), ("src", src_cls))}
        self.selfattention_layer_type = selfattention_layer_type
        self.src_attention_layer_type = src_attention_layer_type
        self.embed = nn.Sequential(nn.Embedding(vocab_size, d),
                                   PositionalEncoding(d_model=d, dropout_rate=positional_dropout_rate))
        lookup(EMBED_INITS, embed_init, "decoder_conf.embed_init")(self.embed[0].weight)
        self.normalize_before = normalize_before
        self.after_norm = nn.LayerNorm(d, eps=1e-5)
        self.use_output_layer = use_output_layer
        self.output_layer = nn.Linear(d, vocab_size) if use_output_layer else nn.Identity()
        self.num_blocks = num_blocks
        self.decoders = nn.ModuleList([
            DecoderLayer(
                size=d,
                self_attn=self_cls(n_head=attention_heads, n_feat=d, dropout_rate=self_attention_dropout_rate,
                                   **confs["self"]),
                src_attn=src_cls(n_head=attention_heads, n_feat=d, dropout_rate=src_attention_dropout_rate,
                                 **confs["src"]),
                feed_forward=PositionwiseFeedForward(idim=d, hidden_units=linear_units, dropout_rate=dropout_rate,
                                                     activation=activation()),
                dropout_rate=dropout_rate,
                normalize_before=normalize_before,
            ) for _ in range(num_blocks)
        ])

    def forward(self, memory: torch.Tensor, memory_mask: torch.Tensor, ys_in_pad: torch.Tensor,
                ys_in_lens: torch.Tensor, r_ys_in_pad: torch.Tensor = torch.empty(0),
                reverse_weight: float = 0.0, memory_caches: Optional[List[torch.Tensor]] = None
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Teacher-forced decoding of whole target sequences.

        Args:
            memory: (B, T, D) encoder output; memory_mask: (B, 1, T) bool.
            ys_in_pad: (B, L) input tokens ([sos, y...], padded); ys_in_lens: (B,).
            r_ys_in_pad, reverse_weight: unused here (kept for the bidirectional decoder's signature).
            memory_caches: ``memory_caches(memory)`` (None: projected from ``memory``), e.g. made once per
                utterance and repeated for its hypotheses when rescoring.
        Returns:
            logits (B, L, V), torch.tensor(0.0) (no right-to-left branch), olens (B, L) valid keys per row.
        """
        maxlen = ys_in_pad.size(1)
        tgt_mask = ~make_pad_mask(ys_in_lens, maxlen).unsqueeze(1)
        tgt_mask = tgt_mask & subsequent_mask(maxlen, device=tgt_mask.device).unsqueeze(0)
        x, _ = self.embed(ys_in_pad)
        for i, layer in enumerate(self.decoders):
            x, tgt_mask, memory, memory_mask = layer(x, tgt_mask, memory, memory_mask,
                                                     memory_cache=None if memory_caches is None else memory_caches[i])
        if self.normalize_before:
            x = self.after_norm(x)
        x = self.output_layer(x)
        olens = tgt_mask.sum(1)
        return x, torch.tensor(0.0), olens

    def memory_caches(self, memory: torch.Tensor) -> List[torch.Tensor]:
        """Each block's source-attention cache of ``memory`` (B, T, D), for ``forward_one_step``'s
        ``memory_caches``: a search makes them once instead of projecting the memory again at every step."""
        return [layer.src_attn.memory_cache(memory, memory) for layer in self.decoders]

    def forward_one_step(self, memory: torch.Tensor, memory_mask: torch.Tensor, tgt: torch.Tensor,
                         tgt_mask: torch.Tensor, cache: Optional[StepCache] = None,
                         memory_caches: Optional[List[torch.Tensor]] = None) -> Tuple[torch.Tensor, StepCache]:
        """Score the next token of each prefix; only the newest position runs through the blocks.

        Args:
            memory: (B, T, D); memory_mask: (B, 1, T). Each utterance once, however many prefixes it has.
            tgt: (N, L) prefixes (starting with sos), N = B * g: rows b*g .. b*g + g - 1 are utterance b's (a beam
                search's hypotheses; g = 1 for one prefix per utterance).
            tgt_mask: (N, L, L) causal mask (its last row is used).
            cache: the returned cache of the previous step (L - 1 positions), updated in place and returned: per
                block, the self-attention's entries of the positions, key and value (UDPS also the key's norm),
                each made once, at the step that added its position. A search that reorders its prefixes reorders
                the cache with them (``StepCache.reorder``, within an utterance). None (the first step): the whole
                prefix runs.
            memory_caches: ``memory_caches(memory)`` (None: projected from ``memory`` at this step).
        Returns:
            log-probabilities (N, V) of the next token, the cache (L positions).
        """
        rows, length = tgt.shape
        if rows % memory.size(0):
            raise ValueError(f"{rows} prefixes do not split evenly over the {memory.size(0)} utterances of the memory")
        if cache is None:
            cache = StepCache(len(self.decoders), rows // memory.size(0))
            x, _ = self.embed(tgt)
        else:   # only the newest token runs, at its absolute position: no step embeds the whole prefix again
            if cache.rows != rows or cache.length != length - 1:
                raise ValueError(f"decoder cache of {cache.length} positions of {cache.rows} prefixes does not hold "
                                 f"{length - 1} earlier positions of {rows} prefixes")
            x, _ = self.embed[1](self.embed[0](tgt[:, -1:]), offset=length - 1)
            tgt_mask = tgt_mask[:, -1:, :]
        for i, layer in enumerate(self.decoders):
            x = layer.step(x, tgt_mask, memory, memory_mask, cache, i,
                           memory_cache=None if memory_caches is None else memory_caches[i])
        cache.commit(x.size(1))
        y = x[:, -1]
        if self.normalize_before:
            y = self.after_norm(y)
        y = self.output_layer(y)
        return torch.log_softmax(y, dim=-1), cache


class BiTransformerDecoder(nn.Module):
    """Left-to-right decoder plus a right-to-left one (``r_num_blocks`` blocks) trained on reversed targets.

    Takes every ``TransformerDecoder`` argument plus ``r_num_blocks``; both directions share the other settings.
    Incremental decoding uses the left-to-right decoder; the right-to-left one rescores whole hypotheses.
    """

    def __init__(self, *, vocab_size: int, encoder_output_size: int, attention_heads: int = 4,
                 linear_units: int = 2048, num_blocks: int = 6, r_num_blocks: int = 0, dropout_rate: float = 0.1,
                 positional_dropout_rate: float = 0.1, self_attention_dropout_rate: float = 0.0,
                 src_attention_dropout_rate: float = 0.0, input_layer: str = "embed", embed_init: str = "torch",
                 use_output_layer: bool = True, normalize_before: bool = True, activation_type: str = "relu",
                 selfattention_layer_type: str = "selfattn", src_attention_layer_type: str = "crossattn",
                 attention_conf: Optional[Dict] = None):
        super().__init__()
        shared = dict(vocab_size=vocab_size, encoder_output_size=encoder_output_size,
                      attention_heads=attention_heads, linear_units=linear_units, dropout_rate=dropout_rate,
                      positional_dropout_rate=positional_dropout_rate,
                      self_attention_dropout_rate=self_attention_dropout_rate,
                      src_attention_dropout_rate=src_attention_dropout_rate, input_layer=input_layer,
                      embed_init=embed_init, use_output_layer=use_output_layer, normalize_before=normalize_before,
                      activation_type=activation_type, selfattention_layer_type=selfattention_layer_type,
                      src_attention_layer_type=src_attention_layer_type, attention_conf=attention_conf)
        self.left_decoder = TransformerDecoder(num_blocks=num_blocks, **shared)
        self.right_decoder = TransformerDecoder(num_blocks=r_num_blocks, **shared)

    def forward(self, memory: torch.Tensor, memory_mask: torch.Tensor, ys_in_pad: torch.Tensor,
                ys_in_lens: torch.Tensor, r_ys_in_pad: torch.Tensor = torch.empty(0),
                reverse_weight: float = 0.0, memory_caches: Optional[List[torch.Tensor]] = None
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Both directions; the right-to-left one runs only when ``reverse_weight > 0``.

        Args:
            memory (B, T, D), memory_mask (B, 1, T), ys_in_pad (B, L), ys_in_lens (B,),
            r_ys_in_pad (B, L) reversed targets with sos prepended,
            memory_caches: ``memory_caches(memory)`` (left blocks, then right blocks) or None.
        Returns:
            l2r logits (B, L, V), r2l logits (B, L, V) or torch.tensor(0.0), olens.
        """
        left, right = self._split(memory_caches)
        l_x, _, olens = self.left_decoder(memory, memory_mask, ys_in_pad, ys_in_lens, memory_caches=left)
        r_x = torch.tensor(0.0)
        if reverse_weight > 0.0:
            r_x, _, olens = self.right_decoder(memory, memory_mask, r_ys_in_pad, ys_in_lens, memory_caches=right)
        return l_x, r_x, olens

    def memory_caches(self, memory: torch.Tensor) -> List[torch.Tensor]:
        """The left-to-right decoder's blocks' caches, then the right-to-left one's; see
        ``TransformerDecoder.memory_caches``."""
        return self.left_decoder.memory_caches(memory) + self.right_decoder.memory_caches(memory)

    def _split(self, memory_caches: Optional[List[torch.Tensor]]
               ) -> Tuple[Optional[List[torch.Tensor]], Optional[List[torch.Tensor]]]:
        if memory_caches is None:
            return None, None
        n = len(self.left_decoder.decoders)
        return memory_caches[:n], memory_caches[n:]

    def forward_one_step(self, memory: torch.Tensor, memory_mask: torch.Tensor, tgt: torch.Tensor,
                         tgt_mask: torch.Tensor, cache: Optional[StepCache] = None,
                         memory_caches: Optional[List[torch.Tensor]] = None) -> Tuple[torch.Tensor, StepCache]:
        """Incremental left-to-right step; see ``TransformerDecoder.forward_one_step``."""
        return self.left_decoder.forward_one_step(memory, memory_mask, tgt, tgt_mask, cache,
                                                  self._split(memory_caches)[0])


DECODER_CLASSES = {
    "transformer": TransformerDecoder,
    "bitransformer": BiTransformerDecoder,
}
