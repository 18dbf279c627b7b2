"""On-the-fly waveform augmentation for speaker-independent training: volume, additive noise, reverberation.

Nothing is downloaded: the noise is synthesised (power-law spectra, from white to brown, with an optional hum) and
the room impulse responses are synthesised too (exponentially decaying noise with a direct path and a few early
reflections, RT60 drawn per utterance). Each function takes the samples (N,) float32 in int16 scale, the sample
rate and the utterance's augmentation ``rng`` (so a run is reproducible), plus its ``*_conf`` keys, and returns
new samples (N,) float32. Each applies with probability ``prob`` per utterance.

They run after speed perturbation and before the features (``transforms.UtteranceProcessor``), in the order
reverberation -> noise -> volume: a room colours the voice, noise is added in the room, the gain comes last.
"""
import math
from typing import Tuple

import numpy as np

from wenet_udps.utils.schema import ConfigError

INT16_PEAK = 32767.0


def _active_power(wav: np.ndarray) -> float:
    """Mean power of the samples above 1 % of the peak (pauses do not lower the SNR's reference level)."""
    peak = float(np.max(np.abs(wav))) if wav.size else 0.0
    if peak == 0.0:
        return 0.0
    active = wav[np.abs(wav) > 0.01 * peak]
    return float(np.mean(np.square(active, dtype=np.float64)))


def power_law_noise(num_samples: int, exponent: float, rng: np.random.Generator) -> np.ndarray:
    """Unit-power noise (N,) float64 with a 1/f^exponent power spectrum (0 white, 1 pink, 2 brown)."""
    white = rng.standard_normal(num_samples)
    if num_samples > 1 and exponent != 0.0:
        spectrum = np.fft.rfft(white)
        freqs = np.arange(spectrum.shape[0], dtype=np.float64)
        freqs[0] = 1.0  # DC stays finite and is removed below
        spectrum /= freqs ** (exponent / 2.0)
        white = np.fft.irfft(spectrum, n=num_samples)
        white -= white.mean()
    power = float(np.mean(white ** 2)) if num_samples else 0.0
    return white / math.sqrt(power) if power > 0 else white


def noise_aug(wav: np.ndarray, sr: int, rng: np.random.Generator, prob: float = 0.5,
              snr_db: Tuple[float, float] = (5.0, 30.0), exponent: Tuple[float, float] = (0.0, 2.0),
              hum_prob: float = 0.2) -> np.ndarray:
    """Add synthetic noise at an SNR drawn from ``snr_db`` (dB below the active speech power).

    The noise's spectral exponent is drawn from ``exponent`` (0 white .. 2 brown); with ``hum_prob`` a 50/60 Hz hum
    with harmonics is mixed in (half its power), as mains hum in a cheap recording chain.
    """
    if wav.size == 0 or rng.random() >= prob:
        return wav
    power = _active_power(wav)
    if power == 0.0:
        return wav
    noise = power_law_noise(wav.shape[0], float(rng.uniform(*exponent)), rng)
    if rng.random() < hum_prob:
        t = np.arange(wav.shape[0]) / sr
        base = 50.0 if rng.random() < 0.5 else 60.0
        hum = sum(np.sin(2 * math.pi * base * h * t + rng.uniform(0, 2 * math.pi)) / h for h in (1, 2, 3, 4, 5))
        hum /= math.sqrt(float(np.mean(hum ** 2)))
        noise = (noise + hum) / math.sqrt(2.0)
    gain = math.sqrt(power / 10.0 ** (float(rng.uniform(*snr_db)) / 10.0))
    return (wav + gain * noise).astype(np.float32)


