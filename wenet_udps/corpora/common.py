"""Pieces shared by the corpus builders: noise, level, Kaldi data dirs."""
import os
from pathlib import Path
from typing import Iterable, Tuple

import numpy as np

NOISE_KINDS = ("white", "pink")


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
    with open(out_dir / "wav.scp", "w", encoding="utf-8") as scp, open(out_dir / "text", "w", encoding="utf-8") as txt:
        for key, path, transcript in rows:
            scp.write(f"{key} {path}\n")
            txt.write(f"{key} {transcript}\n")
    return len(rows)
