"""Pieces shared by the corpus builders: noise, level, Kaldi data dirs, and the one check of a corpus' size.

``python -m wenet_udps.corpora.common DIR`` checks a prepared Kaldi dir for the recipes' prepare.sh (prints its
number of utterances); with ``--part CORPUS:PART`` it also holds the dir to that part's published size.

A copy of a corpus with a published size (``PUBLISHED``: AN4, LibriSpeech and mini LibriSpeech parts, AISHELL-1,
FSDD's speakers) is whole or refused, whether stage -1 downloaded it or it was there already: a part with another
number of utterances (with audio and a transcript) stops stage 0 (:func:`check_counts`), unless the user asks for
the copy as it is with ``--allow_partial true`` (run.sh ``--prepare_opts "--allow_partial true"``). Then every set
made from it gets a ``partial_corpus`` file naming the parts and counts (:func:`mark_partial`), and
tools/collect_results.py says so in RESULTS.md, marking the published results as not comparable.
"""
import argparse
import os
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from wenet_udps.utils import cli
from wenet_udps.utils.atomic import write_text
from wenet_udps.utils.kaldi_files import read_table

NOISE_KINDS = ("white", "pink")
SHOWN = 3  # problem examples a stage-0 warning names per reason
# Utterances with audio and a transcript in each part of a corpus as published; a copy with another number is
# partial (or another release). LibriSpeech's parts include mini LibriSpeech's (OpenSLR 31); FSDD counts per
# speaker (10 digits x 50 recordings; its releases differ in speakers, not in a speaker's recordings).
PUBLISHED: Dict[str, Dict[str, int]] = {
    "an4": {"train": 948, "test": 130},
    "librispeech": {"dev-clean": 2703, "dev-other": 2864, "test-clean": 2620, "test-other": 2939,
                    "train-clean-100": 28539, "train-clean-360": 104014, "train-other-500": 148688,
                    "dev-clean-2": 1089, "train-clean-5": 1519},
    "aishell": {"train": 120098, "dev": 14326, "test": 7176},
    "fsdd": {speaker: 500 for speaker in ("george", "jackson", "lucas", "nicolas", "theo", "yweweler")},
}
PARTIAL_FILE = "partial_corpus"  # in a prepared set: the parts of a partial copy it was made from, one a line
ALLOW_PARTIAL_HELP = ("true: use a copy with fewer (or more) utterances than the corpus as published; its sets are "
                      "marked, and RESULTS.md says their results do not compare with published ones")


