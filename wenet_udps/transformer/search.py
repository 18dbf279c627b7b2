"""Decoding methods (WeNet's mode names): ``ctc_greedy_search``, ``ctc_prefix_beam_search``, ``attention``,
``attention_rescoring``, and with a word n-gram LM (wenet_udps.lm) ``ctc_prefix_beam_search_lm`` and
``attention_rescoring_lm`` (the same rescoring over the LM search's n-best); and ESPnet's joint CTC/attention beam
search, ``joint_ctc_attention`` and with the word LM ``joint_ctc_attention_lm`` (``joint_search``). Each works on an
already computed encoder output, so one encoder pass serves all modes. The modes' names are in ``modes``."""
import math
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, ClassVar, Dict, List, Optional, Tuple

import torch

from wenet_udps.transformer.context_graph import ContextGraph
from wenet_udps.transformer.prefix_trie import ROOT, PrefixTrie
from wenet_udps.transformer.step_cache import StepCache
from wenet_udps.utils.common import IGNORE_ID, add_sos_eos, log_add, pad_list, remove_duplicates_and_blank
from wenet_udps.utils.mask import mask_finished_preds, mask_finished_scores


@dataclass
class DecodeResult:
    """One utterance's result.

    tokens: best hypothesis (token ids, no sos/eos/blank); score: its log-probability under the method
    (CTC path or prefix probability, attention log-probability, or the rescoring combination);
    nbest / nbest_scores: all kept hypotheses, best first (prefix beam search and rescoring).
    nbest_context: with a context graph (hotwords), the bonus each n-best hypothesis keeps, already part of its
    ``nbest_scores``; empty without one (``context_graph``).
    """
    tokens: List[int]
    score: float = 0.0
    nbest: List[List[int]] = field(default_factory=list)
    nbest_scores: List[float] = field(default_factory=list)
    nbest_context: List[float] = field(default_factory=list)


def ctc_greedy_search(ctc_probs: torch.Tensor, ctc_lens: torch.Tensor, blank_id: int = 0) -> List[DecodeResult]:
    """Best path: argmax per frame, then merge repeats and drop blanks.

    ctc_probs (B, T, V) log-probabilities, ctc_lens (B,) -> B results; score = log-probability of the best path.
    """
    best_logp, best_idx = ctc_probs.max(dim=2)
    results = []
    for i in range(ctc_probs.size(0)):
        n = int(ctc_lens[i])
        path = best_idx[i, :n].tolist()
        tokens = remove_duplicates_and_blank(path, blank_id)
        score = float(best_logp[i, :n].sum())
        results.append(DecodeResult(tokens=tokens, score=score, nbest=[tokens], nbest_scores=[score]))
    return results


