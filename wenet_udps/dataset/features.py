"""Kaldi-compatible features (kaldi-native-fbank) and spectrogram augmentation.

Features are float32 numpy arrays (T, F); augmentations take a ``numpy.random.Generator`` so that every
worker draws from its own seeded stream.
"""
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import kaldi_native_fbank as knf
import numpy as np

from wenet_udps.utils.registry import lookup
from wenet_udps.utils.schema import check_section, defaults_of



@dataclass(frozen=True)
class FbankConf:
    """``fbank_conf`` with WeNet's defaults (milliseconds; dither in int16 units)."""
    num_mel_bins: int = 23
    frame_shift: float = 10
    frame_length: float = 25
    dither: float = 0.0


@dataclass(frozen=True)
class MfccConf(FbankConf):
    """``mfcc_conf``: the fbank keys plus the cepstra."""
    num_ceps: int = 40
    high_freq: float = 0.0
    low_freq: float = 20.0


def _frame_opts(opts: Any, conf: Dict[str, Any], sr: int) -> None:
    opts.frame_opts.samp_freq = float(sr)
    opts.frame_opts.frame_shift_ms = float(conf["frame_shift"])
    opts.frame_opts.frame_length_ms = float(conf["frame_length"])
    # Dither is added to the waveform by _dithered (seeded and about 2x faster than kaldi-native-fbank's).
    opts.frame_opts.dither = 0.0
    opts.mel_opts.num_bins = int(conf["num_mel_bins"])
    opts.energy_floor = 0.0  # WeNet calls Kaldi fbank with energy_floor=0.0


def _run(extractor: Any, dim: int, wav: np.ndarray, sr: int) -> np.ndarray:
    extractor.accept_waveform(float(sr), wav)
    extractor.input_finished()
    n = extractor.num_frames_ready
    if n == 0:
        return np.zeros((0, dim), dtype=np.float32)
    return np.stack([extractor.get_frame(i) for i in range(n)])


def _checked(conf: Optional[Dict[str, Any]], spec: type, where: str) -> Dict[str, Any]:
    """``conf`` checked against ``spec`` with the defaults filled in."""
    return {**defaults_of(spec), **check_section(conf, spec, where)}


def _dithered(wav: np.ndarray, dither: float, rng: Optional[np.random.Generator]) -> np.ndarray:
    """Add Gaussian noise of std ``dither`` (Kaldi's dither; here once per sample rather than per frame copy)."""
    if dither == 0.0:
        return wav
    rng = rng if rng is not None else np.random.default_rng()
    return (wav + dither * rng.standard_normal(len(wav), dtype=np.float32)).astype(np.float32, copy=False)


def _fbank_extractor(conf: Dict[str, Any], sr: int) -> Tuple[Any, int]:
    opts = knf.FbankOptions()
    _frame_opts(opts, conf, sr)
    return knf.OnlineFbank(opts), opts.mel_opts.num_bins


def _mfcc_extractor(conf: Dict[str, Any], sr: int) -> Tuple[Any, int]:
    opts = knf.MfccOptions()
    _frame_opts(opts, conf, sr)
    opts.num_ceps = int(conf["num_ceps"])
    opts.mel_opts.high_freq = float(conf["high_freq"])
    opts.mel_opts.low_freq = float(conf["low_freq"])
    return knf.OnlineMfcc(opts), opts.num_ceps


def compute_fbank(wav: np.ndarray, sr: int, conf: Optional[Dict[str, Any]] = None,
                  rng: Optional[np.random.Generator] = None) -> np.ndarray:
    """Log-mel filterbank of a waveform in the int16 range: (N,) -> (T, num_mel_bins), T = 1 + (N - L) // S.

    ``rng`` draws the dither noise (a fresh unseeded generator when None)."""
    conf = _checked(conf, FbankConf, "dataset_conf.fbank_conf")
    return _run(*_fbank_extractor(conf, sr), _dithered(wav, float(conf["dither"]), rng), sr)


