"""The one definition of a ``decode.info``'s keys: what its writers always write and what its readers require.

recognize (``decode.data_list.write_results``) and sherpa_decode write every key of :data:`ALWAYS`; an ``*_lm``
mode's record also names its LM (:data:`LM_KEYS`). A record is either *legacy* (written before ``mode`` and
``text_sha256`` existed: it holds none of :data:`MARKERS`, the keys only the current writers write; its text and
mode are checked as far as it allows) or *current*, which must hold every key its mode needs and agree with itself
(its ``mode`` among its ``modes`` where it lists them). A record that is neither (a line deleted, a mode edited:
issue 80 round 8) is refused by :func:`record_problem`, naming the file and the key; both writers check what they
wrote with it, so the set written and the set required cannot drift apart.
"""
from typing import Mapping, Optional, Tuple

# The LM modes are the modes named *_lm (scoring may not import the registry, transformer.modes: the layering;
# tests/scoring/test_record.py holds the two to the same set).
LM_SUFFIX = "_lm"

# Written by every current writer: the model (source_info.model_source, or the export.info sherpa copies), the
# folder's own mode (results.origin) and the SHA-256 of the text decoded (scoring.bound).
ALWAYS = ("checkpoint", "sha256", "config", "mode", "text_sha256")
# An LM mode's LM identity (lm.arpa's LmInfo.source): without it an *_lm column could hold a decode without an LM.
LM_KEYS = ("lm", "lm_sha256")
# Keys no writer before 2026-12-02 wrote: a record holding one of them is current and must hold all it needs.
MARKERS = ("mode", "text_sha256", "refs_sha256")


def is_legacy(info: Mapping[str, str]) -> bool:
    """Whether ``info`` is a record of an older writer (none of :data:`MARKERS`)."""
    return not any(key in info for key in MARKERS)


def required_keys(mode: Optional[str]) -> Tuple[str, ...]:
    """The keys a current record of ``mode`` must hold."""
    return ALWAYS + (LM_KEYS if mode and mode.endswith(LM_SUFFIX) else ())


def record_problem(info: Mapping[str, str], where: str) -> Optional[str]:
    """Why ``info`` (the ``decode.info`` at ``where``) is neither a legacy nor a whole current record, or None."""
    if is_legacy(info):
        return None
    mode = info.get("mode")
    missing = [key for key in required_keys(mode) if not info.get(key)]
    if missing:
        return (f"{where} lacks {', '.join(missing)}, which every {mode or 'current'} decode.info holds (it "
                f"holds {', '.join(k for k in MARKERS if k in info)}, so it is no legacy record: a line deleted or "
                f"edited?)")
    if info.get("modes") and mode not in info["modes"].split():
        return (f"{where} records mode {mode}, which is not among its modes ({info['modes']}): edited, or copied "
                f"from another mode's folder?")
    return None


def check_written(info: Mapping[str, str], where: str) -> None:
    """For a writer, before it writes ``info`` to ``where``: RuntimeError (a bug of the writer, not of its input)
    when the readers would refuse it."""
    problem = record_problem(info, where)
    if problem:
        raise RuntimeError(f"decode.info writer: {problem}")