def _prefix_beam_one(logp: torch.Tensor, beam_size: int, blank_id: int, context: Optional[ContextGraph] = None
                     ) -> List[Tuple[Tuple[int, ...], float]]:
    """CTC prefix beam search of one utterance: logp (T, V) -> [(prefix, log P(prefix))] best first.

    Each prefix keeps two scores: ending in blank (pb) and ending in its last token (pnb), so a repeated token
    extends the prefix only after a blank. With ``context`` a prefix also carries its graph state and bonus, set
    when a frame first reaches it (from the prefix it extends: one memoised step) and counted when the beam is cut
    (:func:`_biased_cut`); the result is then [(prefix, log P(prefix) + kept bonus, kept bonus)] (the open match
    taken back).

    A prefix is a node of a :class:`PrefixTrie` (an integer): extending it and finding it again cost the same
    whatever its length, and its tokens are read once, for the n-best (issue 80, F12: as a tuple, each extension
    copied and hashed the whole prefix, so a frame cost its prefixes' length).
    """
    neg_inf = -math.inf
    steps = None if context is None else context.memo
    trie = PrefixTrie(logp.size(1))
    child, unit_of, make, vocab = trie.child, trie.unit, trie.make, trie.vocab
    # (node, pb, pnb, graph state, bonus): the state and bonus are a function of the prefix (0 and 0.0 without
    # hotwords), carried along so that no prefix is walked to find them.
    hyps: List[Tuple[int, float, float, int, float]] = [(ROOT, 0.0, neg_inf, 0, 0.0)]
    top_logp, top_idx = logp.topk(min(beam_size, logp.size(1)), dim=1)
    nxt: Dict[int, List[Any]] = {}  # this frame's prefix node -> [pb, pnb, state, bonus]
    last = logp.size(0) - 1

    def entry_of(node: int, state: int, got: float) -> List[Any]:
        entry = nxt.get(node)
        if entry is None:
            entry = nxt[node] = [neg_inf, neg_inf, state, got]
        return entry

    def extended(node: int, s: int, state: int, got: float) -> List[Any]:
        key = node * vocab + s
        longer = child.get(key)
        entry = None
        if longer is None:
            longer = make(node, s, key)
        else:
            entry = nxt.get(longer)
        if entry is None:
            if steps is None:
                entry = nxt[longer] = [neg_inf, neg_inf, 0, 0.0]
            else:
                state, delta = steps[state, s]
                entry = nxt[longer] = [neg_inf, neg_inf, state, got + delta]
        return entry

    for t in range(logp.size(0)):
        nxt = {}
        # (one frame's row made a list at a time: the lists of every frame would hold O(T) Python numbers)
        for ps, s in zip(top_logp[t].tolist(), top_idx[t].tolist()):
            for node, pb, pnb, state, got in hyps:
                if s == blank_id:
                    entry = entry_of(node, state, got)
                    entry[0] = log_add(entry[0], pb + ps, pnb + ps)
                elif s == unit_of[node]:  # (the root's unit is -1)
                    # "a a" without blank stays "a"; "a _ a" becomes "a a".
                    entry = entry_of(node, state, got)
                    entry[1] = log_add(entry[1], pnb + ps)
                    entry = extended(node, s, state, got)
                    entry[1] = log_add(entry[1], pb + ps)
                else:
                    entry = extended(node, s, state, got)
                    entry[1] = log_add(entry[1], pb + ps, pnb + ps)
        # A prefix reachable only through an impossible (-inf) path is not a hypothesis.
        live = [kv for kv in nxt.items() if log_add(kv[1][0], kv[1][1]) > neg_inf]
        if not live:  # every path impossible from here on (e.g. -inf frame); keep what was reached
            break
        if steps is None:
            ranked = sorted(live, key=lambda kv: log_add(kv[1][0], kv[1][1]), reverse=True)[:beam_size]
        else:
            ranked = _biased_cut(live, beam_size, context, last=t == last)
        before = [h[0] for h in hyps]
        hyps = [(node, pb, pnb, state, got) for node, (pb, pnb, state, got) in ranked]
        trie.keep(before, [h[0] for h in hyps])
    if context is None:
        return [(trie.tokens(node), log_add(pb, pnb)) for node, pb, pnb, _, _ in hyps]
    kept = [(trie.tokens(node), log_add(pb, pnb), got + context.end(state)) for node, pb, pnb, state, got in hyps]
    return sorted(((prefix, score + b, b) for prefix, score, b in kept), key=lambda h: h[1], reverse=True)[:beam_size]