def compute_mfcc(wav: np.ndarray, sr: int, conf: Optional[Dict[str, Any]] = None,
                 rng: Optional[np.random.Generator] = None) -> np.ndarray:
    """MFCC of a waveform in the int16 range: (N,) -> (T, num_ceps)."""
    conf = _checked(conf, MfccConf, "dataset_conf.mfcc_conf")
    return _run(*_mfcc_extractor(conf, sr), _dithered(wav, float(conf["dither"]), rng), sr)


# feats_type -> (whole-waveform function, its conf key, its conf spec, its extractor)
FEATURE_FUNCS = {"fbank": (compute_fbank, "fbank_conf", FbankConf, _fbank_extractor),
                 "mfcc": (compute_mfcc, "mfcc_conf", MfccConf, _mfcc_extractor)}


def compute_features(wav: np.ndarray, sr: int, dataset_conf: Dict[str, Any],
                     rng: Optional[np.random.Generator] = None) -> np.ndarray:
    """Features chosen by ``dataset_conf.feats_type`` (fbank|mfcc) with that type's ``*_conf``."""
    func, conf_key, _, _ = lookup(FEATURE_FUNCS, dataset_conf.get("feats_type", "fbank"), "dataset_conf.feats_type")
    return func(wav, sr, dataset_conf.get(conf_key), rng)


def extractor_problem(dataset_conf: Dict[str, Any], sr: int) -> Optional[str]:
    """Why the feature extractor of ``dataset_conf`` cannot be made for audio at ``sr`` Hz, or None: Kaldi's own
    check (a frame of no sample, more mel bins than the frame's FFT bins can fill), made once so that a config is
    refused before any audio is read."""
    _, conf_key, spec, make = lookup(FEATURE_FUNCS, dataset_conf.get("feats_type", "fbank"), "dataset_conf.feats_type")
    conf = _checked(dataset_conf.get(conf_key), spec, f"dataset_conf.{conf_key}")
    try:
        make(conf, sr)
    except ValueError as e:
        return (f"dataset_conf.{conf_key}: num_mel_bins {conf['num_mel_bins']}, frame_length "
                f"{float(conf['frame_length']):g} ms and frame_shift {float(conf['frame_shift']):g} ms do not fit "
                f"audio at {sr} Hz (dataset_conf.resample_conf.resample_rate): Kaldi's fbank says '{e}' (a frame "
                f"must hold samples, and its FFT at least one bin per mel bin: fewer num_mel_bins, a longer "
                f"frame_length or a higher rate)")
    return None


class OnlineFeatures:
    """:func:`compute_features` of a waveform given piece by piece (a stream): the same frames, bitwise (a Kaldi
    frame depends on its own window only), each computed once, so a piece costs its own length, not the stream's.
    The extractor keeps the samples of one unfinished window and no frame once it is returned.

    Without dither only (``eval_dataset_conf`` sets it to 0): a stream is decoded, never trained on."""

    def __init__(self, sr: int, dataset_conf: Dict[str, Any]):
        _, conf_key, spec, make = lookup(FEATURE_FUNCS, dataset_conf.get("feats_type", "fbank"),
                                         "dataset_conf.feats_type")
        conf = _checked(dataset_conf.get(conf_key), spec, f"dataset_conf.{conf_key}")
        if float(conf["dither"]) != 0.0:
            raise ValueError(f"dataset_conf.{conf_key}.dither: online features are computed without dither, got "
                             f"{conf['dither']}")
        self.extractor, self.dim = make(conf, sr)
        self.sr = sr
        self.frames = 0  # frames returned so far

    def accept(self, wav: np.ndarray, last: bool = False) -> np.ndarray:
        """Samples (N,) float32 in the int16 range that follow the previous ones -> the (n, F) frames they
        complete; ``last``: the waveform ends here (snip_edges: no frame is added, none is left pending)."""
        if len(wav):
            self.extractor.accept_waveform(float(self.sr), wav)
        if last:
            self.extractor.input_finished()
        ready = self.extractor.num_frames_ready
        if ready == self.frames:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.stack([self.extractor.get_frame(i) for i in range(self.frames, ready)])
        self.extractor.pop(ready - self.frames)
        self.frames = ready
        return out


