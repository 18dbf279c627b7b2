"""Decoding methods (WeNet's mode names): ``ctc_greedy_search``, ``ctc_prefix_beam_search``, ``attention``,
``attention_rescoring``. Each works on an already computed encoder output, so one encoder pass serves all modes."""
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch

from wenet_udps.utils.common import IGNORE_ID, add_sos_eos, log_add, pad_list, remove_duplicates_and_blank
from wenet_udps.utils.mask import mask_finished_preds, mask_finished_scores, subsequent_mask

DECODING_METHODS = ("ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring")


@dataclass
class DecodeResult:
    """One utterance's result.

    tokens: best hypothesis (token ids, no sos/eos/blank); score: its log-probability under the method
    (CTC path or prefix probability, attention log-probability, or the rescoring combination);
    nbest / nbest_scores: all kept hypotheses, best first (prefix beam search and rescoring).
    """
    tokens: List[int]
    score: float = 0.0
    nbest: List[List[int]] = field(default_factory=list)
    nbest_scores: List[float] = field(default_factory=list)


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


def _prefix_beam_one(logp: torch.Tensor, beam_size: int, blank_id: int) -> List[Tuple[Tuple[int, ...], float]]:
    """CTC prefix beam search of one utterance: logp (T, V) -> [(prefix, log P(prefix))] best first.

    Each prefix keeps two scores: ending in blank (pb) and ending in its last token (pnb), so a repeated token
    extends the prefix only after a blank.
    """
    neg_inf = -math.inf
    hyps: List[Tuple[Tuple[int, ...], Tuple[float, float]]] = [((), (0.0, neg_inf))]
    top_logp, top_idx = logp.topk(min(beam_size, logp.size(1)), dim=1)
    top_logp, top_idx = top_logp.tolist(), top_idx.tolist()
    for t in range(logp.size(0)):
        nxt: Dict[Tuple[int, ...], List[float]] = defaultdict(lambda: [neg_inf, neg_inf])
        for ps, s in zip(top_logp[t], top_idx[t]):
            for prefix, (pb, pnb) in hyps:
                last = prefix[-1] if prefix else None
                if s == blank_id:
                    entry = nxt[prefix]
                    entry[0] = log_add(entry[0], pb + ps, pnb + ps)
                elif s == last:
                    # "a a" without blank stays "a"; "a _ a" becomes "a a".
                    entry = nxt[prefix]
                    entry[1] = log_add(entry[1], pnb + ps)
                    entry = nxt[prefix + (s,)]
                    entry[1] = log_add(entry[1], pb + ps)
                else:
                    entry = nxt[prefix + (s,)]
                    entry[1] = log_add(entry[1], pb + ps, pnb + ps)
        # A prefix reachable only through an impossible (-inf) path is not a hypothesis.
        live = [kv for kv in nxt.items() if log_add(*kv[1]) > neg_inf]
        if not live:  # every path impossible from here on (e.g. -inf frame); keep what was reached
            break
        ranked = sorted(live, key=lambda kv: log_add(*kv[1]), reverse=True)[:beam_size]
        hyps = [(prefix, (pb, pnb)) for prefix, (pb, pnb) in ranked]
    return [(prefix, log_add(pb, pnb)) for prefix, (pb, pnb) in hyps]


def ctc_prefix_beam_search(ctc_probs: torch.Tensor, ctc_lens: torch.Tensor, beam_size: int,
                           blank_id: int = 0) -> List[DecodeResult]:
    """Prefix beam search over the top ``beam_size`` tokens of each frame.

    ctc_probs (B, T, V) log-probabilities, ctc_lens (B,) -> B results with the n-best (``beam_size`` at most).
    """
    results = []
    probs = ctc_probs.detach().float().cpu()
    for i in range(probs.size(0)):
        hyps = _prefix_beam_one(probs[i, :int(ctc_lens[i])], beam_size, blank_id)
        results.append(DecodeResult(tokens=list(hyps[0][0]), score=hyps[0][1],
                                    nbest=[list(h) for h, _ in hyps], nbest_scores=[s for _, s in hyps]))
    return results


