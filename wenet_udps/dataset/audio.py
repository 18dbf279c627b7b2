"""Audio reading (soundfile), resampling and speed perturbation (soxr).

Waveforms are 1-D float32 numpy arrays. ``load_audio`` returns them scaled to the int16 range (``* 2**15``) as WeNet
feeds Kaldi fbank, so dither and energy floors behave like Kaldi's.
"""
import io
import os
import struct
from typing import BinaryIO, Optional, Tuple, Union

import numpy as np
import soundfile as sf
import soxr

INT16_SCALE = float(1 << 15)
# Below any real recording's rate; a header claiming less is corrupt.
MIN_SAMPLE_RATE = 1000
# File name extensions of the formats load_audio reads (those of soundfile's libsndfile here): the one set of
# audio formats. The shard reader takes a member as audio by its extension, and make_shard_list repacks any other
# file as WAV, so a file the raw path decodes is never packed under a name the shard path does not read.
_FORMAT_EXTENSIONS = {"WAV": ("wav", "wave"), "WAVEX": ("wav",), "RF64": ("rf64",), "W64": ("w64",),
                      "FLAC": ("flac",), "OGG": ("ogg", "oga", "opus"), "MP3": ("mp3",), "NIST": ("sph", "nist"),
                      "AIFF": ("aiff", "aif", "aifc"), "AU": ("au", "snd"), "CAF": ("caf",)}
AUDIO_EXTENSIONS = frozenset(ext for fmt, exts in _FORMAT_EXTENSIONS.items() if fmt in sf.available_formats()
                             for ext in exts)
# How far a segment's end may lie past the end of its recording and be cut there (Kaldi's extract-segments
# --max-overshoot default); further, the segments file is wrong for this audio and the utterance is bad_audio.
MAX_SEGMENT_OVERSHOOT = 0.5


class UnusableUtterance(Exception):
    """An utterance the data pipeline skips and counts under ``reason`` (a ``dataset.COUNT_KEYS`` key), with a
    warning giving the message."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


class BadAudioError(UnusableUtterance):
    """An audio file that cannot be used: missing, unreadable, truncated, empty (``reason`` "bad_audio") or with
    NaN/Inf samples (``reason`` "non_finite")."""

    def __init__(self, message: str, reason: str = "bad_audio"):
        super().__init__(message, reason)


class TooLong(UnusableUtterance):
    """Audio longer than the caller's ``max_seconds``, found from the header before its samples are read."""

    def __init__(self, message: str):
        super().__init__(message, "max_length")


def _riff_data_shortfall(f: BinaryIO, total_size: int) -> int:
    """Bytes missing from a RIFF/WAVE ``data`` chunk (0 if complete or not a plain WAV file).

    libsndfile silently shortens a WAV whose data chunk was cut off, so truncation is detected here from the
    header's declared chunk size versus the bytes actually present. The chunk list is walked with seeks, so
    metadata chunks of any size before ``data`` are skipped, not read.
    """
    head = f.read(12)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return 0
    pos = 12
    while pos + 8 <= total_size:
        f.seek(pos)
        chunk = f.read(8)
        if len(chunk) < 8:
            return 0
        (size,) = struct.unpack("<I", chunk[4:8])
        if chunk[:4] == b"data":
            if size in (0, 0xFFFFFFFF):  # streamed WAV: size unknown, nothing to compare
                return 0
            return max(0, pos + 8 + size - total_size)
        pos += 8 + size + (size & 1)
    return 0