def feature_dim(dataset_conf: Dict[str, Any]) -> int:
    """Output dimension F of ``compute_features`` for this dataset_conf."""
    name = dataset_conf.get("feats_type", "fbank")
    lookup(FEATURE_FUNCS, name, "dataset_conf.feats_type")
    if name == "mfcc":
        return int(_checked(dataset_conf.get("mfcc_conf"), MfccConf, "dataset_conf.mfcc_conf")["num_ceps"])
    return int(_checked(dataset_conf.get("fbank_conf"), FbankConf, "dataset_conf.fbank_conf")["num_mel_bins"])


SPEC_AUG_MASK_VALUES = ("zero", "mean")


def spec_aug(feats: np.ndarray, rng: np.random.Generator, num_t_mask: int = 2, num_f_mask: int = 2,
             max_t: int = 50, max_f: int = 10, max_w: int = 80, mask_value: str = "zero") -> np.ndarray:
    """Mask ``num_t_mask`` time bands (1..max_t frames) and ``num_f_mask`` frequency bands (1..max_f bins).

    (T, F) -> (T, F), a copy. ``mask_value``: "zero" writes 0.0 as WeNet does; the model's global CMVN then turns
    it into -mean/std, several deviations below the data, the same in every masked bin of every frame. "mean" writes
    the utterance's mean of each bin, about 0 after CMVN: the SpecAugment paper's choice (its features were
    normalised before masking, so its zero was the mean). UDPS attention, whose scores are not invariant to a
    component shared by all keys, learns far more slowly under "zero" frequency masks (docs/fsdd_generalisation.md).
    ``max_w`` (time warp) is accepted for WeNet configs and not applied, as in WeNet.
    """
    if mask_value not in SPEC_AUG_MASK_VALUES:
        raise ValueError(f"spec_aug_conf.mask_value: unknown value {mask_value!r}; valid: {list(SPEC_AUG_MASK_VALUES)}")
    out = feats.copy()
    frames, bins = out.shape
    if frames == 0:
        return out
    fill = feats.mean(axis=0) if mask_value == "mean" else np.zeros(bins, dtype=feats.dtype)
    for _ in range(num_t_mask):
        start = int(rng.integers(0, frames))
        out[start:min(frames, start + int(rng.integers(1, max_t + 1)))] = fill
    for _ in range(num_f_mask):
        start = int(rng.integers(0, bins))
        end = min(bins, start + int(rng.integers(1, max_f + 1)))
        out[:, start:end] = fill[start:end]
    return out


def spec_sub(feats: np.ndarray, rng: np.random.Generator, max_t: int = 20, num_t_sub: int = 3) -> np.ndarray:
    """Replace ``num_t_sub`` spans (1..max_t frames) by earlier frames of the same utterance: (T, F) -> (T, F)."""
    out = feats.copy()
    frames = out.shape[0]
    if frames == 0:
        return out
    for _ in range(num_t_sub):
        start = int(rng.integers(0, frames))
        end = min(frames, start + int(rng.integers(1, max_t + 1)))
        shift = int(rng.integers(0, start + 1))
        out[start:end] = feats[start - shift:end - shift]
    return out


def spec_trim(feats: np.ndarray, rng: np.random.Generator, max_t: int = 20) -> np.ndarray:
    """Drop 1..max_t frames from the end, only when that keeps more than half: (T, F) -> (T', F)."""
    frames = feats.shape[0]
    length = int(rng.integers(1, max_t + 1))
    if length < frames / 2:
        return feats[:frames - length].copy()
    return feats
