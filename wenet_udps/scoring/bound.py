"""A score is bound to the text it scored: the ``wer`` file's first lines record the SHA-256 of both files.

``tools/compute-wer.py`` starts its report with two lines, then writes WeNet's report unchanged::

    Scored hypotheses: /abs/exp/x/test/attention/text (SHA-256 9f86d081884c...)
    Scored references: /abs/data/test/text (SHA-256 2c26b46b68ff...)

(the full 64 hex digits; ``grep Overall wer`` and ``tail wer`` read as before), and a third line with the options
that decide what counts as a reference token (:func:`options_line`)::

    Scored with: char=0 case_sensitive=0 remove_tag=1 missing=deletions case=keep punctuation=keep ignore_words=none

 Every reader of a ``wer`` file
reads it through :func:`read_score`, which refuses an empty file (``compute-wer > wer`` leaves one when compute-wer
fails), a partial one (no whole ``Overall`` line, or a verbose report cut before its closing line) and one without
the two lines (another tool's, or written before scores were bound), and then :func:`check_scored`, which refuses
a score whose hypothesis file (the ``text`` beside it) or references have other contents now, naming both files:
a new decode that was not rescored would otherwise show the old error rate beside the new checkpoint.
:func:`check_counts` binds the score's ``N`` to its references: ``N`` must be the number of reference tokens the
recorded options give, every reference counted and no word ignored. A ``wer`` rescored by hand with ``--ig`` (or
``--missing skip`` with hypotheses missing) scores fewer tokens than the references hold, so its rate cannot stand
beside the others in a table: refused, naming the file, both counts and the option (docs/failure_behaviour.md).
A ``wer`` without the third line (written before 2026-12-02) has its ``N`` left unchecked.
:func:`check_rescored` binds the score's numbers to the text (issue 80 round 7): the counts are computed again
from the ``text`` and the references under the recorded options (the scorer compute-wer uses, one pass), so a
``wer`` whose ``Overall`` line was edited is refused; and the ``text`` must be the one its ``decode.info`` says was
decoded (``text_sha256``, written by recognize and sherpa_decode), so a hypothesis edited by hand and rescored is
refused too. Only a legacy ``decode.info`` (wenet_udps.scoring.record: none of the keys the current writers always
write) may lack ``text_sha256`` and leave the text unchecked; a current one without it is refused.
"""
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from wenet_udps.scoring.record import record_problem
from wenet_udps.scoring.tokens import read_ignore_words, read_text, tokenize
from wenet_udps.scoring.wer import SEPARATOR, score as score_texts
from wenet_udps.utils.cli import UserError, open_input
from wenet_udps.utils.text_norm import TextNorm
from wenet_udps.utils.source_info import file_sha256, read_source

BOUND = re.compile(r"^Scored (hypotheses|references): (.+) \(SHA-256 ([0-9a-f]{64})\)$")
OPTIONS = re.compile(r"^Scored with: (.+)$")
OPTION_KEYS = ("char", "case_sensitive", "remove_tag", "missing", "case", "punctuation", "ignore_words")
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
    options: Optional[Dict[str, str]] = None   # the "Scored with:" line (OPTION_KEYS), None in an older wer


def binding_lines(ref: str, hyp: str) -> List[str]:
    """The two first lines of a report scoring ``hyp`` against ``ref``: each file by absolute path and SHA-256."""
    return [f"Scored {what}: {os.path.abspath(path)} (SHA-256 {file_sha256(path)})"
            for what, path in (("hypotheses", hyp), ("references", ref))]


def options_line(*, char: bool, case_sensitive: bool, remove_tag: bool, missing: str, case: str,
                 punctuation: str, ignore_words: Optional[str]) -> str:
    """The third line of a report: the options that decide what a reference token is (the ignore-words file, by
    absolute path, last: it may hold spaces)."""
    values = (int(char), int(case_sensitive), int(remove_tag), missing, case, punctuation,
              os.path.abspath(ignore_words) if ignore_words else "none")
    return "Scored with: " + " ".join(f"{k}={v}" for k, v in zip(OPTION_KEYS, values))


