"""Audio reading (soundfile), resampling and speed perturbation (soxr).

Waveforms are 1-D float32 numpy arrays. ``load_audio`` returns them scaled to the int16 range (``* 2**15``) as WeNet
feeds Kaldi fbank, so dither and energy floors behave like Kaldi's.

The one audio reader: every path that reads audio (raw lists, shards, training, recognize, the CMVN tool,
make_shard_list, sherpa_decode, the Python API's files and arrays, streaming) goes through ``read_frames`` /
``load_audio``, which refuse audio that is not known to be whole (less data than its header declares, a format
whose length is not checked or a header declaring none: ``audio_length``), and apply one channel policy
(``load_audio``); arrays are first held to one dtype policy (``array_frames``) and then read as a file.
"""
import io
import os
from typing import Any, Optional, Tuple, Union

import numpy as np
import soundfile as sf
import soxr

from wenet_udps.dataset.audio_length import FORMATS, cut_before_open, length_problem
from wenet_udps.utils.cli import NotRegularFileError, UserError, open_input
from wenet_udps.utils.schema import RATE_MAX, RATE_WHY

INT16_SCALE = float(1 << 15)
# Below any real recording's rate; a header claiming less is corrupt.
MIN_SAMPLE_RATE = 1000
# File name extensions of the formats read (``audio_length.FORMATS``, those of this libsndfile): the one set of audio
# formats. The shard reader takes a member as audio by its extension, and make_shard_list repacks any other file as
# WAV, so a file the raw path decodes is never packed under a name the shard path does not read.
AUDIO_EXTENSIONS = frozenset(ext for fmt, known in FORMATS.items() if fmt in sf.available_formats()
                             for ext in known.extensions)
# The dtypes an array (the Python API, streaming) may have, and the divisor that brings each to full scale [-1, 1]
# as soundfile reads the same samples from a file (see ``array_frames``).
ARRAY_SCALES = {np.dtype(np.float32): 1.0, np.dtype(np.float64): 1.0, np.dtype(np.int16): 2.0 ** 15,
                np.dtype(np.int32): 2.0 ** 31}
# A float array is full scale; a peak above twice that is not such audio (int16 values as floats peak near 32767,
# and would be read 32768 times too loud). Up to it, a float signal may overshoot 1 (as after filtering).
MAX_FLOAT_PEAK = 2.0
# How far a segment's end may lie past the end of its recording and be cut there (Kaldi's extract-segments
# --max-overshoot default); further, the segments file is wrong for this audio and the utterance is bad_audio.
MAX_SEGMENT_OVERSHOOT = 0.5
# ``dataset_conf.channel``'s value that reads multi-channel audio as the mean of its channels (else: a channel index).
CHANNEL_MEAN = "mean"


class UnusableUtterance(Exception):
    """An utterance the data pipeline skips and counts under ``reason`` (a ``dataset.COUNT_KEYS`` key), with a
    warning giving the message."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


class BadAudioError(UnusableUtterance):
    """An audio file that cannot be used: missing, unreadable, truncated, empty, of several channels none of which
    is chosen (``reason`` "bad_audio") or with NaN/Inf samples (``reason`` "non_finite")."""

    def __init__(self, message: str, reason: str = "bad_audio"):
        super().__init__(message, reason)


class TooLong(UnusableUtterance):
    """Audio longer than the caller's ``max_seconds``, found from the header before its samples are read."""

    def __init__(self, message: str):
        super().__init__(message, "max_length")


def _label(source: Union[str, bytes], name: str, where: Optional[str]) -> str:
    return f"{name} ({source if isinstance(source, str) else where or 'in memory'})"


def segment_problem(start: Optional[float], end: Optional[float]) -> Optional[str]:
    """Why ``start``/``end`` (seconds; None: unset) bound no segment, or None. The one rule of segment bounds, for
    Kaldi segments files, data.list lines and the reader itself: a start >= 0, an end after it or -1 (Kaldi's "to
    the recording's end")."""
    first = 0.0 if start is None else start
    if first >= 0 and (end is None or end == -1 or end > first):
        return None
    return (f"from {first:g} s to {'the end' if end is None else f'{end:g} s'}: the start must be >= 0 and the end "
            f"after it (or -1, the recording's end)")


