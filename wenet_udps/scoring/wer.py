"""Corpus scoring and the report layout of WeNet's ``tools/compute-wer.py``.

The report (``verbose``) is, byte for byte, WeNet's: per reference utterance a block::

    <blank line>
    utt: BAC009S0764W0121
    WER: 7.69 % N=13 C=12 S=1 D=0 I=0
    lab: 甚 至 出 现 交 易 ...
    rec: 甚 至 出 线 交 易 ...
    <blank line>

(no lab/rec lines when both sides are empty), a line of 75 ``=``, a blank line, ``Overall -> ...``, one line per
cluster of tokens (``Mandarin``, ``English``, ``Number``, ``Japanese``, ``Other``; in order of first appearance),
a blank line and the ``=`` line again. Without ``verbose`` only the Overall line and a blank line are written.

One policy differs from WeNet by default: a reference utterance without hypothesis counts as all deletions
(``missing="deletions"``), because WeNet's skipping (``missing="skip"``) reports a lower error rate for a decoder
that drops utterances. Either way the number of missing hypotheses, and of hypotheses without reference, is
written on a line before ``Overall`` (only when there are some).
"""
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, TextIO, Tuple

from wenet_udps.scoring.align import Alignment, Counts, align
from wenet_udps.scoring.tokens import cluster_of, tokenize

MISSING_POLICIES = ("deletions", "skip")
SEPARATOR = "=" * 75


@dataclass
class Report:
    """Scores of a corpus: per-utterance alignments (scored ones, reference order), totals, clusters."""

    utterances: List[Tuple[str, Alignment]] = field(default_factory=list)
    total: Counts = field(default_factory=Counts)
    clusters: Dict[str, Counts] = field(default_factory=dict)
    missing: List[str] = field(default_factory=list)
    extra: List[str] = field(default_factory=list)
    missing_policy: str = "deletions"


def _add_to_clusters(report: Report, result: Alignment, tokens: Iterable[str], cache: Dict[str, str]) -> None:
    def kind(token: str) -> str:
        if token not in cache:
            cache[token] = cluster_of(token)
        return cache[token]

    for token in tokens:  # cluster order = first appearance, hypothesis tokens before reference tokens
        report.clusters.setdefault(kind(token), Counts())
    for r, h in result.pairs:
        counts = report.clusters[kind(r or h)]
        if not r:
            counts.I += 1
            continue
        counts.N += 1
        if not h:
            counts.D += 1
        elif r == h:
            counts.C += 1
        else:
            counts.S += 1


def score(refs: Mapping[str, str], hyps: Mapping[str, str], *, char: bool, case_sensitive: bool = False,
          ignore: Iterable[str] = (), remove_tags: bool = True, missing: str = "deletions") -> Report:
    """Align every reference utterance with its hypothesis (transcripts as read by ``read_text``).

    missing: ``deletions`` scores a reference without hypothesis against an empty one; ``skip`` leaves it out.
    """
    if missing not in MISSING_POLICIES:
        raise ValueError(f"unknown missing-hypothesis policy {missing!r}; valid choices: {', '.join(MISSING_POLICIES)}")
    ignore = set(ignore)
    report = Report(missing=[k for k in refs if k not in hyps], extra=[k for k in hyps if k not in refs],
                    missing_policy=missing)
    cache: Dict[str, str] = {}
    for key, ref_text in refs.items():
        if key not in hyps and missing == "skip":
            continue
        opts = dict(char=char, case_sensitive=case_sensitive, ignore=ignore, remove_tags=remove_tags)
        ref_tokens = tokenize(ref_text, **opts)
        hyp_tokens = tokenize(hyps.get(key, ""), **opts)
        result = align(ref_tokens, hyp_tokens)
        _add_to_clusters(report, result, hyp_tokens + ref_tokens, cache)
        report.total.add(result.counts)
        report.utterances.append((key, result))
    return report


def display_width(token: str) -> int:
    """Terminal columns of a token: 2 for wide, full-width and East-Asian-ambiguous characters."""
    return sum(2 if unicodedata.east_asian_width(c) in ("A", "F", "W") else 1 for c in token)


def aligned_lines(pairs: List[Tuple[str, str]], pad: str) -> Tuple[str, str]:
    """``lab:`` / ``rec:`` lines whose columns line up; every token is followed by one space."""
    lab, rec = ["lab: "], ["rec: "]
    for r, h in pairs:
        width = max(display_width(r), display_width(h))
        lab.append(r + pad * (width - display_width(r)) + " ")
        rec.append(h + pad * (width - display_width(h)) + " ")
    return "".join(lab), "".join(rec)


def notes(report: Report, num_refs: int) -> List[str]:
    """Lines about missing hypotheses and hypotheses without reference (none when there are neither)."""
    out = []
    if report.missing:
        how = ("scored as all deletions; --missing skip leaves them out as WeNet does"
               if report.missing_policy == "deletions" else "skipped, as WeNet does")
        out.append(f"Missing hypotheses: {len(report.missing)} of {num_refs} reference utterances ({how}), "
                   f"e.g. {report.missing[0]}")
    if report.extra:
        out.append(f"Hypotheses without reference: {len(report.extra)} (ignored), e.g. {report.extra[0]}")
    return out


def write_report(report: Report, out: TextIO, *, verbose: bool = True, pad: str = " ",
                 note_lines: Iterable[str] = ()) -> None:
    """Write ``report`` in WeNet's layout (see the module docstring); ``note_lines`` go before Overall."""
    if verbose:
        for key, result in report.utterances:
            out.write(f"\nutt: {key}\nWER: {result.counts}\n")
            if result.pairs:
                lab, rec = aligned_lines(result.pairs, pad)
                out.write(f"{lab}\n{rec}\n\n")
        out.write(f"{SEPARATOR}\n\n")
    for line in note_lines:
        out.write(line + "\n")
    out.write(f"Overall -> {report.total}\n")
    if not verbose:
        out.write("\n")
        return
    for name, counts in report.clusters.items():
        out.write(f"{name} -> {counts}\n")
    out.write(f"\n{SEPARATOR}\n")


def confusions(report: Report) -> Counter:
    """``Counter`` of every error of a report: ``(ref, hyp)`` pairs that differ; ``""`` stands for the missing side
    of an insertion or deletion."""
    return Counter(pair for _, result in report.utterances for pair in result.pairs if pair[0] != pair[1])


def error_rate(refs: Mapping[str, str], hyps: Mapping[str, str], *, char: bool) -> float:
    """The Overall error rate (percent), missing hypotheses counted as deletions."""
    return score(refs, hyps, char=char).total.error_rate()