def _options(line: str) -> Optional[Dict[str, str]]:
    m = OPTIONS.match(line)
    if not m:
        return None
    head, sep, ignore = m.group(1).partition(" ignore_words=")
    options = dict(item.partition("=")[::2] for item in head.split())
    options["ignore_words"] = ignore
    return options if sep and set(options) == set(OPTION_KEYS) else None


def read_score(path: str) -> Score:
    """The score of the ``wer`` file ``path``; ScoreError (naming it and what to do) when it is empty, partial,
    or records no SHA-256 of what it scored."""
    with open_input(path, "r", encoding="utf-8", errors="replace") as f:
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
    options = _options(lines[2]) if len(lines) > 2 else None
    if options is None and len(lines) > 2 and lines[2].startswith("Scored with: "):
        raise ScoreError(f"{path} is partial or malformed (its 'Scored with:' line is cut or edited); {RESCORE}")
    return Score(path, rate, counts, bound["hypotheses"][0], bound["hypotheses"][1], bound["references"][0],
                 bound["references"][1], options)


def reference_tokens(refs: Dict[str, str], options: Dict[str, str]) -> int:
    """How many tokens ``refs`` hold as compute-wer scores them under ``options`` (normalised as declared, split,
    tags cut), every utterance counted and no word ignored."""
    norm = _norm(options)
    return sum(len(tokenize(norm(text), char=options["char"] == "1", case_sensitive=options["case_sensitive"] == "1",
                            remove_tags=options["remove_tag"] == "1")) for text in refs.values())


def check_counts(score: Score) -> None:
    """ScoreError unless ``score``'s N is the number of tokens of the references it names (where they still exist;
    :func:`check_scored` has checked their contents): a score of fewer tokens (words ignored, utterances skipped)
    is not comparable with the others. Nothing is checked for a ``wer`` without its options line."""
    if score.options is None or not os.path.isfile(score.ref):
        return
    try:
        expected = reference_tokens(read_text(score.ref), score.options)
    except ValueError as e:
        raise ScoreError(f"{score.path}: its references cannot be counted ({e}); {RESCORE}") from None
    n = score.counts["N"]
    if n == expected:
        return
    why = []
    if score.options["ignore_words"] != "none":
        why.append(f"scored with --ignore_words {score.options['ignore_words']}")
    if score.options["missing"] != "deletions":
        why.append(f"scored with --missing {score.options['missing']}")
    how = f" ({' and '.join(why)}: rescored by hand?)" if why else " (edited, or scored by another tool?)"
    raise ScoreError(f"{score.path} scores N={n} reference tokens, but its references {score.ref} hold {expected}"
                     f"{how}: a table compares scores of every reference token; {RESCORE}")


def _norm(options: Dict[str, str]) -> TextNorm:
    """The normaliser compute-wer applied under ``options`` (a ``refuse``d reference holds no mark: ``keep``)."""
    return TextNorm(case=options["case"], punctuation="keep" if options["punctuation"] == "refuse"
                    else options["punctuation"])