def read_frames(source: Union[str, bytes], start: Optional[float] = None, end: Optional[float] = None,
                name: str = "", max_seconds: Optional[float] = None,
                where: Optional[str] = None) -> Tuple[np.ndarray, int]:
    """Read every channel of whole audio as float32 frames in the int16 range; :func:`load_audio` with the
    channel not yet chosen (``make_shard_list`` packs all channels, and the reader of the shard chooses).

    Args:
        source: a file path or the file's bytes (a shard member, an API array).
        start, end: optional segment bounds in seconds (:func:`segment_problem`); only those frames are read
            (end -1: to the end). An end past the recording's end by more than ``MAX_SEGMENT_OVERSHOOT`` is
            BadAudioError; a smaller overshoot is cut at the end.
        name: used in error messages (e.g. the utterance key); ``where`` says where bytes came from (default
            "in memory"; a path names itself).
        max_seconds: raise TooLong, before reading any sample, for a longer (segment of the) file: the length
            filter's decision costs no memory (a 1.5 GB WAV would take 3 GB as float32).
    Returns:
        (frames (N, C), sample_rate).
    Raises:
        BadAudioError for missing, unreadable, cut (less data than its header declares) or unchecked (a format
        not read, a header declaring no length: ``audio_length``), empty or non-finite audio.
    """
    label = _label(source, name, where)
    problem = segment_problem(start, end)
    if problem is not None:
        raise BadAudioError(f"no segment of {label} {problem}")
    try:  # a FIFO or device would block (cli.regular_file: the one check of every reader)
        with (open_input(source, "rb") if isinstance(source, str) else io.BytesIO(source)) as f:
            size = os.fstat(f.fileno()).st_size if isinstance(source, str) else len(source)
            try:
                handle = sf.SoundFile(source if isinstance(source, str) else io.BytesIO(source))
            except (RuntimeError, TypeError, sf.SoundFileError) as e:  # TypeError: a .raw file (no header)
                cut = cut_before_open(f, size)  # a cut header libsndfile refuses: say "truncated"
                raise BadAudioError(f"truncated audio {label}: {cut.detail}" if cut
                                    else f"cannot read audio {label}: {e}") from None
            length = length_problem(f, size, handle.format, handle.format_info)
    except NotRegularFileError as e:
        raise BadAudioError(f"cannot read audio {label}: not a regular file ({e})") from None
    except OSError as e:
        raise BadAudioError(f"cannot read audio {label}: {e}") from None
    if length is not None:  # whole, or refused: a length that cannot be checked is refused too
        handle.close()
        raise BadAudioError(f"truncated audio {label}: {length.detail}" if length.cut
                            else f"audio {label} is not read: {length.detail}")
    if handle.subtype.startswith("DWVW"):  # whole and valid, but not one frame can be read (issue 80)
        handle.close()
        raise BadAudioError(f"audio {label} is not read: it is DWVW-encoded ({handle.subtype}), and libsndfile's DWVW "
                            f"decoder fails the seek soundfile makes after every read ('Internal psf_fseek() failed'); "
                            f"convert it to PCM (e.g. sox in.aiff -e signed-integer out.wav)")
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
        try:  # GSM 6.10, G.721/G.723 and DWVW cannot seek (libsndfile: "unseekable"): those are read from the
            # start, the frames before a segment read and dropped a block at a time (issue 80)
            if not first:
                pass   # at the start already (a seek to 0 fails on DWVW although it reports itself seekable)
            elif handle.seekable():
                handle.seek(first)
            else:
                for skipped in range(0, first, 1 << 16):
                    handle.read(min(1 << 16, first - skipped), dtype="float32")
            data = handle.read(last - first, dtype="float32", always_2d=True)
        except (RuntimeError, sf.SoundFileError) as e:
            raise BadAudioError(f"cannot decode audio {label}: {e}") from None
    if data.shape[0] < last - first:
        raise BadAudioError(f"truncated audio {label}: read {data.shape[0]} of {last - first} frames")
    if not np.isfinite(data).all():
        # One NaN sample makes the features, the loss and (through BatchNorm statistics) the model NaN.
        raise BadAudioError(f"non-finite audio {label}: {int((~np.isfinite(data)).sum())} NaN/Inf samples",
                            reason="non_finite")
    data *= INT16_SCALE
    return data, sr


def load_audio(source: Union[str, bytes], start: Optional[float] = None, end: Optional[float] = None,
               name: str = "", max_seconds: Optional[float] = None, channel: Union[int, str, None] = None,
               where: Optional[str] = None) -> Tuple[np.ndarray, int]:
    """Read audio as a mono float32 waveform in the int16 range: :func:`read_frames`, then the channel policy.

    The channel policy (``channel``: ``dataset_conf.channel``), one for every file of a list, so that a list
    mixing mono and multi-channel recordings is read whole: mono audio is read as it is, whatever ``channel``
    says; audio of several channels is read at channel ``channel`` (an int), or as the mean of its channels
    (``"mean"``), and is BadAudioError when ``channel`` is unset (never a silent channel 0: with the speech on
    another channel that trains and scores the wrong signal) or names a channel the audio lacks.

    Returns:
        (waveform (N,), sample_rate).
    """
    frames, sr = read_frames(source, start, end, name, max_seconds, where)
    channels = frames.shape[1]
    if channels == 1:
        return np.ascontiguousarray(frames[:, 0]), sr
    label = _label(source, name, where)
    if channel is None:
        raise BadAudioError(f"audio {label} has {channels} channels: set dataset_conf.channel to the one to read "
                            f"(0 to {channels - 1}) or to {CHANNEL_MEAN}; multi-channel audio is never reduced to "
                            f"one silently")
    if channel == CHANNEL_MEAN:
        return frames.mean(axis=1, dtype=np.float32), sr
    if channel >= channels:
        raise BadAudioError(f"audio {label} has {channels} channels, no channel {channel} (dataset_conf.channel)")
    return np.ascontiguousarray(frames[:, channel]), sr


