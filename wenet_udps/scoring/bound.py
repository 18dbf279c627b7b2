"""A score is bound to the text it scored: the ``wer`` file's first lines record the SHA-256 of both files.

``tools/compute-wer.py`` starts its report with two lines, then writes WeNet's report unchanged::

    Scored hypotheses: /abs/exp/x/test/attention/text (SHA-256 9f86d081884c...)
    Scored references: /abs/data/test/text (SHA-256 2c26b46b68ff...)

(the full 64 hex digits; ``grep Overall wer`` and ``tail wer`` read as before). Every reader of a ``wer`` file
reads it through :func:`read_score`, which refuses an empty file (``compute-wer > wer`` leaves one when compute-wer
fails), a partial one (no whole ``Overall`` line, or a verbose report cut before its closing line) and one without
the two lines (another tool's, or written before scores were bound), and then :func:`check_scored`, which refuses
a score whose hypothesis file (the ``text`` beside it) or references have other contents now, naming both files:
a new decode that was not rescored would otherwise show the old error rate beside the new checkpoint.
"""
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional

from wenet_udps.scoring.wer import SEPARATOR
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.source_info import file_sha256

BOUND = re.compile(r"^Scored (hypotheses|references): (.+) \(SHA-256 ([0-9a-f]{64})\)$")
OVERALL = re.compile(r"^Overall -> ([0-9.]+) % N=(\d+) C=(\d+) S=(\d+) D=(\d+) I=(\d+)$")
RESCORE = ("score it again: run.sh --stage 5 --stop_stage 5 (it rescores every result), or tools/compute-wer.py "
           "with the recipe's options, REF HYP > wer")


class ScoreError(UserError):
    """A ``wer`` file that is empty, partial, unbound, or bound to other text than the files it names now."""


@dataclass(frozen=True)
class Score:
    """A ``wer`` file read by :func:`read_score`: its Overall error rate (%) and counts, and what it scored."""
    path: str
    rate: float
    counts: Dict[str, int]     # N C S D I
    hyp: str
    hyp_sha256: str
    ref: str
    ref_sha256: str


def binding_lines(ref: str, hyp: str) -> List[str]:
    """The two first lines of a report scoring ``hyp`` against ``ref``: each file by absolute path and SHA-256."""
    return [f"Scored {what}: {os.path.abspath(path)} (SHA-256 {file_sha256(path)})"
            for what, path in (("hypotheses", hyp), ("references", ref))]


def read_score(path: str) -> Score:
    """The score of the ``wer`` file ``path``; ScoreError (naming it and what to do) when it is empty, partial,
    or records no SHA-256 of what it scored."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    if not any(line.strip() for line in lines):
        raise ScoreError(f"{path} is empty: compute-wer.py failed or was stopped (`compute-wer.py ... > wer` "
                         f"leaves an empty file); {RESCORE}")
    bound = {m.group(1): (m.group(2), m.group(3)) for m in map(BOUND.match, lines[:2]) if m}
    if len(bound) < 2 and lines[0].startswith("Scored hypotheses: "):
        raise ScoreError(f"{path} is partial (it ends inside the lines naming what it scored); {RESCORE}")
    if len(bound) != 2:
        raise ScoreError(f"{path} records no SHA-256 of the text it scored (its first lines are not 'Scored "
                         f"hypotheses: ...' and 'Scored references: ...': another tool's report, or one written "
                         f"before scores were bound), so it cannot be told to belong to the text beside it; "
                         f"{RESCORE}")
    overall = [(i, m) for i, m in ((i, OVERALL.match(line)) for i, line in enumerate(lines)) if m]
    if len(overall) != 1:
        what = "no whole 'Overall -> X % N=... I=...' line" if not overall else f"{len(overall)} 'Overall' lines"
        raise ScoreError(f"{path} is partial or malformed ({what}); {RESCORE}")
    at, m = overall[0]
    counts = dict(zip("NCSDI", map(int, m.groups()[1:])))
    rate = float(m.group(1))
    wrong = counts["N"] == 0 or counts["C"] + counts["S"] + counts["D"] != counts["N"] or abs(
        rate - 100.0 * (counts["S"] + counts["D"] + counts["I"]) / max(counts["N"], 1)) > 0.006
    rest = [line for line in lines[at + 1:] if line.strip()]
    verbose = SEPARATOR in lines[:at]
    cut = rest[-1:] != [SEPARATOR] if verbose else bool(rest)   # verbose: the report's closing line
    if wrong or cut:
        what = "its Overall counts do not add up" if wrong else "it ends before the last line of the report"
        raise ScoreError(f"{path} is partial or malformed ({what}); {RESCORE}")
    return Score(path, rate, counts, bound["hypotheses"][0], bound["hypotheses"][1], bound["references"][0],
                 bound["references"][1])


def check_scored(score: Score, hyp: str, ref: Optional[str] = None, sums: Optional[Dict[str, str]] = None) -> None:
    """ScoreError, naming both files, unless ``hyp`` (the hypotheses that count: the ``text`` beside the ``wer``)
    and ``ref`` (the references that count, e.g. ``--data_dir``'s; None: those the score names, where they still
    exist) have the contents ``score`` recorded; ``sums`` caches SHA-256 by path."""
    sums = {} if sums is None else sums
    if ref is None and os.path.isfile(score.ref):
        ref = score.ref
    for what, path, recorded, digest in (("hypotheses", hyp, score.hyp, score.hyp_sha256),
                                         ("references", ref, score.ref, score.ref_sha256)):
        if path is None:
            continue
        if not os.path.isfile(path):
            raise ScoreError(f"{score.path} scored the {what} {recorded}, but {path} does not exist; {RESCORE}")
        if path not in sums:
            sums[path] = file_sha256(path)
        if sums[path] != digest:
            raise ScoreError(f"{score.path} is the score of other text: it scored the {what} {recorded} with "
                             f"SHA-256 {digest[:12]}, but {path} has SHA-256 {sums[path][:12]} (decoded or prepared "
                             f"again, and not rescored); {RESCORE}")
