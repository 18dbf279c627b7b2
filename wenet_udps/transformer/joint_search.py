"""Joint CTC/attention beam search (Watanabe et al. 2017; ESPnet's ``BatchBeamSearch`` with ``CTCPrefixScorer``),
the search of the modes ``joint_ctc_attention`` and, with a word n-gram LM, ``joint_ctc_attention_lm``.

Label-synchronous: each step extends every live prefix by one token. The decoder proposes: its 1.5 x beam best
tokens of each prefix (the pre-beam, ESPnet's ``pre_beam_ratio``) are the only candidates the CTC prefix score is
computed for (``ctc_prefix_score``, vectorised over prefixes x candidates x frames). A prefix h scores

    (1 - ctc_weight) log P_dec(h) + ctc_weight log P_ctc-prefix(h) + length_bonus |h|   (+ the word LM's words)

where P_ctc-prefix sums every CTC alignment of the whole utterance whose labels start with h, and the end of the
sentence costs the full CTC probability of the prefix. The beam_size best extensions of an utterance survive; one
ending in eos leaves the beam for the utterance's ended hypotheses, and the others run on (ESPnet's bookkeeping).
An utterance's search ends after T' steps (T' its encoder frames: what is still running then ends without an eos
score, as in ESPnet), when no prefix runs any more, or by ESPnet's ``end_detect``: at step i (0-based) the best
ended hypothesis of each of the lengths i, i - 1, i - 2 (sos and eos counted) scores more than 10 below the best
ended one. The result is the best ended hypothesis.

Batched over utterances and hypotheses: beam_size rows per utterance in every tensor, the memory once per utterance
and the decoder's ``StepCache`` (no prefix is decoded again; a finished utterance leaves the batch), as the
``attention`` mode's search (``search._Beams``). Ties: equal scores go to the earlier prefix row, then to the
candidate the decoder ranked higher; no set or dict order decides anything, so the result is the same bits from run
to run and thread count to thread count.

``ending="attention"`` runs the ``attention`` mode's rules instead (ended hypotheses keep their place in the beam,
frozen; the search ends once every hypothesis has ended or used its ceil(max_len_ratio * T') steps, or, without a
length reward, once no running one can overtake the best ended one): with ``ctc_weight`` 0 it is that mode's search
(tests/transformer/test_joint_search.py), which is what it is for.
"""
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, List, Optional, Protocol, Sequence, Tuple

import torch

from wenet_udps.transformer.context_graph import ContextGraph
from wenet_udps.transformer.ctc_prefix_score import CtcPrefixScorer
from wenet_udps.transformer.search import DecodeResult, _Beams, _best_of_beam, _finished

PRE_BEAM_RATIO = 1.5          # ESPnet's pre_beam_ratio: candidates per prefix = int(1.5 * beam)
END_DETECT_LENGTHS = 3        # ESPnet's end_detect M
END_DETECT_MARGIN = -10.0     # ESPnet's end_detect D_end = log(1 * exp(-10))
ENDINGS = ("espnet", "attention")


class WordScorer(Protocol):
    """The word LM of ``joint_ctc_attention_lm`` (``wenet_udps.lm.words.WordScorer``): a state per prefix."""

    def initial(self) -> Any: ...

    def allowed(self, state: Any) -> Tuple[Sequence[int], bool]:
        """(the units that may follow, whether the sentence may end here)."""

    def extend(self, state: Any, units: Sequence[int], eos: int) -> List[Tuple[Any, float]]:
        """(state, score added) of the prefix extended by each unit (eos: the sentence's end)."""

    def finish(self, state: Any) -> float:
        """The score added when the search ends the sentence after this prefix."""