def array_frames(samples: Any, what: str = "the array") -> np.ndarray:
    """An array's samples as float32 frames (N, C) in full scale, by the one dtype policy of arrays (the Python
    API, streaming): float32 / float64 samples are full scale [-1, 1] (``soundfile.read``'s), int16 and int32 are
    scaled by 2**15 and 2**31 as soundfile reads a 16- or 32-bit file; 1-D is mono, 2-D is (samples, channels) as
    soundfile gives it (the channel policy is then the file's: :func:`load_audio`).

    Raises:
        UserError (one line naming ``what`` and the dtype, shape or samples) for any other dtype (uint8, int8,
        int64, bool, complex, float16, strings: their scale is not known or not audio), another shape, NaN/Inf
        samples, or a float array whose peak exceeds ``MAX_FLOAT_PEAK`` (int16 values given as floats).
    """
    wav = np.asarray(samples)
    if wav.dtype not in ARRAY_SCALES:
        raise UserError(f"{what} has dtype {wav.dtype}; arrays are {', '.join(map(str, ARRAY_SCALES))} "
                        f"(floats in [-1, 1], integers at their full scale)")
    if wav.ndim == 2 and wav.shape[1] > wav.shape[0]:
        raise UserError(f"{what} has shape {wav.shape}: a 2-D array is (samples, channels); pass its transpose")
    if wav.ndim not in (1, 2):
        raise UserError(f"{what} has shape {wav.shape}: 1-D samples, or 2-D (samples, channels)")
    if wav.dtype.kind == "f":
        bad = int((~np.isfinite(wav)).sum())
        if bad:
            raise UserError(f"{what} has {bad} NaN/Inf samples")
        peak = float(np.abs(wav).max()) if wav.size else 0.0
        if peak > MAX_FLOAT_PEAK:
            raise UserError(f"{what} is {wav.dtype} with a peak of {peak:g}: float samples are full scale [-1, 1] "
                            f"(int16 values as floats? divide by 32768, or pass the int16 array)")
    frames = wav.astype(np.float64) / ARRAY_SCALES[wav.dtype] if wav.dtype.kind == "i" else wav
    return np.asarray(frames, dtype=np.float32).reshape(wav.shape[0], wav.shape[1] if wav.ndim == 2 else 1)


def array_wav_bytes(samples: Any, sample_rate: Any, what: str = "the array") -> bytes:
    """An array (:func:`array_frames`) as a float WAV in memory, which :func:`load_audio` then reads (rate,
    channel policy, length) as any file. UserError for an empty array or a sample rate that is not a positive
    integer, or above the ceiling of every rate (``schema.RATE_MAX``; a WAV header holds 32 bits)."""
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, np.integer)) or sample_rate <= 0:
        raise UserError(f"an array needs its sample rate as a positive integer (Hz), got {sample_rate!r}")
    if sample_rate > RATE_MAX:
        raise UserError(f"an array's sample rate must be <= {RATE_MAX} Hz, got {sample_rate} ({RATE_WHY})")
    frames = array_frames(samples, what)
    if frames.size == 0:
        raise UserError(f"{what} is empty (shape {np.shape(samples)})")
    buf = io.BytesIO()
    sf.write(buf, frames, int(sample_rate), format="WAV", subtype="FLOAT")
    return buf.getvalue()


def resample(wav: np.ndarray, sr: int, target_sr: int) -> np.ndarray:
    """Resample (N,) or (N, C) from ``sr`` to ``target_sr`` with soxr (no-op when equal)."""
    if sr == target_sr:
        return wav
    return soxr.resample(wav, sr, target_sr).astype(np.float32, copy=False)


def resample_stream(sr: int, target_sr: int) -> Optional[soxr.ResampleStream]:
    """:func:`resample` of a waveform given piece by piece (a stream), or None when the rates are equal:
    ``.resample_chunk(piece (N,) float32, last)`` returns the samples that are final, and the pieces' outputs
    joined are bitwise :func:`resample`'s of the whole (soxr's one filter, at its default quality in both)."""
    if sr == target_sr:
        return None
    return soxr.ResampleStream(sr, target_sr, 1, dtype="float32")


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
