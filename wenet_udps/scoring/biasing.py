"""Biased-word error rates (Le et al., 2021, "Contextualized streaming end-to-end speech recognition with trie-based
deep biasing and shallow fusion") and phrase recall / precision / F1 (WeNet's hotword metrics), from the alignment
compute-wer makes (``scoring.wer.score``: the same tokens, the same tie order).

A token is *biased* where it lies inside an occurrence of a phrase of the biasing list (a one-word phrase: the word
is in the list, Le et al.'s case; several words or, with ``char``, characters: every token of the occurrence).
Over the alignment of each utterance:

- WER: (S + D + I) / N over every token, compute-wer's Overall;
- B-WER: errors on biased tokens / the biased reference tokens: a substitution or deletion of a biased reference
  token, an insertion of a hypothesis token that is biased in the hypothesis;
- U-WER: the same for every other token (so the two split WER's errors).

Phrases: for each utterance and phrase, ``r`` its occurrences in the reference, ``h`` in the hypothesis, matched
``min(r, h)``; recall = matched / sum r, precision = matched / sum h, F1 their harmonic mean.
"""
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from wenet_udps.scoring.tokens import tokenize
from wenet_udps.scoring.wer import Report, score


@dataclass
class PartCounts:
    """Reference tokens ``N`` of one part (biased or not) and its errors."""
    N: int = 0
    S: int = 0
    D: int = 0
    I: int = 0  # noqa: E741 (the conventional name)

    def error_rate(self) -> Optional[float]:
        """Percent (S + D + I) / N; None (undefined, printed ``-``) when N is 0: a list none of whose words the
        references hold has no B-WER, and 0.00 would read as a perfect one."""
        return 100.0 * (self.S + self.D + self.I) / self.N if self.N else None

    def __str__(self) -> str:
        return f"{rate_text(self.error_rate())} % N={self.N} S={self.S} D={self.D} I={self.I}"


def rate_text(value: Optional[float], digits: int = 2) -> str:
    """A rate as printed: ``-`` where it is undefined (0 / 0), else with ``digits`` decimals."""
    return "-" if value is None else f"{value:.{digits}f}"


@dataclass
class BiasReport:
    report: Report                      # compute-wer's (Overall: WER)
    biased: PartCounts = field(default_factory=PartCounts)
    unbiased: PartCounts = field(default_factory=PartCounts)
    ref_phrases: int = 0
    hyp_phrases: int = 0
    matched: int = 0

    # None where undefined (printed ``-``): recall without a phrase in the references, precision without one
    # written (issue 80's attack: 0.0000 there read as a failure and entered averages), F1 without both.
    @property
    def recall(self) -> Optional[float]:
        return self.matched / self.ref_phrases if self.ref_phrases else None

    @property
    def precision(self) -> Optional[float]:
        return self.matched / self.hyp_phrases if self.hyp_phrases else None

    @property
    def f1(self) -> Optional[float]:
        p, r = self.precision, self.recall
        if p is None or r is None:
            return None
        return 2 * p * r / (p + r) if p + r else 0.0

    def lines(self) -> List[str]:
        return [f"WER -> {self.report.total}", f"U-WER -> {self.unbiased}", f"B-WER -> {self.biased}",
                f"Phrases -> recall {rate_text(self.recall, 4)} precision {rate_text(self.precision, 4)} "
                f"F1 {rate_text(self.f1, 4)} "
                f"(reference {self.ref_phrases}, hypothesis {self.hyp_phrases}, matched {self.matched})"]


class PhraseIndex:
    """The phrases as token tuples, indexed by their first token (an utterance is scanned once)."""

    def __init__(self, phrases: Iterable[Sequence[str]]):
        self.by_first: Dict[str, List[Tuple[str, ...]]] = {}
        for phrase in dict.fromkeys(tuple(p) for p in phrases if p):
            self.by_first.setdefault(phrase[0], []).append(phrase)

    def occurrences(self, tokens: Sequence[str]) -> List[Tuple[int, Tuple[str, ...]]]:
        """(start, phrase) of every occurrence in ``tokens``, overlapping ones too."""
        out = []
        for i, token in enumerate(tokens):
            for phrase in self.by_first.get(token, ()):
                if tuple(tokens[i:i + len(phrase)]) == phrase:
                    out.append((i, phrase))
        return out

    def covered(self, tokens: Sequence[str]) -> List[bool]:
        """Whether each token lies inside an occurrence."""
        mask = [False] * len(tokens)
        for start, phrase in self.occurrences(tokens):
            mask[start:start + len(phrase)] = [True] * len(phrase)
        return mask


def score_biased(refs: Mapping[str, str], hyps: Mapping[str, str],
                 phrases: Union[Iterable[str], Mapping[str, Iterable[str]]], *, char: bool,
                 case_sensitive: bool = False, ignore: Iterable[str] = (), remove_tags: bool = True,
                 missing: str = "deletions") -> BiasReport:
    """compute-wer's scores of ``hyps`` against ``refs`` (``wer.score``, the same options) split by the biasing list
    ``phrases`` (texts, tokenised as the transcripts are), and the phrase counts (module docstring). ``phrases`` as
    a mapping key -> texts is a list per utterance (Le et al.'s: each utterance's biased words are its own; a key
    it lacks has none)."""
    ignore = set(ignore)
    opts = dict(char=char, case_sensitive=case_sensitive, ignore=ignore, remove_tags=remove_tags)
    if isinstance(phrases, Mapping):
        indexes = {k: PhraseIndex(tokenize(p, **opts) for p in v) for k, v in phrases.items()}
        shared = PhraseIndex(())
    else:
        indexes, shared = {}, PhraseIndex(tokenize(p, **opts) for p in phrases)
    report = score(refs, hyps, missing=missing, **opts)
    out = BiasReport(report)
    for key, alignment in report.utterances:
        index = indexes.get(key, shared)
        ref = [r for r, _ in alignment.pairs if r]
        hyp = [h for _, h in alignment.pairs if h]
        ref_biased, hyp_biased = index.covered(ref), index.covered(hyp)
        i = j = 0
        for r, h in alignment.pairs:
            if r:
                part = out.biased if ref_biased[i] else out.unbiased
                part.N += 1
                if not h:
                    part.D += 1
                elif r != h:
                    part.S += 1
                i += 1
            else:
                (out.biased if hyp_biased[j] else out.unbiased).I += 1
            if h:
                j += 1
        ref_count = _counts(index.occurrences(ref))
        hyp_count = _counts(index.occurrences(hyp))
        out.ref_phrases += sum(ref_count.values())
        out.hyp_phrases += sum(hyp_count.values())
        out.matched += sum(min(n, hyp_count.get(p, 0)) for p, n in ref_count.items())
    return out


def _counts(occurrences: List[Tuple[int, Tuple[str, ...]]]) -> Dict[Tuple[str, ...], int]:
    counts: Dict[Tuple[str, ...], int] = {}
    for _, phrase in occurrences:
        counts[phrase] = counts.get(phrase, 0) + 1
    return counts

