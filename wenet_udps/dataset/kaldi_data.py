"""Kaldi data directories (wav.scp, text, segments) as utterances, for the list/shard/cmvn tools and sherpa_decode;
every file is read by the one reader, ``wenet_udps.utils.kaldi_files``."""
import logging
import math
import os
from typing import Dict, List, Optional, Tuple

from wenet_udps.dataset.audio import segment_problem
from wenet_udps.utils.kaldi_files import ListError, read_table


def read_kaldi_map(path: str, allow_empty_value: bool = False, *, no_pipes: bool = False) -> Dict[str, str]:
    """``key rest-of-line`` per line (wav.scp, text) read by the one reader (``kaldi_files.read_table``: BOM,
    duplicate keys and malformed lines decided there); with ``no_pipes`` a Kaldi pipe command (``... |``) is a
    ListError naming the file and line."""
    table = read_table(path, allow_empty_value=allow_empty_value)
    if no_pipes:
        for key, (value, lineno) in table.items():
            if value.endswith("|"):
                raise ListError(f"{path}:{lineno}: entry {key!r} is a pipe command (not run, by design); convert "
                                f"the audio to files first")
    return {key: value for key, (value, _) in table.items()}


def read_wav_scp(path: str) -> Dict[str, str]:
    """wav.scp of file paths; Kaldi pipe commands (``... |``) are not supported (ListError)."""
    return read_kaldi_map(path, no_pipes=True)


def read_segments(path: str) -> List[Tuple[str, str, float, float]]:
    """Kaldi segments: ``utt_id recording_id start end`` (seconds; end -1 = to the end of the recording).

    A malformed line, non-finite or negative bounds, an end not after its start, or an utterance id given twice is
    a ListError naming the file and line(s). An end past the recording's end is found when the audio is read
    (``audio.load_audio``: cut within ``MAX_SEGMENT_OVERSHOOT``, else skipped and counted as ``bad_audio``).
    """
    out = []
    for utt, (rest, lineno) in read_table(path, what="utt rec start end", fields=4).items():
        rec, start_text, end_text = rest.split()
        try:
            start, end = float(start_text), float(end_text)
        except ValueError:
            start = end = math.nan
        if not (math.isfinite(start) and math.isfinite(end)):  # float() reads "nan" and "inf" too
            raise ListError(f"{path}:{lineno}: expected 'utt rec start end' (finite seconds), got "
                            f"{f'{utt} {rest}'!r}")
        problem = segment_problem(start, end)
        if problem is not None:
            raise ListError(f"{path}:{lineno}: segment {utt!r} {problem}")
        out.append((utt, rec, start, end))
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


EMPTY_TRANSCRIPT = "with an empty transcript"  # the count of read_utterances' left-out utterances that is unusable


def read_utterances(wav_file: str, text_file: str, segments_file: Optional[str] = None,
                    left_out_counts: Optional[Dict[str, int]] = None
                    ) -> List[Tuple[str, str, str, Optional[float], Optional[float]]]:
    """Join a Kaldi data dir into ``(key, wav path, transcript, start, end)`` per utterance.

    With a segments file each segment is an utterance cut from its recording (start/end in seconds); without one,
    every wav.scp entry is an utterance (start/end None). Utterances without audio, without text or with an empty
    transcript are left out; one warning gives the count of each, with an example key (and ``left_out_counts``,
    when given, is filled with them: ``{"without text": n, ...}``). A key only one of the files has is left out
    by choice; an empty or blank transcript (:data:`EMPTY_TRANSCRIPT`) is unusable data, as training counts it
    (``train.targets``): the list tools refuse a list with more of them than the bad-fraction limit.
    """
    wavs = read_wav_scp(wav_file)
    texts = read_kaldi_map(text_file, allow_empty_value=True)
    if segments_file:
        pairs = [(utt, rec, start, end) for utt, rec, start, end in read_segments(segments_file)]
    else:
        pairs = [(key, key, None, None) for key in wavs]
    left_out: Dict[str, List[str]] = {"without text": [], EMPTY_TRANSCRIPT: [], "without audio": []}
    entries = []
    for utt, rec, start, end in pairs:
        if rec not in wavs:
            left_out["without audio"].append(utt)
        elif utt not in texts:
            left_out["without text"].append(utt)
        elif not texts[utt].strip():
            left_out[EMPTY_TRANSCRIPT].append(utt)
        else:
            entries.append((utt, wavs[rec], texts[utt], start, end))
    listed = {utt for utt, _, _, _ in pairs}
    left_out["without audio"] += [utt for utt in texts if utt not in listed]
    if left_out_counts is not None:
        left_out_counts.update({what: len(keys) for what, keys in left_out.items() if keys})
    report = [f"{len(keys)} {what} (e.g. {keys[0]})" for what, keys in left_out.items() if keys]
    if report:
        logging.warning("%s + %s: %d utterances kept; left out: %s", wav_file, text_file, len(entries),
                        "; ".join(report))
    return entries