def _biased_cut(live: List[Tuple[int, List[Any]]], beam_size: int, context: ContextGraph, last: bool
                ) -> List[Tuple[int, List[Any]]]:
    """A frame's beam with hotwords: ``live`` [(prefix node, [pb, pnb, state, bonus])] -> the kept ones, best first.

    The ``beam_size`` best by log P + bonus, the open match counted (it draws the beam toward a phrase), and one
    more: the best by log P + kept bonus (the open match taken back), where the cut left it out. Why: prefixes in
    open matches that the end will take back can fill the beam and push out a prefix that has completed a phrase
    (issue 82, F2); the extra one is the prefix that would win if the utterance ended now. The last frame's cut is
    by the kept bonus alone, the one the n-best is ranked by.
    """
    node_score = context.node_score  # (the open match's bonus of a state: ContextGraph.end's, read directly)
    scored = []
    for kv in live:
        entry = kv[1]
        scored.append((log_add(entry[0], entry[1]) + entry[3], kv))
    if last:
        scored.sort(key=lambda sk: sk[0] - node_score[sk[1][1][2]], reverse=True)
        return [kv for _, kv in scored[:beam_size]]
    scored.sort(key=itemgetter(0), reverse=True)
    ranked = [kv for _, kv in scored[:beam_size]]
    if len(scored) > beam_size:
        inside = max(score - node_score[kv[1][2]] for score, kv in scored[:beam_size])
        # A prefix outside the beam keeps at most its score (an open match's bonus is >= 0): when the best of them
        # does not pass ``inside``, none can (most frames), and the rest is not scanned.
        if scored[beam_size][0] > inside:
            kept, extra = max(((score - node_score[kv[1][2]], i) for i, (score, kv) in
                               enumerate(scored[beam_size:])), key=itemgetter(0))
            if kept > inside:
                ranked.append(scored[beam_size + extra][1])
    return ranked


def ctc_prefix_beam_search(ctc_probs: torch.Tensor, ctc_lens: torch.Tensor, beam_size: int,
                           blank_id: int = 0, context: Optional[ContextGraph] = None) -> List[DecodeResult]:
    """Prefix beam search over the top ``beam_size`` tokens of each frame.

    ctc_probs (B, T, V) log-probabilities, ctc_lens (B,) -> B results with the n-best (``beam_size`` at most).
    With ``context`` (hotwords) each prefix's score has its bonus (``context_graph``) and the n-best is ranked
    by CTC + kept bonus, each one's bonus in ``nbest_context``.
    """
    results = []
    probs = ctc_probs.detach().float().cpu()
    for i in range(probs.size(0)):
        hyps = _prefix_beam_one(probs[i, :int(ctc_lens[i])], beam_size, blank_id, context)
        results.append(DecodeResult(tokens=list(hyps[0][0]), score=hyps[0][1],
                                    nbest=[list(h[0]) for h in hyps], nbest_scores=[h[1] for h in hyps],
                                    nbest_context=[h[2] for h in hyps] if context is not None else []))
    return results


def _finished(scores: torch.Tensor, done: torch.Tensor, beam_size: int, scores_only_fall: bool) -> torch.Tensor:
    """Which utterances' searches are over: (B,) bool from scores, done (B * beam, 1).

    Over when every hypothesis has ended (or used its steps), or, when the final choice is by score alone and
    extending a hypothesis never raises its score (``scores_only_fall``: log-probabilities <= 0 added, no length
    reward), when the best ended hypothesis scores at least the best running one: no running one can overtake it.
    """
    done = done.view(-1, beam_size)
    over = done.all(dim=-1)
    if scores_only_fall:
        scores = scores.view(-1, beam_size)
        ended = scores.masked_fill(~done, -math.inf).max(dim=-1).values
        running = scores.masked_fill(done, -math.inf).max(dim=-1).values
        over |= (ended >= running) & torch.isfinite(ended)
    return over


def _best_of_beam(hyps: torch.Tensor, scores: torch.Tensor, eos: int, length_penalty: float) -> DecodeResult:
    """One utterance's result from its beam: hyps (beam, L) starting with sos, scores (beam, 1)."""
    lengths = (hyps[:, 1:] != eos).sum(-1).to(scores.dtype)
    final = scores.view(-1) / lengths.pow(length_penalty)
    best = int(final.argmax())
    row = hyps[best, 1:].tolist()
    return DecodeResult(tokens=row[:row.index(eos)] if eos in row else row, score=float(final[best]))


