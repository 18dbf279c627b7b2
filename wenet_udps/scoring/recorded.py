"""A score in a results table is stage 5's score of what its decode recorded (issue 80 round 7, G).

:func:`check_scored` (wenet_udps.scoring.bound) binds a ``wer`` to the files it names; :func:`check_recorded`
binds it to the decode and to the table, for a result whose ``decode.info`` lies beside it (ours):

- its ``Scored with:`` line must be there (a ``wer`` without it cannot have its N or options checked), and
- name the options stage 5 scores with (:func:`stage5_options`: compute-wer's defaults, with the recipe's ``--case``
  and ``--punctuation`` that run.sh passes to both, checked where given; ``char`` may differ, a recipe scores words
  or characters):
  every column rescored alike by hand (``--rt=0``) gives numbers that compare with each other, not with a run's;
- the references it scored must be those the decode recorded (``refs_sha256``: wenet_udps.scoring.references),
  and with a table's ``--data_dir``, that dir's ``<set>/text`` (by SHA-256: ``check_scored``'s ``ref``), whose
  transcripts must be the decode's (else a ``ReferencesError``: the table's ``--data_dir`` is the wrong one).

Each refusal is a :class:`ScoreError` naming the ``wer``. A result with no ``decode.info`` in its mode, set or
experiment folder (:func:`read_decode_info`: made by hand) is not one of ours: tools/collect_results.py refuses it
(:data:`UNRECORDED`) unless ``--allow_unrecorded``, which marks its row.
"""
import os
from pathlib import Path
from typing import Dict, List, Mapping, Optional

from wenet_udps.scoring.bound import RESCORE, Score, ScoreError, check_scored, read_score
from wenet_udps.scoring.references import ReferencesError, check_references
from wenet_udps.scoring.tokens import read_text
from wenet_udps.utils.source_info import file_sha256, read_record, read_source

# compute-wer.py's defaults, which stage 5's score_into keeps (tools/run_eval.sh: --char and the recipe's
# normalisation only); the values as the "Scored with:" line writes them.
STAGE5_DEFAULTS = {"case_sensitive": "0", "remove_tag": "1", "missing": "deletions", "ignore_words": "none"}


UNRECORDED = ("no decode.info records what made it (made by hand, or by another toolkit?), so nothing binds its "
              "number to a checkpoint and a decode; decode it with run.sh --stage 5, or show it marked with "
              "collect_results.py --allow_unrecorded")


def stage5_options(case: Optional[str] = None, punctuation: Optional[str] = None) -> Dict[str, str]:
    """The ``Scored with:`` options (``char`` aside) of run.sh's stage 5 for a recipe normalising ``case`` and
    ``punctuation`` (run.sh --text_case, --text_punctuation; None: not known, so not checked)."""
    given = {"case": case, "punctuation": punctuation}
    return {**STAGE5_DEFAULTS, **{k: v for k, v in given.items() if v is not None}}


def _shown(options: Mapping[str, str], keys) -> str:
    return " ".join(f"{k}={options.get(k)}" for k in keys)


def check_recorded(score: Score, hyp: str, expected: Mapping[str, str], data_text: Optional[str] = None,
                   sums: Optional[Dict[str, str]] = None) -> None:
    """ScoreError unless ``score`` (the ``wer`` beside ``hyp``) is bound to ``hyp`` and its references
    (``check_scored``, against ``data_text`` where given: the table's ``--data_dir/<set>/text``) and, where a
    ``decode.info`` lies beside ``hyp``, records its options, those of ``expected`` (:func:`stage5_options`), and
    scored the references that decode recorded."""
    info = os.path.join(os.path.dirname(os.path.abspath(hyp)), "decode.info")
    sums = {} if sums is None else sums
    check_scored(score, hyp, sums=sums)
    if data_text is not None:   # the table's references are the decode's, or a usage error (ReferencesError) ...
        check_references(read_text(data_text), data_text, read_text(hyp), hyp)
        digest = sums.setdefault(data_text, file_sha256(data_text))
        if digest != score.ref_sha256:   # ... and the file scored
            raise ScoreError(f"{score.path} is the score of other text: it scored the references {score.ref} with "
                             f"SHA-256 {score.ref_sha256[:12]}, but {data_text} (the table's --data_dir) has SHA-256 "
                             f"{digest[:12]}; {RESCORE}")
    if not os.path.isfile(info):
        return
    if score.options is None:
        raise ScoreError(f"{score.path} has no 'Scored with:' line, though {info} lies beside it (written before "
                         f"2026-12-02, or by another tool), so its options and N cannot be checked; {RESCORE}")
    differ = [k for k in expected if score.options.get(k) != expected[k]]
    if differ:
        raise ScoreError(f"{score.path} was scored with {_shown(score.options, differ)}, but stage 5 scores with "
                         f"{_shown(expected, differ)} (scored by hand?): its number does not compare with a run's; "
                         f"{RESCORE} (collect_results.py --case/--punctuation: the recipe's normalisation)")
    if not os.path.isfile(score.ref) or "refs_sha256" not in read_source(info):   # (compute-wer refuses those)
        return
    try:
        check_references(read_text(score.ref), score.ref, read_text(hyp), hyp)
    except (ReferencesError, ValueError) as e:
        raise ScoreError(f"{score.path}: {e}") from None


def read_decode_info(*dirs: Path, sums: Dict[str, str]) -> Dict[str, str]:
    """The first ``decode.info`` found in ``dirs`` (most specific first), its files found where they lie now
    (``source_info.read_record``), else {}."""
    for d in dirs:
        if (d / "decode.info").is_file():
            return read_record(str(d / "decode.info"), sums)
    return {}


def bound_score(mode_dir: Path, sums: Dict[str, str], expected: Mapping[str, str],
                data_dir: Optional[Path] = None) -> Score:
    """The error rate of ``mode_dir/wer``, which must be the score of the ``text`` beside it and of the references
    it names, where they still exist, as stage 5 scores (``expected``: :func:`check_recorded`), and with
    ``data_dir`` of its ``<set>/text``; ScoreError otherwise."""
    if not (mode_dir / "wer").is_file():
        raise ScoreError(f"{mode_dir / 'text'} was decoded but never scored (no wer beside it: stage 5 stopped "
                         f"before scoring?); {RESCORE}")
    score = read_score(str(mode_dir / "wer"))
    data_text = data_dir / mode_dir.parent.name / "text" if data_dir is not None else None
    check_recorded(score, str(mode_dir / "text"), expected,
                   str(data_text) if data_text is not None and data_text.is_file() else None, sums)
    return score


def result_dirs(exp_dir: Path) -> List[Path]:
    """Every ``EXP/<name>/<set>/<mode>`` folder with a ``wer``, or with a decode to score (``text`` and the
    ``decode.info`` that recognize and sherpa_decode write beside it)."""
    dirs = {p.parent for p in exp_dir.glob("*/*/*/wer")}
    dirs |= {p.parent for p in exp_dir.glob("*/*/*/text") if (p.parent / "decode.info").is_file()}
    return sorted(dirs)
