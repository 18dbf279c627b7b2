"""Readers for Kaldi data-directory files (wav.scp, text, segments) shared by the list/shard/cmvn tools."""
import logging
import math
import os
from typing import Dict, List, Optional, Tuple

from wenet_udps.dataset.lists import ListError, utf8_lines


def read_kaldi_map(path: str, allow_empty_value: bool = False, *, no_pipes: bool = False) -> Dict[str, str]:
    """``key rest-of-line`` per line (wav.scp, text); a malformed or duplicate line, or with ``no_pipes`` a Kaldi
    pipe command (``... |``), is a ListError naming the file and line."""
    out: Dict[str, str] = {}
    for lineno, line in utf8_lines(path):
        line = line.strip()
        if not line:
            continue
        parts = line.split(maxsplit=1)
        if len(parts) < 2 and not allow_empty_value:
            raise ListError(f"{path}:{lineno}: expected '<key> <value>', got {line!r}")
        if parts[0] in out:
            raise ListError(f"{path}:{lineno}: duplicate key {parts[0]!r}")
        if no_pipes and parts[1].endswith("|"):
            raise ListError(f"{path}:{lineno}: entry {parts[0]!r} is a pipe command (not run, by design); convert "
                            f"the audio to files first")
        out[parts[0]] = parts[1] if len(parts) > 1 else ""
    return out


def read_wav_scp(path: str) -> Dict[str, str]:
    """wav.scp of file paths; Kaldi pipe commands (``... |``) are not supported (ListError)."""
    return read_kaldi_map(path, no_pipes=True)


def read_segments(path: str) -> List[Tuple[str, str, float, float]]:
    """Kaldi segments: ``utt_id recording_id start end`` (seconds; end -1 = to the end of the recording)."""
    out = []
    for lineno, line in utf8_lines(path):
        parts = line.split()
        if not parts:
            continue
        try:
            if len(parts) != 4:
                raise ValueError
            start, end = float(parts[2]), float(parts[3])
            if not (math.isfinite(start) and math.isfinite(end)):  # float() reads "nan" and "inf" too
                raise ValueError
            out.append((parts[0], parts[1], start, end))
        except ValueError:
            raise ListError(f"{path}:{lineno}: expected 'utt rec start end' (finite seconds), got "
                            f"{line.strip()!r}") from None
    return out


def scp_utterances(wav_scp: str) -> List[Tuple[str, str, Optional[float], Optional[float]]]:
    """``(key, audio path, start, end)`` of the utterances of a wav.scp: with a ``segments`` file beside it (Kaldi's
    layout: wav.scp then lists recordings), its segments cut from the recordings (end -1: to the recording's end),
    as stage 3 cuts them for training and decoding; otherwise every entry whole (start and end None)."""
    wavs = read_wav_scp(wav_scp)
    segments = os.path.join(os.path.dirname(wav_scp), "segments")
    if not os.path.isfile(segments):
        return [(key, path, None, None) for key, path in wavs.items()]
    cut = read_segments(segments)
    missing = [utt for utt, rec, _, _ in cut if rec not in wavs]
    if missing:
        raise ListError(f"{segments}: {len(missing)} segments name a recording missing from {wav_scp} (e.g. "
                        f"{missing[0]})")
    logging.info("%s: cutting %d segments from the %d recordings of %s", segments, len(cut), len(wavs), wav_scp)
    return [(utt, wavs[rec], start, end) for utt, rec, start, end in cut]


def read_utterances(wav_file: str, text_file: str,
                    segments_file: Optional[str] = None) -> List[Tuple[str, str, str, Optional[float], Optional[float]]]:
    """Join a Kaldi data dir into ``(key, wav path, transcript, start, end)`` per utterance.

    With a segments file each segment is an utterance cut from its recording (start/end in seconds); without one,
    every wav.scp entry is an utterance (start/end None). Utterances without audio, without text or with an empty
    transcript are left out; one warning gives the count of each, with an example key.
    """
    wavs = read_wav_scp(wav_file)
    texts = read_kaldi_map(text_file, allow_empty_value=True)
    if segments_file:
        pairs = [(utt, rec, start, end) for utt, rec, start, end in read_segments(segments_file)]
    else:
        pairs = [(key, key, None, None) for key in wavs]
    left_out: Dict[str, List[str]] = {"without text": [], "with an empty transcript": [], "without audio": []}
    entries = []
    for utt, rec, start, end in pairs:
        if rec not in wavs:
            left_out["without audio"].append(utt)
        elif utt not in texts:
            left_out["without text"].append(utt)
        elif not texts[utt].strip():
            left_out["with an empty transcript"].append(utt)
        else:
            entries.append((utt, wavs[rec], texts[utt], start, end))
    listed = {utt for utt, _, _, _ in pairs}
    left_out["without audio"] += [utt for utt in texts if utt not in listed]
    report = [f"{len(keys)} {what} (e.g. {keys[0]})" for what, keys in left_out.items() if keys]
    if report:
        logging.warning("%s + %s: %d utterances kept; left out: %s", wav_file, text_file, len(entries),
                        "; ".join(report))
    return entries