def _best_has_ended(scores: torch.Tensor, end_flag: torch.Tensor, batch: int) -> bool:
    """Whether every utterance's best ended hypothesis scores at least its best running one.

    Extending a hypothesis only adds log-probabilities <= 0, so (when the final choice is by log-probability alone)
    no running hypothesis can overtake it any more and stopping now returns what running to the end would.
    scores, end_flag: (B * beam, 1).
    """
    ended = scores.masked_fill(~end_flag, -math.inf).view(batch, -1).max(dim=-1).values
    running = scores.masked_fill(end_flag, -math.inf).view(batch, -1).max(dim=-1).values
    return bool((ended >= running).all() and torch.isfinite(ended).all())


@torch.no_grad()
def attention_beam_search(decoder: torch.nn.Module, encoder_out: torch.Tensor, encoder_mask: torch.Tensor,
                          beam_size: int, sos: int, eos: int, length_penalty: float = 0.0) -> List[DecodeResult]:
    """Batched left-to-right beam search with the decoder's incremental cache.

    All B * beam hypotheses advance together; a hypothesis that emitted eos keeps its score (it can only be
    extended by eos at log-probability 0). Utterance b emits at most T'_b tokens, its own encoder length: WeNet
    stops every utterance at the batch's longest, so a looping hypothesis of a short utterance runs on and the
    result depends on the batch. The search stops when all hypotheses have ended or used their steps, or (with
    ``length_penalty == 0``) when each utterance's best ended hypothesis can no longer be overtaken.

    Args:
        decoder: has ``memory_caches(memory)`` and
            ``forward_one_step(memory, memory_mask, tgt, tgt_mask, cache, memory_caches)``.
        encoder_out: (B, T', D); encoder_mask: (B, 1, T').
        length_penalty: WeNet's: the final beam is ranked by ``score / length ** length_penalty`` (length = tokens
            without eos), so > 0 favours longer hypotheses; it does not change which hypotheses the beam keeps.
    Returns:
        B results; score = log-probability of the hypothesis including eos, divided by length ** length_penalty.
    """
    device = encoder_out.device
    batch, maxlen, dim = encoder_out.shape
    running = batch * beam_size
    memory = encoder_out.unsqueeze(1).repeat(1, beam_size, 1, 1).view(running, maxlen, dim)
    memory_mask = encoder_mask.unsqueeze(1).repeat(1, beam_size, 1, 1).view(running, 1, maxlen)
    steps = encoder_mask.squeeze(1).sum(-1).repeat_interleave(beam_size).unsqueeze(1)  # (running, 1)
    hyps = torch.full((running, 1), sos, dtype=torch.long, device=device)
    # Only the first beam of each utterance is live at the start, so the first step does not pick duplicates.
    scores = torch.tensor([0.0] + [-math.inf] * (beam_size - 1), device=device).repeat(batch).unsqueeze(1)
    end_flag = torch.zeros((running, 1), dtype=torch.bool, device=device)
    cache: Optional[List[torch.Tensor]] = None
    # The memory is the same at every step and for every beam of an utterance (so survivors need no reordering of
    # it): its source-attention projections are made once, not at every step as WeNet does.
    memory_caches = decoder.memory_caches(memory)
    base = torch.arange(batch, device=device).unsqueeze(1) * beam_size  # (B, 1) first row of each utterance
    for step in range(1, maxlen + 1):
        # A hypothesis whose utterance has used its steps is frozen like an ended one (extended by eos at 0).
        done = end_flag | (steps < step)
        if bool(done.all()) or (length_penalty == 0.0 and _best_has_ended(scores, done, batch)):
            break
        hyps_mask = subsequent_mask(step, device=device).unsqueeze(0).repeat(running, 1, 1)
        logp, cache = decoder.forward_one_step(memory, memory_mask, hyps, hyps_mask, cache, memory_caches)
        top_logp, top_idx = logp.topk(beam_size, dim=-1)  # (running, beam)
        top_logp = mask_finished_scores(top_logp, done)
        top_idx = mask_finished_preds(top_idx, done, eos)
        cand = (scores + top_logp).view(batch, beam_size * beam_size)
        scores, flat = cand.topk(beam_size, dim=-1)  # (B, beam)
        src = (base + flat // beam_size).view(-1)  # which running hypothesis each survivor extends
        token = top_idx.view(batch, beam_size * beam_size).gather(1, flat).view(-1, 1)
        cache = [c[src] for c in cache]
        hyps = torch.cat([hyps[src], token], dim=1)
        scores = scores.view(-1, 1)
        end_flag = hyps[:, -1:] == eos
    lengths = (hyps[:, 1:] != eos).sum(-1).view(batch, beam_size).to(scores.dtype)
    final = scores.view(batch, beam_size) / lengths.pow(length_penalty)
    best_score, best = final.max(dim=-1)
    results = []
    for b in range(batch):
        row = hyps[b * beam_size + int(best[b]), 1:].tolist()
        tokens = row[:row.index(eos)] if eos in row else row
        results.append(DecodeResult(tokens=tokens, score=float(best_score[b])))
    return results


def score_hypotheses(decoder_out: torch.Tensor, hyps: List[List[int]], eos: int) -> List[float]:
    """Sum the decoder log-probabilities of each hypothesis followed by eos.

    decoder_out (N, L+1, V) log-probabilities for inputs [sos, hyp...]; hyps: N token lists.
    """
    scores = []
    for i, hyp in enumerate(hyps):
        idx = torch.tensor(hyp + [eos], dtype=torch.long, device=decoder_out.device)
        scores.append(float(decoder_out[i, torch.arange(len(idx), device=decoder_out.device), idx].sum()))
    return scores


@torch.no_grad()
def attention_rescoring(model, ctc_results: List[DecodeResult], encoder_out: torch.Tensor,
                        encoder_lens: torch.Tensor, ctc_weight: float = 0.0,
                        reverse_weight: float = 0.0) -> List[DecodeResult]:
    """Rescore each utterance's CTC n-best with the attention decoder (both directions for ``bitransformer``).

    score = (1 - reverse_weight) * left-to-right + reverse_weight * right-to-left + ctc_weight * CTC prefix score.

    Args:
        model: the ASRModel (provides ``forward_attention_decoder``, ``sos``, ``eos``).
        ctc_results: output of ``ctc_prefix_beam_search`` (uses ``nbest`` / ``nbest_scores``).
        encoder_out: (B, T', D); encoder_lens: (B,).
    Returns:
        B results whose nbest is the CTC n-best reordered by the combined score.
    """
    results = []
    for b, ctc_res in enumerate(ctc_results):
        hyps = ctc_res.nbest
        n = len(hyps)
        hyps_pad = pad_list([torch.tensor(h, dtype=torch.long, device=encoder_out.device) for h in hyps], IGNORE_ID)
        hyps_lens = torch.tensor([len(h) for h in hyps], dtype=torch.long, device=encoder_out.device)
        ys_in, _ = add_sos_eos(hyps_pad, model.sos, model.eos, IGNORE_ID)
        memory = encoder_out[b:b + 1, :int(encoder_lens[b])].expand(n, -1, -1)
        decoder_out, r_decoder_out = model.forward_attention_decoder(ys_in, hyps_lens + 1, memory, reverse_weight)
        scores = score_hypotheses(decoder_out, hyps, model.eos)
        if reverse_weight > 0.0:
            r_scores = score_hypotheses(r_decoder_out, [list(reversed(h)) for h in hyps], model.eos)
            scores = [(1.0 - reverse_weight) * s + reverse_weight * r for s, r in zip(scores, r_scores)]
        scores = [s + ctc_weight * c for s, c in zip(scores, ctc_res.nbest_scores)]
        order = sorted(range(n), key=lambda i: scores[i], reverse=True)
        results.append(DecodeResult(tokens=list(hyps[order[0]]), score=scores[order[0]],
                                    nbest=[list(hyps[i]) for i in order], nbest_scores=[scores[i] for i in order]))
    return results