def synthetic_rir(sr: int, rt60: float, rng: np.random.Generator, num_reflections: int = 6,
                  direct_to_reverb_db: Tuple[float, float] = (0.0, 10.0)) -> np.ndarray:
    """A room impulse response (L,) float64, unit peak at sample 0: a direct path, ``num_reflections`` early
    reflections within 1-20 ms, and a Gaussian tail whose energy decays by 60 dB in ``rt60`` seconds."""
    length = max(2, int(rt60 * sr))
    t = np.arange(length) / sr
    tail = rng.standard_normal(length) * np.exp(-6.9078 * t / rt60)  # ln(1000) = 6.9078: -60 dB at rt60
    tail[0] = 0.0
    # The reverberant part's energy relative to the direct path's (1.0), drawn in dB.
    ratio_db = float(rng.uniform(*direct_to_reverb_db))
    tail *= math.sqrt(10.0 ** (-ratio_db / 10.0) / max(float(np.sum(tail ** 2)), 1e-12))
    rir = tail
    rir[0] = 1.0
    for _ in range(num_reflections):
        at = int(rng.uniform(0.001, 0.02) * sr)
        if at < length:
            rir[at] += rng.uniform(-0.5, 0.5)
    return rir


def reverb_aug(wav: np.ndarray, sr: int, rng: np.random.Generator, prob: float = 0.3,
               rt60: Tuple[float, float] = (0.1, 0.7)) -> np.ndarray:
    """Convolve with a synthetic room impulse response (RT60 drawn from ``rt60`` seconds); the output keeps the
    input's length and active power, so the reverberation changes the sound, not the level."""
    if wav.size == 0 or rng.random() >= prob:
        return wav
    # Imported here: scipy.signal takes about 0.8 s to import, paid otherwise by every command that reads a
    # config (train, recognize, export, ...), while only reverberation uses it.
    from scipy.signal import fftconvolve
    rir = synthetic_rir(sr, float(rng.uniform(*rt60)), rng)
    out = fftconvolve(wav.astype(np.float64), rir)[: wav.shape[0]]
    before, after = _active_power(wav), _active_power(out)
    if after > 0.0:
        out *= math.sqrt(before / after)
    return out.astype(np.float32)


def volume_aug(wav: np.ndarray, sr: int, rng: np.random.Generator, prob: float = 0.5,
               gain_db: Tuple[float, float] = (-12.0, 6.0)) -> np.ndarray:
    """Scale by a gain drawn from ``gain_db``; samples stay within int16's range (a loud draw is clipped, as an
    overdriven recording would be)."""
    if wav.size == 0 or rng.random() >= prob:
        return wav
    out = wav * np.float32(10.0 ** (float(rng.uniform(*gain_db)) / 20.0))
    return np.clip(out, -INT16_PEAK, INT16_PEAK).astype(np.float32)


# The dataset_conf switches, in the order they apply: name -> function (its keyword arguments are the name's
# ``*_conf`` keys, checked by the schema).
WAVE_AUGMENTATIONS = {"reverb_aug": reverb_aug, "noise_aug": noise_aug, "volume_aug": volume_aug}


def check_wave_aug(name: str, conf: dict) -> dict:
    """``dataset_conf.<name>_conf`` (already type-checked by the schema) checked for ranges: ``prob`` and
    ``hum_prob`` in [0, 1], each (low, high) pair finite with low <= high, ``rt60`` > 0. Raises ConfigError."""
    where = f"dataset_conf.{name}_conf"
    for key, value in conf.items():
        if key in ("prob", "hum_prob") and not 0.0 <= value <= 1.0:
            raise ConfigError(f"{where}.{key}", f"must be in [0, 1], got {value}")
        if isinstance(value, tuple):
            if len(value) != 2 or not all(math.isfinite(v) for v in value) or value[0] > value[1]:
                raise ConfigError(f"{where}.{key}", f"must be a finite [low, high] pair with low <= high, got "
                                  f"{list(value)}")
            if key == "rt60" and value[0] <= 0.0:
                raise ConfigError(f"{where}.rt60", f"must be > 0 seconds, got {list(value)}")
    return conf