@dataclass
class _Beams:
    """The running part of a batched beam search: ``beam_size`` rows per live utterance in every per-hypothesis
    tensor, one per live utterance in the memory's.

    ``utts`` maps live position -> index in the input batch. :meth:`drop` removes finished utterances from every
    tensor, so a step costs what the utterances still searching need, not what the batch's slowest one does.
    """
    beam_size: int
    utts: List[int]
    memory: torch.Tensor                # (U, T', D), U = live utterances
    memory_mask: torch.Tensor           # (U, 1, T'), or (U, 1, 0) when every frame is kept
    memory_caches: List[torch.Tensor]   # per block, the source attention's cache of the memory
    steps: torch.Tensor                 # (N, 1) the utterance's step limit, ceil(max_len_ratio * its encoder length)
    hyps: torch.Tensor                  # (N, L) prefixes starting with sos, N = U * beam_size
    scores: torch.Tensor                # (N, 1) log-probabilities
    end_flag: torch.Tensor              # (N, 1) the hypothesis ended with eos
    cache: Optional[StepCache] = None   # the prefixes' self-attention entries
    ROWS: ClassVar[Tuple[str, ...]] = ("steps", "hyps", "scores", "end_flag")  # the per-hypothesis tensors

    def drop(self, finished: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Keep the utterances whose entry in ``finished`` (live utterances,) is False; returns the kept
        utterances' positions and their hypotheses' rows."""
        keep = (~finished).nonzero().squeeze(1)
        index = (keep.unsqueeze(1) * self.beam_size + torch.arange(self.beam_size, device=keep.device)).view(-1)
        for name in self.ROWS:
            setattr(self, name, getattr(self, name).index_select(0, index))
        self.memory, self.memory_mask = self.memory.index_select(0, keep), self.memory_mask.index_select(0, keep)
        self.memory_caches = [c.index_select(0, keep) for c in self.memory_caches]
        if self.cache is not None:
            self.cache.select(index)
        self.utts = [self.utts[i] for i in keep.tolist()]
        return keep, index


@torch.inference_mode()
def attention_beam_search(decoder: torch.nn.Module, encoder_out: torch.Tensor, encoder_mask: torch.Tensor,
                          beam_size: int, sos: int, eos: int, length_penalty: float = 0.0,
                          max_len_ratio: float = 1.0, suppress_eos: bool = False) -> List[DecodeResult]:
    """Batched left-to-right beam search with the decoder's incremental cache.

    All hypotheses of the utterances still searching advance together; a hypothesis that emitted eos keeps its score
    (it can only be extended by eos at log-probability 0). Utterance b emits at most ceil(max_len_ratio * T'_b)
    tokens (at least 1), T'_b its own encoder length, so the search of a model that never emits eos ends after
    that many steps (WeNet bounds by T', ESPnet by maxlenratio * T'; WeNet stops every utterance at the batch's
    longest, so a looping hypothesis of a short utterance runs on and the result depends on the batch).
    An utterance's search ends when its hypotheses have all ended or used their steps, or (with
    ``length_penalty == 0``) when its best ended hypothesis can no longer be overtaken; it then leaves the batch, so
    the rest run without it.

    Args:
        decoder: has ``memory_caches(memory)`` and
            ``forward_one_step(memory, memory_mask, tgt, tgt_mask, cache, memory_caches)``, called with the memory
            once per utterance and ``beam_size`` prefixes per utterance; the cache it returns has ``reorder(src)``
            and ``select(rows)`` (``StepCache``), or is None.
        encoder_out: (B, T', D); encoder_mask: (B, 1, T').
        length_penalty: WeNet's: the final beam is ranked by ``score / length ** length_penalty`` (length = tokens
            without eos), so > 0 favours longer hypotheses; it does not change which hypotheses the beam keeps.
        max_len_ratio: > 0, tokens allowed per encoder frame (1.0: WeNet's bound, one per frame).
        suppress_eos: for benchmarks and tests only (no decoding option reaches it): eos gets log-probability -inf,
            so every hypothesis runs to its step limit, the worst case of a model that never ends a sentence
            (bench/decode_speed.py ``--long_utterance_s``).
    Returns:
        B results; score = log-probability of the hypothesis including eos, divided by length ** length_penalty.
    """
    if not max_len_ratio > 0:
        raise ValueError(f"max_len_ratio must be > 0, got {max_len_ratio}")
    device = encoder_out.device
    batch = encoder_out.size(0)
    steps = (encoder_mask.squeeze(1).sum(-1).to(torch.float64) * max_len_ratio).ceil().clamp_min(1).long()
    maxlen = int(steps.max())
    # Only the first beam of each utterance is live at the start, so the first step does not pick duplicates.
    first = torch.tensor([0.0] + [-math.inf] * (beam_size - 1), device=device)
    # The memory is the same at every step and for every beam of an utterance: held once per utterance (the decoder
    # attends with all its hypotheses at once), never reordered, its source-attention projections made once, not at
    # every step for every beam as WeNet does.
    # Every frame kept (one utterance, or all of one length): an empty mask, which the attentions read as none, so a
    # step's cross-attention does not mask its scores for nothing.
    memory_mask = encoder_mask[..., :0] if bool(encoder_mask.all()) else encoder_mask
    live = _Beams(beam_size, list(range(batch)), memory=encoder_out, memory_mask=memory_mask,
                  memory_caches=decoder.memory_caches(encoder_out),
                  steps=steps.to(device).repeat_interleave(beam_size).unsqueeze(1),
                  hyps=torch.full((batch * beam_size, 1), sos, dtype=torch.long, device=device),
                  scores=first.repeat(batch).unsqueeze(1),
                  end_flag=torch.zeros((batch * beam_size, 1), dtype=torch.bool, device=device))
    results: List[Optional[DecodeResult]] = [None] * batch
    for step in range(1, maxlen + 2):
        # A hypothesis whose utterance has used its steps is frozen like an ended one (extended by eos at 0).
        done = live.end_flag | (live.steps < step)
        finished = _finished(live.scores, done, beam_size, length_penalty == 0.0)  # all True after step maxlen
        for i in finished.nonzero().squeeze(1).tolist():
            rows = slice(i * beam_size, (i + 1) * beam_size)
            results[live.utts[i]] = _best_of_beam(live.hyps[rows], live.scores[rows], eos, length_penalty)
        if bool(finished.all()):
            break
        if bool(finished.any()):
            live.drop(finished)
            done = live.end_flag | (live.steps < step)
        _advance(decoder, live, done, step, eos, suppress_eos)
    return results


def _advance(decoder: torch.nn.Module, live: _Beams, done: torch.Tensor, step: int, eos: int,
             suppress_eos: bool) -> None:
    """One step of the search: every live hypothesis extended by one token, the best ``beam`` kept per utterance."""
    beam_size, running = live.beam_size, live.hyps.size(0)
    # Only the newest position is queried (the earlier ones' self-attention entries are in the cache, made when each
    # position was new; the memory's projections in live.memory_caches, made once per search), and it sees the
    # whole prefix: its row of the causal mask, (running, 1, step). The full (running, step, step) mask made each
    # step cost the prefix squared (the 5-minute case of issue 47 grew to 670 MB).
    hyps_mask = torch.ones(running, 1, step, dtype=torch.bool, device=live.hyps.device)
    logp, cache = decoder.forward_one_step(live.memory, live.memory_mask, live.hyps, hyps_mask, live.cache,
                                           live.memory_caches)
    if suppress_eos:
        logp[:, eos] = -math.inf
    # A step tries beam x min(beam, vocabulary) extensions per utterance: a beam wider than the vocabulary takes
    # every token of each hypothesis (topk of more than the vocabulary would fail).
    k = min(beam_size, logp.size(-1))
    top_logp, top_idx = logp.topk(k, dim=-1)  # (running, k)
    if bool(done.any()):  # (none, most steps of a long search: the masks' dozen small ops are skipped)
        top_logp = mask_finished_scores(top_logp, done)
        top_idx = mask_finished_preds(top_idx, done, eos)
    utts = running // beam_size
    scores, flat = (live.scores + top_logp).view(utts, beam_size * k).topk(beam_size, dim=-1)
    base = torch.arange(utts, device=flat.device).unsqueeze(1) * beam_size  # first row of each utterance
    src = (base + flat // k).view(-1)  # which running hypothesis each survivor extends
    token = top_idx.view(utts, beam_size * k).gather(1, flat).view(-1, 1)
    hyps = torch.cat([live.hyps[src], token], dim=1)
    if cache is not None:  # (a decoder that keeps no cache returns None)
        cache.reorder(src)
    live.cache, live.hyps, live.scores = cache, hyps, scores.view(-1, 1)
    live.end_flag = hyps[:, -1:] == eos


def score_hypotheses(decoder_out: torch.Tensor, hyps: List[List[int]], eos: int) -> List[float]:
    """Sum the decoder log-probabilities of each hypothesis followed by eos.

    decoder_out (N, L+1, V) log-probabilities for inputs [sos, hyp...]; hyps: N token lists.
    """
    device = decoder_out.device
    targets = pad_list([torch.tensor(h + [eos], dtype=torch.long, device=device) for h in hyps], eos)
    logp = decoder_out[:, :targets.size(1)].gather(2, targets.unsqueeze(2)).squeeze(2)  # (N, max len + 1)
    lens = torch.tensor([len(h) + 1 for h in hyps], device=device)
    keep = torch.arange(targets.size(1), device=device).unsqueeze(0) < lens.unsqueeze(1)
    return logp.masked_fill(~keep, 0.0).sum(1).tolist()


@torch.no_grad()
def attention_rescoring(model, ctc_results: List[DecodeResult], encoder_out: torch.Tensor,
                        encoder_lens: torch.Tensor, ctc_weight: float = 0.0,
                        reverse_weight: float = 0.0, context_weight: float = 1.0) -> List[DecodeResult]:
    """Rescore each utterance's CTC n-best with the attention decoder (both directions for ``bitransformer``).

    score = (1 - reverse_weight) * left-to-right + reverse_weight * right-to-left + ctc_weight * CTC prefix score,
    + context_weight * the hotword bonus the hypothesis kept where the n-best has one (``nbest_context``; it is
    taken out of the CTC score first, so that the bonus is weighed by its own weight, not by ``ctc_weight``).
    The n-best lists of the whole batch go through the decoder in one pass (WeNet makes one pass per utterance).

    Args:
        model: the ASRModel (provides ``forward_attention_decoder``, ``sos``, ``eos``).
        ctc_results: output of ``ctc_prefix_beam_search`` (uses ``nbest`` / ``nbest_scores``).
        encoder_out: (B, T', D); encoder_lens: (B,).
    Returns:
        B results whose nbest is the CTC n-best reordered by the combined score.
    """
    device = encoder_out.device
    hyps = [h for res in ctc_results for h in res.nbest]
    utt = torch.tensor([b for b, res in enumerate(ctc_results) for _ in res.nbest], dtype=torch.long,
                         device=device)  # the utterance of each hypothesis
    hyps_pad = pad_list([torch.tensor(h, dtype=torch.long, device=device) for h in hyps], IGNORE_ID)
    hyps_lens = torch.tensor([len(h) for h in hyps], dtype=torch.long, device=device)
    ys_in, _ = add_sos_eos(hyps_pad, model.sos, model.eos, IGNORE_ID)
    decoder_out, r_decoder_out = model.forward_attention_decoder(ys_in, hyps_lens + 1, encoder_out, reverse_weight,
                                                                 encoder_lens, utt)
    scores = score_hypotheses(decoder_out, hyps, model.eos)
    if reverse_weight > 0.0:
        r_scores = score_hypotheses(r_decoder_out, [list(reversed(h)) for h in hyps], model.eos)
        scores = [(1.0 - reverse_weight) * s + reverse_weight * r for s, r in zip(scores, r_scores)]
    results, start = [], 0
    for res in ctc_results:
        n = len(res.nbest)
        if res.nbest_context:
            combined = [s + ctc_weight * (c - b) + context_weight * b
                        for s, c, b in zip(scores[start:start + n], res.nbest_scores, res.nbest_context)]
        else:
            combined = [s + ctc_weight * c for s, c in zip(scores[start:start + n], res.nbest_scores)]
        start += n
        order = sorted(range(n), key=lambda i: combined[i], reverse=True)
        results.append(DecodeResult(tokens=list(res.nbest[order[0]]), score=combined[order[0]],
                                    nbest=[list(res.nbest[i]) for i in order],
                                    nbest_scores=[combined[i] for i in order]))
    return results
