"""What the Python API takes: its keywords (a misspelt one named with the method and a did-you-mean) and the kinds
of ``audio`` (a path, the bytes of an audio file, an array with its rate, a list of these), each told apart here
once, so that anything else is refused naming what was given and what is taken.

The dtype, channel and scaling policy of a numeric array is the audio loader's (``wenet_udps.decode.api.wav_bytes``);
here an array is only told apart from what is not audio (strings, objects).
"""
import difflib
import numbers
import os
from typing import Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from wenet_udps.utils.cli import UserError

TAKES = ("a path (str or os.PathLike), the bytes of an audio file, an (array, sample_rate) pair or an array with "
         "sample_rate=, or a list of these")


class InputError(UserError):
    """One input the API cannot decode; ``reason`` is what a list decode counts it as (``bad_audio``,
    ``non_finite``: unusable; ``no_frames``: too short for the encoder, dropped by choice as recognize drops it)."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


def keyword(where: str, name: str, value: Any, kind: str, choices: Sequence[str] = ()) -> Any:
    """``value`` of the keyword ``name`` of ``where()`` when it is of ``kind`` (``path``: str or os.PathLike, given
    as str; ``flag``: True or False; ``int``: an integer; ``choice``: one of ``choices``); else a UserError naming
    the method, the keyword, the value and what it takes (Python's own errors would name an internal call)."""
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    ok = {"path": isinstance(value, (str, os.PathLike)), "flag": isinstance(value, bool),
          "int": number and isinstance(value, numbers.Integral), "fraction": number and 0 <= value <= 1,
          "choice": isinstance(value, str) and value in choices}[kind]
    if not ok:
        takes = {"path": "a path (str or os.PathLike)", "flag": "True or False", "int": "an integer",
                 "fraction": "a number in [0, 1]", "choice": f"one of {', '.join(choices)}"}[kind]
        raise UserError(f"{where}({name}={value!r}): expected {takes}")
    return os.fspath(value) if kind == "path" else value


def check_keywords(where: str, given: Mapping[str, Any], valid: Sequence[str]) -> None:
    """TypeError, as Python's own for ``where()``, for a keyword of ``given`` not in ``valid``, with the closest
    valid one and the list (Python's would name the internal function that received the keywords)."""
    for name in given:
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise TypeError(f"{where}() got an unexpected keyword argument {name!r}{hint} (its keywords: "
                            f"{', '.join(valid)})")


def audio_list(audio: Any) -> Optional[List[Any]]:
    """The inputs of a list of audio inputs; None for one input. A list of numbers is refused: a list holds several
    inputs, so its numbers would each be an input; samples are an array."""
    if not isinstance(audio, list):
        return None
    if audio and all(isinstance(a, numbers.Number) for a in audio):
        raise UserError(f"a list of {len(audio)} numbers is not audio (a list holds several inputs): pass the "
                        f"samples as an array, np.asarray(samples, dtype=np.float32), with sample_rate=")
    return audio


def audio_input(audio: Any, sample_rate: Any) -> Tuple[str, Any, Any]:
    """``("path", str, None)``, ``("bytes", bytes, None)`` or ``("array", ndarray, sample_rate)`` for one input.

    Bytes name a file when a file of that name exists (as ``open`` takes bytes paths), else they are the content of
    an audio file (WAV, FLAC, ... as read from disk or a socket), read by the same reader as a file.
    """
    if isinstance(audio, tuple):
        if len(audio) != 2:
            raise UserError(f"a tuple of {len(audio)} items: a tuple is (samples, sample_rate)")
        if sample_rate is not None:
            raise UserError(f"sample_rate={sample_rate} given twice: in the (samples, sample_rate) pair and as "
                            f"sample_rate=")
        audio, sample_rate = audio
        if isinstance(audio, list):   # samples as a list, as a stream's chunk may be (a pair is one input)
            try:
                audio = np.asarray(audio)
            except ValueError as e:   # (rows of different lengths)
                raise UserError(f"the samples of the (samples, sample_rate) pair are no array: {e}") from None
    if isinstance(audio, (bytes, bytearray, memoryview)):
        data = bytes(audio)
        if b"\0" not in data and len(data) < 4096 and os.path.isfile(os.fsdecode(data)):
            audio = os.fsdecode(data)
        else:
            _no_rate(sample_rate, f"the audio bytes ({len(data)} bytes)")
            return "bytes", data, None
    if isinstance(audio, (str, os.PathLike)):
        _no_rate(sample_rate, f"the file {os.fspath(audio)}")
        return "path", os.fspath(audio), None
    if isinstance(audio, (list, tuple)) or not hasattr(audio, "__array__"):
        raise UserError(f"audio of type {type(audio).__name__}: give {TAKES}")
    array = np.asarray(audio)
    if array.dtype.kind not in "biufc":  # the loader decides which numeric dtypes it takes
        raise UserError(f"an array of dtype {array.dtype} is not audio samples: for files pass their paths (a list "
                        f"of str), for samples a numeric array")
    return "array", array, sample_rate


def _no_rate(sample_rate: Any, what: str) -> None:
    if sample_rate is not None:
        raise UserError(f"sample_rate={sample_rate} is for an array; {what} has its own rate")