def load_audio(source: Union[str, bytes], start: Optional[float] = None, end: Optional[float] = None,
               name: str = "", max_seconds: Optional[float] = None) -> Tuple[np.ndarray, int]:
    """Read audio as a mono float32 waveform in the int16 range.

    Args:
        source: a file path or the file's bytes (a shard member).
        start, end: optional segment bounds in seconds; only those frames are read (end -1: to the end). An end
            past the recording's end by more than ``MAX_SEGMENT_OVERSHOOT`` is BadAudioError; a smaller overshoot
            is cut at the end.
        name: used in error messages (e.g. the utterance key).
        max_seconds: raise TooLong, before reading any sample, for a longer (segment of the) file: the length
            filter's decision costs no memory (a 1.5 GB WAV would take 3 GB as float32).
    Returns:
        (waveform (N,), sample_rate). Multi-channel audio keeps channel 0 (Kaldi's default channel).
    Raises:
        BadAudioError for missing, unreadable, truncated, empty or non-finite audio.
    """
    label = f"{name} ({source if isinstance(source, str) else 'shard member'})"
    try:
        if isinstance(source, str):
            if os.path.exists(source) and not os.path.isfile(source):  # a FIFO or device would block the reader
                raise BadAudioError(f"cannot read audio {label}: not a regular file")
            size = os.path.getsize(source)
            with open(source, "rb") as f:
                shortfall = _riff_data_shortfall(f, size)
            handle = sf.SoundFile(source)
        else:
            size = len(source)
            shortfall = _riff_data_shortfall(io.BytesIO(source), size)
            handle = sf.SoundFile(io.BytesIO(source))
    except (OSError, RuntimeError, sf.SoundFileError) as e:
        raise BadAudioError(f"cannot read audio {label}: {e}") from None
    if shortfall > 0:
        handle.close()
        raise BadAudioError(f"truncated audio {label}: data chunk is shorter than its header says")
    with handle:
        sr, total = handle.samplerate, handle.frames
        if sr < MIN_SAMPLE_RATE:  # a broken header: resampling its "hours" of audio would exhaust memory
            raise BadAudioError(f"implausible sample rate {sr} Hz in {label} (< {MIN_SAMPLE_RATE})")
        first = 0 if start is None else int(round(start * sr))
        if end is not None and end >= 0 and end - total / sr > MAX_SEGMENT_OVERSHOOT:
            raise BadAudioError(f"segment of {label} ends at {end:g} s, past the recording's end ({total / sr:.3f} s) "
                                f"by more than {MAX_SEGMENT_OVERSHOOT:g} s: the segments file is not of this audio")
        last = total if end is None or end < 0 else min(total, int(round(end * sr)))
        if first >= last:
            raise BadAudioError(f"empty audio {label}: no samples in [{first}, {last}) of {total} frames")
        if max_seconds is not None and (last - first) / sr > max_seconds:
            raise TooLong(f"audio {label} lasts {(last - first) / sr:.1f} s, more than {max_seconds:g} s")
        try:
            handle.seek(first)
            data = handle.read(last - first, dtype="float32", always_2d=True)
        except (RuntimeError, sf.SoundFileError) as e:
            raise BadAudioError(f"cannot decode audio {label}: {e}") from None
    if data.shape[0] < last - first:
        raise BadAudioError(f"truncated audio {label}: read {data.shape[0]} of {last - first} frames")
    wav = np.ascontiguousarray(data[:, 0])
    if not np.isfinite(wav).all():
        # One NaN sample makes the features, the loss and (through BatchNorm statistics) the model NaN.
        raise BadAudioError(f"non-finite audio {label}: {int((~np.isfinite(wav)).sum())} NaN/Inf samples",
                            reason="non_finite")
    wav *= INT16_SCALE
    return wav, sr


def resample(wav: np.ndarray, sr: int, target_sr: int) -> np.ndarray:
    """Resample (N,) from ``sr`` to ``target_sr`` with soxr (no-op when equal)."""
    if sr == target_sr:
        return wav
    return soxr.resample(wav, sr, target_sr).astype(np.float32, copy=False)


def speed_perturb(wav: np.ndarray, sr: int, speed: float) -> np.ndarray:
    """Change speed like sox ``speed``: tempo and pitch scale together, length becomes N / speed.

    The signal is treated as if it had been sampled at ``sr * speed`` and resampled back to ``sr``.
    """
    if speed == 1.0:
        return wav
    return soxr.resample(wav, sr * speed, sr).astype(np.float32, copy=False)


def duration_seconds(wav: np.ndarray, sr: int) -> float:
    """An utterance's duration, the one definition that every RTF and audio total uses (recognize, the API's
    ``decode_list``, sherpa_decode): its samples over their rate, as :func:`load_audio` read them (a segment's
    ``start``/``end`` applied, before any resampling or speed perturbation). The feature frames would undercount it
    by one window less one shift per utterance (Kaldi's snip_edges)."""
    return len(wav) / sr
