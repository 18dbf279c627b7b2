"""Hybrid CTC/attention ASR model (WeNet's ``asr_model``): encoder, CTC head, attention decoder, decoding."""
from typing import Callable, Dict, List, Mapping, Optional, Tuple, Union

import torch
from torch import nn

from wenet_udps.transformer.context_graph import ContextGraph
from wenet_udps.transformer.ctc import CTC
from wenet_udps.transformer.decode_options import check_decode_options, value_for
from wenet_udps.transformer.joint_search import joint_beam_search
from wenet_udps.transformer.label_smoothing_loss import LabelSmoothingLoss
from wenet_udps.transformer.modes import DECODING_METHODS, JOINT_METHODS, LM_METHODS
from wenet_udps.transformer.search import DecodeResult, attention_beam_search, attention_rescoring, ctc_greedy_search, \
    ctc_prefix_beam_search
from wenet_udps.utils.common import IGNORE_ID, add_sos_eos, reverse_pad_list, th_accuracy
from wenet_udps.utils.mask import make_pad_mask

CtcWeight = Union[float, Mapping[str, float]]  # one weight for every mode, or one per mode (decode_options.value_for)


class ASRModel(nn.Module):
    """Encoder + CTC + attention decoder, trained with ``ctc_weight * L_ctc + (1 - ctc_weight) * L_att``.

    Args:
        vocab_size: output vocabulary V.
        encoder: module with WeNet's encoder interface (docs/design.md).
        decoder: a ``DECODER_CLASSES`` decoder.
        ctc: the CTC head.
        ctc_weight: weight of the CTC loss; 0 skips the CTC branch, 1 skips the decoder.
        ignore_id: padding id of the targets.
        reverse_weight: weight of the right-to-left decoder loss (``bitransformer`` only).
        lsm_weight: label smoothing of the attention loss.
        length_normalized_loss: divide the attention loss by the token count instead of the batch size.
        special_tokens: ``tokenizer_conf.special_tokens``; ``<sos>`` / ``<eos>`` ids, else both are V - 1.
    """

    def __init__(self, *, vocab_size: int, encoder: nn.Module, decoder: nn.Module, ctc: CTC,
                 ctc_weight: float = 0.5, ignore_id: int = IGNORE_ID, reverse_weight: float = 0.0,
                 lsm_weight: float = 0.0, length_normalized_loss: bool = False,
                 special_tokens: Optional[Dict[str, int]] = None):
        super().__init__()
        if not 0.0 <= ctc_weight <= 1.0:
            raise ValueError(f"model_conf.ctc_weight must be in [0, 1], got {ctc_weight}")
        if not 0.0 <= reverse_weight <= 1.0:
            raise ValueError(f"model_conf.reverse_weight must be in [0, 1], got {reverse_weight}")
        special_tokens = special_tokens or {}
        self.sos = int(special_tokens.get("<sos>", vocab_size - 1))
        self.eos = int(special_tokens.get("<eos>", vocab_size - 1))
        for name, idx in (("<sos>", self.sos), ("<eos>", self.eos)):
            if not 0 <= idx < vocab_size:
                raise ValueError(f"tokenizer_conf.special_tokens {name} = {idx} outside the vocabulary "
                                 f"[0, {vocab_size})")
        self.vocab_size = vocab_size
        self.special_tokens = dict(special_tokens)
        self.ignore_id = ignore_id
        self.ctc_weight = ctc_weight
        self.reverse_weight = reverse_weight
        self.encoder = encoder
        self.decoder = decoder
        self.ctc = ctc
        self.criterion_att = LabelSmoothingLoss(size=vocab_size, padding_idx=ignore_id, smoothing=lsm_weight,
                                                normalize_length=length_normalized_loss)

    def forward(self, speech: torch.Tensor, speech_lengths: torch.Tensor, text: torch.Tensor,
                text_lengths: torch.Tensor) -> Dict[str, Optional[torch.Tensor]]:
        """Training losses.

        Args:
            speech: (B, T, F) features; speech_lengths: (B,).
            text: (B, L) token ids padded with ``ignore_id``; text_lengths: (B,).
        Returns:
            ``loss``, ``loss_ctc`` (None if ctc_weight is 0), ``loss_att`` and ``th_accuracy``
            (None if ctc_weight is 1).
        """
        if not (speech.size(0) == speech_lengths.size(0) == text.size(0) == text_lengths.size(0)):
            raise ValueError(f"batch sizes differ: speech {speech.size(0)}, speech_lengths "
                             f"{speech_lengths.size(0)}, text {text.size(0)}, text_lengths {text_lengths.size(0)}")
        encoder_out, encoder_mask = self.encoder(speech, speech_lengths)
        encoder_out_lens = encoder_mask.squeeze(1).sum(1)
        loss_ctc = None
        if self.ctc_weight != 0.0:
            loss_ctc, _ = self.ctc(encoder_out, encoder_out_lens, text, text_lengths)
        loss_att, acc_att = None, None
        if self.ctc_weight != 1.0:
            loss_att, acc_att = self._calc_att_loss(encoder_out, encoder_mask, text, text_lengths)
        if loss_ctc is None:
            loss = loss_att
        elif loss_att is None:
            loss = loss_ctc
        else:
            loss = self.ctc_weight * loss_ctc + (1.0 - self.ctc_weight) * loss_att
        return {"loss": loss, "loss_ctc": loss_ctc, "loss_att": loss_att, "th_accuracy": acc_att}

    def _calc_att_loss(self, encoder_out: torch.Tensor, encoder_mask: torch.Tensor, ys_pad: torch.Tensor,
                       ys_pad_lens: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Label-smoothed decoder loss (mixed with the right-to-left one by ``reverse_weight``) and accuracy."""
        ys_in_pad, ys_out_pad = add_sos_eos(ys_pad, self.sos, self.eos, self.ignore_id)
        ys_in_lens = ys_pad_lens + 1
        r_ys_pad = reverse_pad_list(ys_pad, ys_pad_lens, float(self.ignore_id))
        r_ys_in_pad, r_ys_out_pad = add_sos_eos(r_ys_pad, self.sos, self.eos, self.ignore_id)
        decoder_out, r_decoder_out, _ = self.decoder(encoder_out, encoder_mask, ys_in_pad, ys_in_lens,
                                                     r_ys_in_pad, self.reverse_weight)
        loss_att = self.criterion_att(decoder_out, ys_out_pad)
        if self.reverse_weight > 0.0:
            r_loss_att = self.criterion_att(r_decoder_out, r_ys_out_pad)
            loss_att = loss_att * (1.0 - self.reverse_weight) + r_loss_att * self.reverse_weight
        acc_att = th_accuracy(decoder_out.reshape(-1, self.vocab_size), ys_out_pad, ignore_label=self.ignore_id)
        return loss_att, acc_att

    def encode(self, speech: torch.Tensor, speech_lengths: torch.Tensor, decoding_chunk_size: int,
               num_decoding_left_chunks: int, simulate_streaming: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        """Encoder output (B, T', D) and mask (B, 1, T'); chunk-by-chunk with caches when simulating streaming."""
        if simulate_streaming:  # check_decode_options made sure of a chunk size and batch size 1
            return self.encoder.forward_chunk_by_chunk(speech[:, :int(speech_lengths[0])], decoding_chunk_size,
                                                       num_decoding_left_chunks)
        return self.encoder(speech, speech_lengths, decoding_chunk_size, num_decoding_left_chunks)

    @torch.no_grad()
    def decode(self, methods: List[str], speech: torch.Tensor, speech_lengths: torch.Tensor, beam_size: int,
               decoding_chunk_size: Optional[int] = None, num_decoding_left_chunks: int = -1,
               ctc_weight: Optional[CtcWeight] = None, simulate_streaming: bool = False, reverse_weight: float = 0.0,
               length_penalty: float = 0.0, blank_penalty: float = 0.0, max_len_ratio: Optional[float] = None,
               length_bonus: float = 0.0, lm_search: Optional[Callable[[torch.Tensor, torch.Tensor],
                                                                       List[DecodeResult]]] = None,
               context: Optional[ContextGraph] = None, context_weight: float = 1.0
               ) -> Dict[str, List[DecodeResult]]:
        """Decode a batch with several methods from one encoder pass per utterance (each alone, so that its result
        is the same in any batch).

        Args:
            methods: names from ``DECODING_METHODS``.
            speech: (B, T, F); speech_lengths: (B,).
            beam_size: beam of the prefix and attention searches (n-best size of rescoring).
            decoding_chunk_size: > 0 decodes with a chunk mask of that many frames (streaming behaviour);
                < 0 full context; None the model's own (full context, or its static chunk). 0 is rejected, as in
                WeNet: it would draw a random chunk size per batch and make results depend on the batch. A size
                the model cannot decode at is refused (``decode_options.check_decode_options``), as is any
                option below that these ``methods`` would ignore.
            num_decoding_left_chunks: left chunks visible per chunk (-1: all).
            ctc_weight: weight of the CTC prefix score in ``attention_rescoring``, λ of the joint modes; one value
                for every mode, a {mode: value} mapping, or None: each mode's own default (0 in the rescoring
                modes, 0.3 in the joint modes; ``decode_options.value_for``).
            simulate_streaming: run the encoder chunk by chunk with its caches (batch size 1).
            reverse_weight: weight of the right-to-left decoder in ``attention_rescoring`` (bitransformer).
            length_penalty: WeNet's: ``attention`` ranks its final beam by score / length ** length_penalty.
            blank_penalty: >= 0, subtracted from the blank logit before the CTC searches (fewer deletions when > 0).
            max_len_ratio: ``attention`` emits at most ceil(max_len_ratio * T'_b) tokens for utterance b (T'_b its
                encoder frames); None: 1.0, WeNet's bound (see ``search.attention_beam_search``).
            length_bonus: the joint modes' score per token (``joint_search.joint_beam_search``).
            lm_search: the LM modes' first pass, ``(ctc log-probs (B, T', V), lengths (B,)) -> B results`` with
                their n-best (``wenet_udps.lm.search.LmSearch``), whose ``word_scorer()`` is the word LM of
                ``joint_ctc_attention_lm``; required by the ``*_lm`` methods.
            context: hotwords (``context_graph.ContextGraph``, built by ``wenet_udps.decode.hotwords``): their bonus
                in the CTC prefix search, kept through rescoring, and per token in the joint search.
            context_weight: the weight of that bonus in the rescoring modes' final score (1: as the search gave it).
        Returns:
            method -> B ``DecodeResult``s.
        """
        unknown = [m for m in methods if m not in DECODING_METHODS]
        if unknown:
            raise ValueError(f"unknown decoding method(s) {', '.join(unknown)}; valid choices: "
                             f"{', '.join(DECODING_METHODS)}")
        if beam_size < 1:
            raise ValueError(f"beam_size must be >= 1, got {beam_size}")
        needs_lm = [m for m in methods if m in LM_METHODS]
        if needs_lm and lm_search is None:
            raise ValueError(f"{', '.join(needs_lm)} need a word LM (recognize --lm FILE)")
        if "joint_ctc_attention_lm" in methods and not hasattr(lm_search, "word_scorer"):
            raise ValueError("joint_ctc_attention_lm scores words in its own search: lm_search must have the "
                             "word_scorer() of wenet_udps.lm.search.LmSearch")
        decoding_chunk_size = check_decode_options(
            self.encoder, methods, decoding_chunk_size=decoding_chunk_size,
            num_decoding_left_chunks=num_decoding_left_chunks, simulate_streaming=simulate_streaming,
            batch_size=speech.size(0), ctc_weight=ctc_weight, reverse_weight=reverse_weight,
            length_penalty=length_penalty, blank_penalty=blank_penalty, max_len_ratio=max_len_ratio,
            length_bonus=length_bonus, context=context, context_weight=context_weight)
        if blank_penalty < 0.0:
            raise ValueError(f"blank_penalty must be >= 0 (WeNet ignores a negative one), got {blank_penalty}")
        if reverse_weight > 0.0 and not hasattr(self.decoder, "right_decoder"):
            raise ValueError("reverse_weight > 0 needs the bitransformer decoder")
        # Each utterance is encoded and searched alone, at its own length: a batch's matrix products (MKL picks its
        # blocking by their row count), convolutions and padded attention round otherwise than one utterance's,
        # so a result would depend on the batch it was in and on its padding (issue 66: every mode gives the same
        # bits at batch size 1 and 16).
        results: Dict[str, List[DecodeResult]] = {m: [] for m in methods}
        for i in range(speech.size(0)):
            length = speech_lengths[i:i + 1]
            encoder_out, encoder_mask = self.encode(speech[i:i + 1, :int(length)], length, decoding_chunk_size,
                                                    num_decoding_left_chunks, simulate_streaming)
            one = self.search(methods, encoder_out, encoder_mask, beam_size, ctc_weight=ctc_weight,
                              reverse_weight=reverse_weight, length_penalty=length_penalty,
                              blank_penalty=blank_penalty, max_len_ratio=max_len_ratio, length_bonus=length_bonus,
                              lm_search=lm_search, context=context, context_weight=context_weight)
            for m in methods:
                results[m] += one[m]
        return results

    @torch.no_grad()
    def search(self, methods: List[str], encoder_out: torch.Tensor, encoder_mask: torch.Tensor, beam_size: int, *,
               ctc_weight: Optional[CtcWeight] = None, reverse_weight: float = 0.0, length_penalty: float = 0.0,
               blank_penalty: float = 0.0, max_len_ratio: Optional[float] = None, length_bonus: float = 0.0,
               lm_search: Optional[Callable[[torch.Tensor, torch.Tensor], List[DecodeResult]]] = None,
               context: Optional[ContextGraph] = None, context_weight: float = 1.0
               ) -> Dict[str, List[DecodeResult]]:
        """The searches of :meth:`decode` on an encoder output (B, T', D) with its mask (B, 1, T') (what a streaming
        state has gathered chunk by chunk); the options as in :meth:`decode`, which checked them."""
        needs_lm = [m for m in methods if m in LM_METHODS]
        encoder_lens = encoder_mask.squeeze(1).sum(1)
        results: Dict[str, List[DecodeResult]] = {}
        ctc_probs = None
        if any(m != "attention" for m in methods):
            ctc_probs = self.ctc_logprobs(encoder_out, blank_penalty)
        if "ctc_greedy_search" in methods:
            results["ctc_greedy_search"] = ctc_greedy_search(ctc_probs, encoder_lens, self.ctc.blank_id)
        if "ctc_prefix_beam_search" in methods or "attention_rescoring" in methods:
            prefix = ctc_prefix_beam_search(ctc_probs, encoder_lens, beam_size, self.ctc.blank_id, context)
            if "ctc_prefix_beam_search" in methods:
                results["ctc_prefix_beam_search"] = prefix
            if "attention_rescoring" in methods:
                results["attention_rescoring"] = attention_rescoring(
                    self, prefix, encoder_out, encoder_lens, value_for("ctc_weight", ctc_weight, "attention_rescoring"),
                    reverse_weight, context_weight)
        if {"ctc_prefix_beam_search_lm", "attention_rescoring_lm"} & set(needs_lm):
            with_lm = lm_search(ctc_probs, encoder_lens, **({} if context is None else {"context": context}))
            results["ctc_prefix_beam_search_lm"] = with_lm
            if "attention_rescoring_lm" in methods:
                results["attention_rescoring_lm"] = attention_rescoring(
                    self, with_lm, encoder_out, encoder_lens,
                    value_for("ctc_weight", ctc_weight, "attention_rescoring_lm"), reverse_weight, context_weight)
        for mode in (m for m in methods if m in JOINT_METHODS):
            words = lm_search.word_scorer() if mode in LM_METHODS else None
            results[mode] = joint_beam_search(self.decoder, encoder_out, encoder_mask, ctc_probs, beam_size, self.sos,
                                              self.eos, self.ctc.blank_id, value_for("ctc_weight", ctc_weight, mode),
                                              length_bonus, words, context=context)
        if "attention" in methods:
            results["attention"] = attention_beam_search(self.decoder, encoder_out, encoder_mask, beam_size,
                                                         self.sos, self.eos, length_penalty,
                                                         1.0 if max_len_ratio is None else max_len_ratio)
        return {m: results[m] for m in methods}

    def ctc_logprobs(self, encoder_out: torch.Tensor, blank_penalty: float = 0.0) -> torch.Tensor:
        """(B, T', D) -> (B, T', V) CTC log-probabilities, the blank logit lowered by ``blank_penalty``."""
        if blank_penalty == 0.0:
            return self.ctc.log_softmax(encoder_out)
        logits = self.ctc.ctc_lo(encoder_out)
        logits[:, :, self.ctc.blank_id] -= blank_penalty
        return logits.log_softmax(dim=2)

    def ctc_activation(self, encoder_out: torch.Tensor) -> torch.Tensor:
        """Export helper: (B, T', D) encoder output -> (B, T', V) CTC log-probabilities."""
        return self.ctc.log_softmax(encoder_out)

    def forward_attention_decoder(self, hyps: torch.Tensor, hyps_lens: torch.Tensor, encoder_out: torch.Tensor,
                                  reverse_weight: float = 0.0, encoder_lens: Optional[torch.Tensor] = None,
                                  utt: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """Export/rescoring helper: decoder log-probabilities of N hypotheses.

        Args:
            hyps: (N, L) hypotheses with sos prepended (WeNet's runtime layout), padded with any id.
            hyps_lens: (N,) lengths including sos.
            encoder_out: without ``utt`` (WeNet's export signature): (1 or N, T', D), one utterance, all frames
                valid. With ``utt``: (B, T', D), a batch of utterances whose valid frames ``encoder_lens`` (B,) says.
            reverse_weight: > 0 also runs the right-to-left decoder.
            utt: (N,) the utterance of each hypothesis; each utterance's source-attention projections are then made
                once and shared by its hypotheses.
        Returns:
            left-to-right (N, L, V) and right-to-left (N, L, V) log-probabilities (the latter
            ``torch.tensor(0.0)`` without a right-to-left branch).
        """
        num = hyps.size(0)
        memory_caches = None
        if utt is None:
            encoder_out = encoder_out.expand(num, -1, -1)
            encoder_mask = torch.ones(num, 1, encoder_out.size(1), dtype=torch.bool, device=encoder_out.device)
        else:
            encoder_mask = ~make_pad_mask(encoder_lens, encoder_out.size(1)).unsqueeze(1).index_select(0, utt)
            memory_caches = [c.index_select(0, utt) for c in self.decoder.memory_caches(encoder_out)]
            encoder_out = encoder_out.index_select(0, utt)
        # Right-to-left inputs: sos, then the tokens after sos reversed.
        tokens = hyps[:, 1:]
        r_tokens = reverse_pad_list(tokens, hyps_lens - 1, float(self.ignore_id))
        r_hyps, _ = add_sos_eos(r_tokens, self.sos, self.eos, self.ignore_id)
        if r_hyps.size(1) < hyps.size(1):
            pad = r_hyps.new_full((num, hyps.size(1) - r_hyps.size(1)), self.eos)
            r_hyps = torch.cat([r_hyps, pad], dim=1)
        decoder_out, r_decoder_out, _ = self.decoder(encoder_out, encoder_mask, hyps, hyps_lens, r_hyps,
                                                     reverse_weight, memory_caches)
        decoder_out = torch.log_softmax(decoder_out, dim=-1)
        if reverse_weight > 0.0:
            r_decoder_out = torch.log_softmax(r_decoder_out, dim=-1)
        return decoder_out, r_decoder_out

    def udps_scales(self) -> Dict[str, torch.Tensor]:
        """Effective UDPS score scales of every attention, keyed by parameter name (for TensorBoard).

        e.g. ``{"encoder.encoders.0.self_attn.alpha": tensor([...per head...]), ...}``; empty without UDPS.
        """
        scales: Dict[str, torch.Tensor] = {}
        for name, module in self.named_modules():
            getter = getattr(module, "effective_scales", None)
            if callable(getter):
                for key, value in getter().items():
                    scales[f"{name}.{key}"] = value
        return scales