@dataclass
class _JointBeams(_Beams):
    """``search._Beams`` plus each hypothesis' score parts and CTC state, and each utterance's ended ones."""
    dec: Optional[torch.Tensor] = None   # (N,) float64: log P_dec of the prefix
    psi: Optional[torch.Tensor] = None   # (N,) float64: log CTC prefix probability
    r_n: Optional[torch.Tensor] = None   # (N, T') CTC forward variables (ctc_prefix_score)
    r_b: Optional[torch.Tensor] = None
    lm: Optional[torch.Tensor] = None    # (N,) float64: the word LM's part
    words: Optional[List[Any]] = None    # (N,) word LM states
    ctc: Optional[CtcPrefixScorer] = None
    ended: List[List[Tuple[List[int], float]]] = field(default_factory=list)  # per live utterance
    bonus: Optional[torch.Tensor] = None  # (N,) float64: the hotword bonus so far (context_graph)
    state: Optional[torch.Tensor] = None  # (N,) long: the context graph state
    ROWS: ClassVar[Tuple[str, ...]] = _Beams.ROWS + ("dec", "psi", "r_n", "r_b", "lm", "bonus", "state")

    def drop(self, finished: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        keep, index = super().drop(finished)
        self.ended = [self.ended[i] for i in keep.tolist()]
        if self.words is not None:
            self.words = [self.words[i] for i in index.tolist()]
        if self.ctc is not None:  # only the frames the utterances left need
            self.ctc.select(keep)
            frames = self.ctc.x.size(-1)
            self.r_n, self.r_b = self.r_n[:, :frames], self.r_b[:, :frames]
        return keep, index


@torch.inference_mode()
def joint_beam_search(decoder: torch.nn.Module, encoder_out: torch.Tensor, encoder_mask: torch.Tensor,
                      ctc_logp: torch.Tensor, beam_size: int, sos: int, eos: int, blank: int,
                      ctc_weight: float = 0.3, length_bonus: float = 0.0, words: Optional[WordScorer] = None,
                      ending: str = "espnet", max_len_ratio: float = 1.0,
                      context: Optional[ContextGraph] = None) -> List[DecodeResult]:
    """Joint CTC/attention beam search of a batch (see the module docstring).

    Args:
        decoder: as ``search.attention_beam_search`` takes it (``forward_one_step`` with a ``StepCache``).
        encoder_out: (B, T', D); encoder_mask: (B, 1, T'); ctc_logp: (B, T', V) CTC log-probabilities.
        beam_size: hypotheses kept per utterance; ctc_weight: λ in [0, 1] (0: no CTC, 1: no decoder);
        length_bonus: added per token, eos included (ESPnet's ``penalty``; > 0 favours longer hypotheses).
        words: the word LM of ``joint_ctc_attention_lm``, or None.
        ending: "espnet" (the modes') or "attention" (the ``attention`` mode's rules; ``max_len_ratio`` its bound).
        context: hotwords (``context_graph``): each token's bonus is added to the score of the prefix it extends;
            eos, and the end at the step limit, take back the open partial match.
    Returns:
        B results: the best hypothesis, its score, and the n-best (at most beam_size, best first).
    """
    if ending not in ENDINGS:
        raise ValueError(f"ending {ending!r}: valid are {', '.join(ENDINGS)}")
    if not 0.0 <= ctc_weight <= 1.0:
        raise ValueError(f"ctc_weight must be in [0, 1], got {ctc_weight}")
    device, batch = encoder_out.device, encoder_out.size(0)
    frames = encoder_mask.squeeze(1).sum(-1)
    ratio = 1.0 if ending == "espnet" else max_len_ratio
    steps = (frames.to(torch.float64) * ratio).ceil().clamp_min(1).long()
    rows = batch * beam_size
    memory_mask = encoder_mask[..., :0] if bool(encoder_mask.all()) else encoder_mask
    first = torch.tensor([0.0] + [-math.inf] * (beam_size - 1), dtype=torch.float64, device=device)
    live = _JointBeams(beam_size, list(range(batch)), memory=encoder_out, memory_mask=memory_mask,
                       memory_caches=decoder.memory_caches(encoder_out),
                       steps=steps.repeat_interleave(beam_size).unsqueeze(1),
                       hyps=torch.full((rows, 1), sos, dtype=torch.long, device=device),
                       scores=first.repeat(batch).unsqueeze(1),
                       end_flag=torch.zeros((rows, 1), dtype=torch.bool, device=device),
                       dec=torch.zeros(rows, dtype=torch.float64, device=device),
                       psi=torch.zeros(rows, dtype=torch.float64, device=device),
                       lm=torch.zeros(rows, dtype=torch.float64, device=device),
                       words=None if words is None else [words.initial()] * rows,
                       ended=[[] for _ in range(batch)],
                       bonus=torch.zeros(rows, dtype=torch.float64, device=device),
                       state=torch.zeros(rows, dtype=torch.long, device=device))
    if ctc_weight > 0.0:
        live.ctc = CtcPrefixScorer(ctc_logp, frames, blank, eos)
        live.r_n, live.r_b = live.ctc.initial(beam_size)
    else:  # (no CTC state to carry: placeholders the row selections can index)
        live.r_n = live.r_b = torch.zeros(rows, 0, dtype=torch.float64, device=device)
    search = _Search(decoder, live, eos, ctc_weight, length_bonus, words, ending, context)
    return search.run(int(steps.max()), batch)


class _Search:
    """The steps of one :func:`joint_beam_search` call over its ``_JointBeams``."""

    def __init__(self, decoder: torch.nn.Module, live: _JointBeams, eos: int, ctc_weight: float,
                 length_bonus: float, words: Optional[WordScorer], ending: str,
                 context: Optional[ContextGraph] = None):
        self.decoder, self.live, self.eos, self.words, self.ending = decoder, live, eos, words, ending
        self.context = context
        self.table = None if context is None else context.table(eos)  # this call's own rows of the graph's steps
        self.ctc_weight, self.dec_weight, self.length_bonus = ctc_weight, 1.0 - ctc_weight, length_bonus

    def run(self, maxlen: int, batch: int) -> List[DecodeResult]:
        live, beam = self.live, self.live.beam_size
        results: List[Optional[DecodeResult]] = [None] * batch
        for step in range(1, maxlen + 2):
            if self.ending == "attention":  # the attention mode's loop: done and finished before the step
                done = live.end_flag | (live.steps < step)
                finished = _finished(live.scores, done, beam, self.length_bonus <= 0.0)
                for i in finished.nonzero().squeeze(1).tolist():
                    rows = slice(i * beam, (i + 1) * beam)
                    results[live.utts[i]] = _best_of_beam(live.hyps[rows], live.scores[rows], self.eos, 0.0)
            else:
                if step > maxlen:
                    break
                done = ~torch.isfinite(live.scores)
                finished = torch.zeros(len(live.utts), dtype=torch.bool, device=done.device)
            if bool(finished.all()):
                break
            if bool(finished.any()):
                live.drop(finished)
                done = live.end_flag | (live.steps < step) if self.ending == "attention" else \
                    ~torch.isfinite(live.scores)
            self.advance(done, step)
            if self.ending == "espnet":
                finished = self.espnet_ends(step)
                for i in finished.nonzero().squeeze(1).tolist():
                    results[live.utts[i]] = _nbest(live.ended[i], beam)
                if bool(finished.all()):
                    break
                if bool(finished.any()):
                    live.drop(finished)
        return results

    def espnet_ends(self, step: int) -> torch.Tensor:
        """After a step: ended hypotheses leave the beam (their rows die), those at the step limit end without eos;
        which utterances are over (no running prefix, or ``end_detect``)."""
        live, beam = self.live, self.live.beam_size
        alive = torch.isfinite(live.scores.squeeze(1))
        ends = alive & ((live.hyps[:, -1] == self.eos) | (live.steps.squeeze(1) <= step))
        for row in ends.nonzero().squeeze(1).tolist():
            tokens = live.hyps[row, 1:].tolist()
            score = float(live.scores[row])
            if tokens[-1] == self.eos:
                tokens = tokens[:-1]
            else:
                if self.words is not None:  # ended at the step limit: the LM's end of sentence (ESPnet's final_score)
                    score += self.words.finish(live.words[row])
                if self.context is not None:  # ... and the open hotword match taken back
                    score += self.context.end(int(live.state[row]))
            live.ended[row // beam].append((tokens, score))
        live.scores = live.scores.masked_fill(ends.unsqueeze(1), -math.inf)
        running = torch.isfinite(live.scores.view(-1, beam)).any(dim=1)
        detected = torch.tensor([_end_detect(e, step - 1) for e in live.ended], dtype=torch.bool,
                                device=running.device)
        return ~running | detected

    def advance(self, done: torch.Tensor, step: int) -> None:
        """One step: every row's candidates scored, the ``beam_size`` best of each utterance kept."""
        live, beam, eos = self.live, self.live.beam_size, self.eos
        running = live.hyps.size(0)
        hyps_mask = torch.ones(running, 1, step, dtype=torch.bool, device=live.hyps.device)
        logp, cache = self.decoder.forward_one_step(live.memory, live.memory_mask, live.hyps, hyps_mask, live.cache,
                                                    live.memory_caches)
        logp = logp.to(torch.float64)
        vocab = logp.size(1)
        if self.words is not None:
            logp = logp.masked_fill(~self._allowed(done, vocab), -math.inf)
        if self.ctc_weight == 0.0:
            width = min(beam, vocab)
        elif self.dec_weight == 0.0:  # CTC alone: nothing to pre-select by (ESPnet: no pre-beam either)
            width = vocab
        else:
            width = min(vocab, int(PRE_BEAM_RATIO * beam))
        top, cand = logp.topk(width, dim=-1)           # (N, K), best first
        dec = live.dec.unsqueeze(1) + top
        score = self.dec_weight * dec if self.dec_weight > 0.0 else torch.zeros_like(dec)
        psi = None
        if self.ctc_weight > 0.0:
            last = live.hyps[:, -1]
            empty = torch.full_like(last, step == 1, dtype=torch.bool)
            utt = torch.arange(running, device=last.device) // beam
            psi = live.ctc.scores(live.r_n, live.r_b, utt, last, empty, cand)
            score = score + self.ctc_weight * psi
        states, lm = None, live.lm.unsqueeze(1).expand_as(score)
        if self.words is not None:
            states, lm = self._words(done, cand)
            score = score + lm
        score = score + self.length_bonus * step
        bonus = state = None
        if self.context is not None:
            bonus, state = self._bonus(cand)
            score = score + bonus
        # A done row: dead ("espnet", -inf), or frozen ("attention": itself, extended by eos at no cost); a row
        # at -inf (the beam's empty rows at the start) has no extension either.
        score = score.masked_fill(done | ~torch.isfinite(live.scores), -math.inf)
        if self.ending == "attention" and bool(done.any()):
            frozen = done.squeeze(1)
            score[frozen, 0] = live.scores[frozen, 0]
            cand[frozen, 0] = eos
            dec[frozen, 0], lm = live.dec[frozen], lm.clone()
            lm[frozen, 0] = live.lm[frozen]
            if psi is not None:
                psi[frozen, 0] = live.psi[frozen]
            if bonus is not None:
                bonus[frozen, 0], state[frozen, 0] = live.bonus[frozen], live.state[frozen]
        utts = running // beam
        flat = score.view(utts, beam * width)
        order = torch.sort(flat, dim=1, descending=True, stable=True).indices[:, :beam]
        src = (torch.arange(utts, device=flat.device).unsqueeze(1) * beam + order // width).view(-1)
        pick = (order % width).view(-1)
        token = cand[src, pick]
        if psi is not None:  # the forward variables of the survivors only (ctc_prefix_score's docstring)
            live.psi = psi[src, pick]
            live.r_n, live.r_b = live.ctc.extend(live.r_n[src], live.r_b[src], utt, last[src], empty, token)
        live.hyps = torch.cat([live.hyps[src], token.unsqueeze(1)], dim=1)
        if cache is not None:
            cache.reorder(src)
        live.cache = cache
        live.scores = flat.gather(1, order).view(-1, 1)
        live.dec, live.lm = dec[src, pick], lm[src, pick]
        if bonus is not None:
            live.bonus, live.state = bonus[src, pick], state[src, pick]
        if states is not None:
            live.words = [states[s][k] for s, k in zip(src.tolist(), pick.tolist())]
        live.end_flag = live.hyps[:, -1:] == eos

    def _bonus(self, cand: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Each candidate's hotword bonus (its prefix's, stepped by the candidate; eos takes the open match back)
        and graph state, (N, K) each: every candidate of the step at once (``context_graph.StepTable``)."""
        nxt, delta = self.table.lookup(self.live.state.cpu().numpy(), cand.cpu().numpy())
        return (self.live.bonus.unsqueeze(1) + torch.from_numpy(delta).to(cand.device),
                torch.from_numpy(nxt).to(cand.device))

    def _allowed(self, done: torch.Tensor, vocab: int) -> torch.Tensor:
        """(N, V) bool: the units the word LM lets each running prefix take next (eos where a sentence may end)."""
        rows, units = [], []
        for row, (state, over) in enumerate(zip(self.live.words, done.squeeze(1).tolist())):
            if over:
                continue
            allowed, may_end = self.words.allowed(state)
            allowed = list(allowed) + ([self.eos] if may_end else [])
            rows.extend([row] * len(allowed))
            units.extend(allowed)
        mask = torch.zeros(len(self.live.words), vocab, dtype=torch.bool, device=done.device)
        mask[torch.tensor(rows, dtype=torch.long), torch.tensor(units, dtype=torch.long)] = True
        return mask | done

    def _words(self, done: torch.Tensor, cand: torch.Tensor) -> Tuple[List[List[Any]], torch.Tensor]:
        """Each candidate's word LM state and the LM part of its score, (N, K) (a done row keeps its own)."""
        live = self.live
        states, parts = [], []
        for row, (state, over, units) in enumerate(zip(live.words, done.squeeze(1).tolist(), cand.tolist())):
            if over:
                states.append([state] * len(units))
                parts.append([-math.inf] * len(units))
                continue
            out = self.words.extend(state, units, self.eos)
            states.append([s for s, _ in out])
            parts.append([d for _, d in out])
        lm = live.lm.unsqueeze(1) + torch.tensor(parts, dtype=torch.float64, device=cand.device)
        return states, lm


def _end_detect(ended: List[Tuple[List[int], float]], i: int) -> bool:
    """ESPnet's ``end_detect`` at step ``i`` (0-based) over one utterance's ended hypotheses (tokens, score): the
    best of each of the lengths i, i - 1, ..., i - M + 1 (counting sos and eos) exists and scores more than
    |D_end| below the best of all."""
    if not ended:
        return False
    best = max(score for _, score in ended)
    count = 0
    for m in range(END_DETECT_LENGTHS):
        same = [score for tokens, score in ended if len(tokens) + 2 == i - m]
        if same and max(same) - best < END_DETECT_MARGIN:
            count += 1
    return count == END_DETECT_LENGTHS


def _nbest(ended: List[Tuple[List[int], float]], beam_size: int) -> DecodeResult:
    """The result of one utterance from its ended hypotheses, best first (equal scores: the earlier ended)."""
    ranked = sorted(ended, key=lambda e: e[1], reverse=True)[:beam_size]  # (sorted is stable)
    if not ranked:  # (only when every extension was impossible from the first step on)
        return DecodeResult(tokens=[], score=-math.inf)
    return DecodeResult(tokens=list(ranked[0][0]), score=ranked[0][1], nbest=[list(t) for t, _ in ranked],
                        nbest_scores=[s for _, s in ranked])
