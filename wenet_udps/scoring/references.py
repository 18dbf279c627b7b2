"""What is scored is what was decoded: the references a hypothesis file was decoded with, recorded and checked.

The decoders record in each result's ``decode.info`` (``wenet_udps.utils.source_info``) the list they decoded and
its references, as :func:`reference_record` makes them:

- ``test_data``, ``test_data_sha256``: the list (recognize's data.list or shard list, sherpa_decode's wav.scp) by
  absolute path and SHA-256;
- ``refs_sha256``: the SHA-256 of the decoded utterances' transcripts (recognize: as the list carries them;
  sherpa_decode: the ``text`` beside its wav.scp), one sorted ``key words`` line each, white space collapsed;
- ``refs_decoded``, ``refs_skipped``: the utterances decoded, and those of the list that were not (bad audio, too
  short for the encoder: counted as deletions when scored).

Every scorer reads hypotheses through :func:`read_hypotheses` (compute-wer.py, and with ``--data_dir`` the
significance, speaker and site-ablation sections of collect_results and the LOSO report), or checks a decode made in
the same process with :func:`check_record` (average_model's greedy soup with ``--ref_text``): references other than
those (another set, another data dir, an edited text) are a ``UserError`` naming both files. A hypothesis file
without a ``decode.info`` (another toolkit's) is scored unchecked; one whose ``decode.info`` records no references
(decoded before they were recorded) is refused with the command that decodes it again.
"""
import hashlib
import os
from typing import Dict, Iterable, Mapping, Tuple

from wenet_udps.scoring.tokens import read_text
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.source_info import file_sha256, read_source

class ReferencesError(UserError):
    """Hypotheses scored against references other than those they were decoded with."""


REDECODE = ("decode it again: run.sh --stage 5 --stop_stage 5 (or 7 for sherpa-onnx results), or "
            "python -m wenet_udps.bin.recognize")


def refs_digest(pairs: Iterable[Tuple[str, str]]) -> str:
    """SHA-256 of ``(key, transcript)`` pairs: sorted ``key words`` lines, white space inside a transcript
    collapsed (a data.list and the text it was made from then agree)."""
    digest = hashlib.sha256()
    for key, text in sorted(pairs):
        digest.update(f"{key} {' '.join(text.split())}\n".encode("utf-8"))
    return digest.hexdigest()


def reference_record(test_data: str, refs: Mapping[str, str], skipped: int) -> Dict[str, str]:
    """The ``decode.info`` lines of a decode of ``test_data`` whose decoded utterances have the transcripts
    ``refs`` (key -> transcript), ``skipped`` utterances of the list not decoded."""
    return {"test_data": os.path.abspath(test_data), "test_data_sha256": file_sha256(test_data),
            "refs_sha256": refs_digest(refs.items()), "refs_decoded": str(len(refs)), "refs_skipped": str(skipped)}


def check_references(refs: Mapping[str, str], ref_path: str, hyps: Mapping[str, str], hyp_path: str) -> None:
    """UserError unless ``refs`` (read from ``ref_path``) are the references ``hyp_path`` (``hyps``) was decoded
    with, by the record in the ``decode.info`` beside it; nothing is checked without a ``decode.info``."""
    info = read_source(os.path.join(os.path.dirname(hyp_path), "decode.info"))
    if not info:
        return
    if "refs_sha256" not in info:
        raise ReferencesError(f"{hyp_path}: its decode.info records no references, so {ref_path} cannot be "
                              f"checked against what was decoded (decoded by an older version, or by sherpa_decode of "
                              f"a wav.scp without a text beside it); {REDECODE}")
    check_record(refs, ref_path, hyps, info, hyp_path)


def check_record(refs: Mapping[str, str], ref_path: str, hyps: Mapping[str, str], record: Mapping[str, str],
                 hyp_path: str) -> None:
    """ReferencesError unless ``refs`` are those of ``record`` (:func:`reference_record`), the decode that gave
    ``hyps`` (named ``hyp_path``)."""
    where = f"{ref_path} are not the references of {record.get('test_data', '?')}, which {hyp_path} was decoded from"
    if len(hyps) != int(record.get("refs_decoded", len(hyps))):
        raise ReferencesError(f"{hyp_path} holds {len(hyps)} hypotheses, but {record['refs_decoded']} utterances were "
                              f"decoded (its decode.info): the file was changed since; {REDECODE}")
    missing = [k for k in hyps if k not in refs]
    if missing:
        raise ReferencesError(f"{where}: {len(missing)} of its {len(hyps)} decoded utterances have no reference there "
                              f"(the first: {missing[0]}); score against the text of that list's data dir")
    here = refs_digest((k, refs[k]) for k in hyps)
    if here != record["refs_sha256"]:
        raise ReferencesError(f"{where}: the transcripts of the {len(hyps)} decoded utterances differ (SHA-256 "
                              f"{record['refs_sha256'][:12]} when decoded, {here[:12]} here); score against the text "
                              f"of that list's data dir")
    extra = [k for k, text in refs.items() if k not in hyps and text.strip()]
    skipped = int(record.get("refs_skipped", 0))
    if len(extra) > skipped:
        raise ReferencesError(f"{where}: it has {len(extra)} utterances that were not decoded (the first: {extra[0]}), "
                              f"and the decode skipped only {skipped}; they would be scored as deletions")


def read_hypotheses(hyp_path: str, refs: Mapping[str, str], ref_path: str) -> Dict[str, str]:
    """``hyp_path`` read as ``read_text`` reads it, after :func:`check_references` against ``refs``."""
    hyps = read_text(hyp_path)
    check_references(refs, ref_path, hyps, hyp_path)
    return hyps
