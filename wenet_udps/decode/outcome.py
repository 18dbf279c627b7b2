"""What a list decode of the Python API returns: one outcome per input, as recognize skips and counts.

``transcribe([a, b, c])`` decodes every input it can. An input that cannot be decoded (a missing, empty, cut or
unreadable file, NaN samples: unusable; too short for the encoder: dropped by choice) gets ``None`` in its place,
one warning naming its position (``audio[1]``), and a :class:`Failure` in ``.failures``; the others keep their
texts. The pass then follows recognize's one rule (``wenet_udps.utils.counts``): nothing decoded, or more unusable
inputs than ``max_bad_fraction`` (the experiment's ``dataset_conf.max_bad_fraction``, default 0.05, unless given),
is a ``DataError`` naming each failure, whose ``.transcripts`` still holds every text decoded.
"""
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence

from wenet_udps.dataset.dataset import BAD_REASONS, DataError
from wenet_udps.decode.inputs import InputError
from wenet_udps.utils.counts import WorkFailed, check_pass, counts_line


@dataclass(frozen=True)
class Failure:
    """An input of a list that gave no text."""
    index: int       # its position in the list: transcripts[index] is None
    input: Any       # the input as given (a path, bytes, an array, a pair)
    reason: str      # as recognize counts it: bad_audio, non_finite (unusable), no_frames (too short)
    message: str     # "audio[1]: /data/b.wav: cannot read audio ..."


class Transcripts(list):
    """The texts of ``transcribe(list)``, one per input in its order (with ``timestamps=True`` the dicts), ``None``
    where an input gave none; ``failures``: a :class:`Failure` per such input; ``counts``: recognize's count line
    (``transcribe of 3 inputs: 2 utterances used, 1 skipped (bad_audio 1)``)."""

    def __init__(self, texts: Sequence[Any], failures: List[Failure], counts: str):
        super().__init__(texts)
        self.failures = failures
        self.counts = counts


def decode_each(items: Sequence[Any], decode: Callable[[Any], Any], max_bad_fraction: float,
                where: str = "transcribe") -> Transcripts:
    """``decode`` of every item (an :class:`InputError` makes it a :class:`Failure`), then recognize's pass rule;
    DataError (with ``.transcripts``) when it fails."""
    texts: List[Optional[Any]] = []
    failures: List[Failure] = []
    for i, item in enumerate(items):
        try:
            texts.append(decode(item))
        except InputError as e:
            failures.append(Failure(i, item, e.reason, f"audio[{i}]: {e}"))
            logging.warning("%s: skipping %s", where, failures[-1].message)
            texts.append(None)
    skipped = Counter(f.reason for f in failures)
    line = f"{where} of {len(items)} inputs: {counts_line(len(items) - len(failures), skipped)}"
    outcome = Transcripts(texts, failures, line)
    try:
        check_pass(line, used=len(items) - len(failures), total=len(items),
                   unusable=sum(n for reason, n in skipped.items() if reason in BAD_REASONS),
                   max_bad_fraction=max_bad_fraction, setting="max_bad_fraction")
    except WorkFailed as e:
        shown = "; ".join(f.message for f in failures[:3]) + ("; ..." if len(failures) > 3 else "")
        error = DataError(f"{e} ({shown}); the texts of the others are in this error's .transcripts" if failures
                          else str(e))
        error.transcripts = outcome
        raise error from None
    return outcome