def colored_noise(kind: str, num_samples: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-power noise of ``num_samples`` samples; ``pink`` has a 1/f power spectrum.

    Pink noise is white noise shaped in the frequency domain by 1/sqrt(f) (amplitude), so power falls 3 dB
    per octave.
    """
    if kind not in NOISE_KINDS:
        raise ValueError(f"unknown noise kind {kind!r}; valid choices: {', '.join(NOISE_KINDS)}")
    white = rng.standard_normal(num_samples)
    if kind == "pink" and num_samples > 1:
        spectrum = np.fft.rfft(white)
        freqs = np.arange(spectrum.shape[0], dtype=np.float64)
        freqs[0] = 1.0  # keep DC finite; it is then removed below
        spectrum /= np.sqrt(freqs)
        white = np.fft.irfft(spectrum, n=num_samples)
        white -= white.mean()
    power = float(np.mean(white ** 2))
    return white / np.sqrt(power) if power > 0 else white


def speech_power(x: np.ndarray) -> float:
    """Mean power over the active samples (|x| above 1 % of the peak), so leading/trailing silence does not
    lower the reference level of the SNR."""
    peak = float(np.max(np.abs(x))) if x.size else 0.0
    if peak == 0.0:
        return 0.0
    active = x[np.abs(x) > 0.01 * peak]
    return float(np.mean(active ** 2))


def add_noise(x: np.ndarray, *, snr_db: float, kind: str, rng: np.random.Generator) -> np.ndarray:
    """``x`` (float, any length) plus ``kind`` noise at ``snr_db`` dB below the active speech power."""
    power = speech_power(x)
    if power == 0.0:
        return x.copy()
    noise = colored_noise(kind, x.shape[0], rng)
    return x + noise * np.sqrt(power / 10.0 ** (snr_db / 10.0))


def to_int16(x: np.ndarray, *, peak: float) -> np.ndarray:
    """Scale ``x`` so its peak is ``peak`` (0..1 of full scale) and convert to 16-bit PCM."""
    m = float(np.max(np.abs(x))) if x.size else 0.0
    if m > 0:
        x = x * (peak / m)
    return np.clip(np.round(x * 32767.0), -32768, 32767).astype(np.int16)


def write_kaldi_dir(out_dir: Path, entries: Iterable[Tuple[str, str, str]]) -> int:
    """Write ``out_dir/{wav.scp,text}`` from ``(key, wav path, transcript)`` rows, sorted by key as Kaldi wants.

    Returns the number of utterances written.
    """
    rows = sorted(entries)
    keys = [k for k, _, _ in rows]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{out_dir}: duplicate utterance keys")
    os.makedirs(out_dir, exist_ok=True)
    write_text(out_dir / "wav.scp", "".join(f"{key} {path}\n" for key, path, _ in rows))
    write_text(out_dir / "text", "".join(f"{key} {transcript}\n" for key, _, transcript in rows))
    return len(rows)


def check_kaldi_dir(data_dir: Path) -> int:
    """The number of utterances of ``data_dir``, whose wav.scp and text, read by the one reader of Kaldi files
    (``wenet_udps.utils.kaldi_files``), must be non-empty and list the same keys in the same order; a UserError
    naming the dir (or the file and line) otherwise."""
    tables = {}
    for name in ("wav.scp", "text"):
        path = Path(data_dir) / name
        if not path.is_file():
            raise cli.UserError(f"{data_dir}: {name} is missing")
        tables[name] = list(read_table(str(path), allow_empty_value=name == "text"))
        if not tables[name]:
            raise cli.UserError(f"{data_dir}: {name} is empty")
    scp, text = tables["wav.scp"], tables["text"]
    if scp != text:
        where = next((i for i, (a, b) in enumerate(zip(scp, text)) if a != b), min(len(scp), len(text)))
        raise cli.UserError(f"{data_dir}: wav.scp and text list different utterance keys ({len(scp)} and "
                            f"{len(text)} keys; the first difference at key {where + 1})")
    return len(scp)


def check_counts(corpus: str, found: Mapping[str, int], where: "str | Path", *, allow_partial: bool) -> List[str]:
    """``found``: utterances per part of ``corpus`` in the copy at ``where``. Returns a line per part whose number
    is not the published one (parts without a published size are not checked); a UserError naming them unless
    ``allow_partial``, else one warning each."""
    published = PUBLISHED.get(corpus, {})
    short = [f"{corpus} {part}: {n} of its {published[part]} utterances" for part, n in sorted(found.items())
             if part in published and n != published[part]]
    if short and not allow_partial:
        raise cli.UserError(f"{where} is not the whole corpus ({'; '.join(short)}): fetch it again with its "
                            f"download.sh, or, to use this copy as it is, pass --allow_partial true (run.sh: "
                            f"--prepare_opts \"--allow_partial true\"); RESULTS.md then says its results do not "
                            f"compare with published ones")
    for line in short:
        print(f"warning: {where}: a partial copy, used as asked (--allow_partial true): {line}", file=sys.stderr)
    return short


def mark_partial(set_dir: Path, lines: Iterable[str]) -> None:
    """Record in ``set_dir`` the partial parts it was made from; a set made from a whole copy has no record."""
    lines = sorted(set(lines))
    path = Path(set_dir) / PARTIAL_FILE
    if lines:
        write_text(path, "".join(f"{line}\n" for line in lines))
    elif path.exists():
        path.unlink()


def published_sizes(recipe: str) -> str:
    """The published sizes run.sh's stage 0 is checked against for ``recipe`` (its stamp records them, so a data
    dir prepared before they were checked is prepared again); "" for a recipe without them (tiny_*)."""
    sizes = PUBLISHED.get("librispeech" if recipe == "mini_librispeech" else recipe, {})
    return " ".join(f"{part}={n}" for part, n in sorted(sizes.items()))


def partial_notes(data_dir: Path) -> List[str]:
    """Every line of the ``partial_corpus`` records of ``data_dir``'s sets, once each."""
    return sorted({line for f in Path(data_dir).glob(f"*/{PARTIAL_FILE}")
                   for line in cli.regular_file(f).read_text(encoding="utf-8").splitlines() if line.strip()})


def boolean(text: str) -> bool:
    """``true`` / ``false``, as the recipes' shell options are written."""
    if text not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text == "true"


def main(argv: Optional[List[str]] = None) -> None:
    parser = cli.ArgumentParser(description="Check a prepared Kaldi dir (wav.scp and text list the same keys); "
                                            "print its number of utterances.")
    parser.add_argument("data_dir", type=cli.existing_dir, help="Kaldi data dir holding wav.scp and text")
    parser.add_argument("--part", default=None, metavar="CORPUS:PART",
                        help="the corpus part the dir holds whole: its size must be the published one")
    parser.add_argument("--allow_partial", type=boolean, default=False, help=ALLOW_PARTIAL_HELP)
    args = parser.parse_args(argv)
    n = check_kaldi_dir(Path(args.data_dir))
    if args.part:
        corpus, _, part = args.part.partition(":")
        if part not in PUBLISHED.get(corpus, {}):
            parser.error(f"--part {args.part}: no published size; known: "
                         + " ".join(f"{c}:{p}" for c, parts in PUBLISHED.items() for p in parts))
        mark_partial(Path(args.data_dir), check_counts(corpus, {part: n}, args.data_dir,
                                                       allow_partial=args.allow_partial))
    print(n)


if __name__ == "__main__":
    cli.run_cli(main, "wenet_udps.corpora.common")


def warn_skipped(skipped: Mapping[str, List[str]], where: Path) -> None:
    """One warning line per skip reason of a corpus reader, with its count and the first few places."""
    for reason, places in skipped.items():
        more = f" and {len(places) - SHOWN} more" if len(places) > SHOWN else ""
        print(f"warning: {where}: skipped {len(places)} utterance(s), {reason}: {'; '.join(places[:SHOWN])}{more}",
              file=sys.stderr)