def check_rescored(score: Score, hyp: str, ref: Optional[str]) -> None:
    """ScoreError, naming the file, unless ``hyp`` is the ``text`` its ``decode.info`` records (``text_sha256``)
    and ``score``'s counts are those the scorer gives ``hyp`` against ``ref`` under the recorded options: an
    edited ``Overall`` line, or a hypothesis edited by hand and rescored, is not the score of what was decoded."""
    info_path = os.path.join(os.path.dirname(os.path.abspath(hyp)), "decode.info")
    info = read_source(info_path)
    problem = record_problem(info, info_path)   # a current record without text_sha256 is not a legacy one
    if problem:
        raise ScoreError(f"{problem}; decode it again (run.sh --stage 5 --stop_stage 5)")
    decoded = info.get("text_sha256")
    if decoded and decoded != score.hyp_sha256:
        raise ScoreError(f"{hyp} is not the text that was decoded: {info_path} records SHA-256 {decoded[:12]}, the "
                         f"text scored in {score.path} has SHA-256 {score.hyp_sha256[:12]} (edited by hand and "
                         f"rescored?); decode it again (run.sh --stage 5 --stop_stage 5)")
    if score.options is None or ref is None:
        return
    options = score.options
    try:
        norm = _norm(options)
        refs = {k: norm(v) for k, v in read_text(ref).items()}
        hyps = {k: norm(v) for k, v in read_text(hyp).items()}
        ignore = read_ignore_words(None if options["ignore_words"] == "none" else options["ignore_words"],
                                   options["case_sensitive"] == "1")
    except (OSError, ValueError) as e:
        raise ScoreError(f"{score.path}: what it scored cannot be scored again ({e}); {RESCORE}") from None
    total = score_texts(refs, hyps, char=options["char"] == "1", case_sensitive=options["case_sensitive"] == "1",
                        ignore=ignore, remove_tags=options["remove_tag"] == "1", missing=options["missing"]).total
    counts = dict(zip("NCSDI", (total.N, total.C, total.S, total.D, total.I)))
    if counts != score.counts:
        shown = " ".join(f"{k}={v}" for k, v in score.counts.items())
        real = " ".join(f"{k}={v}" for k, v in counts.items())
        raise ScoreError(f"{score.path} records {shown}, but {hyp} scored against {ref} under its options gives "
                         f"{real} (its numbers were edited?); {RESCORE}")


def check_scored(score: Score, hyp: str, ref: Optional[str] = None, sums: Optional[Dict[str, str]] = None) -> None:
    """ScoreError, naming both files, unless ``hyp`` (the hypotheses that count: the ``text`` beside the ``wer``)
    and ``ref`` (the references that count, e.g. ``--data_dir``'s; None: those the score names, where they still
    exist) have the contents ``score`` recorded, and its N is every token of those references (:func:`check_counts`);
    ``sums`` caches SHA-256 by path."""
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
    check_counts(score)   # and of every reference token (issue 80: not a score by hand with --ig)
    check_rescored(score, hyp, ref)   # and its numbers are those of the text decoded (issue 80 round 7)


def options_problem(scores: Sequence[Score],
                    decoded: Sequence[Tuple[str, str, Mapping[str, str]]] = ()) -> Optional[str]:
    """Why ``scores`` cannot sit in one table, or None: two ``wer`` files whose ``Scored with:`` options differ
    (``char`` aside: a recipe scores characters or words), named with the options that differ. A ``wer`` of
    another option gives another number on the same text (``--remove_tag 0`` counts ``<unk>``). Likewise the
    decodes: ``decoded`` holds (result dir, column, recorded decoding options) and two results of one column (a
    mode: one table column, and what the paired tests pair) whose decode.info record different values of an option
    both record (``decoding_chunk_size 4`` against ``-1``: another number from the same weights) are named."""
    recorded = [s for s in scores if s.options is not None]
    for other in recorded[1:]:
        first = recorded[0]
        differ = [k for k in first.options if k != "char" and first.options[k] != other.options.get(k)]
        if differ:
            return (f"{first.path} and {other.path} were scored under different options ("
                    + ", ".join(f"{k}={first.options[k]} vs {k}={other.options.get(k)}" for k in differ)
                    + "), so their numbers do not compare; score every result with the recipe's options")
    firsts: Dict[str, Tuple[str, Mapping[str, str]]] = {}
    for path, column, options in decoded:
        first_path, first = firsts.setdefault(column, (path, options))
        differ = [k for k in first if k in options and first[k] != options[k]]
        if differ:
            return (f"{first_path} and {path} were decoded under different options ("
                    + ", ".join(f"{k}={first[k]} vs {k}={options[k]}" for k in differ)
                    + f"), so their {column} numbers do not compare; decode every result of one table with the "
                      f"same options (run.sh --stage 5), or collect them from separate exp dirs")
    return None
