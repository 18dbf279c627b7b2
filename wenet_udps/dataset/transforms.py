"""Per-utterance processing: tokenize (training: the text's admission check) -> read (``max_length`` from the
header) -> filter -> resample -> speed perturb -> reverb/noise/volume -> features -> spec_aug/sub/trim -> frame
checks (``no_frames``; training: ``ctc_frames``).

``UtteranceProcessor`` validates ``dataset_conf`` once (against :class:`DatasetConf`), so the per-utterance path
does no config work.
"""
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from wenet_udps.dataset.audio import CHANNEL_MEAN, BadAudioError, TooLong, duration_seconds, load_audio, \
    resample, speed_perturb
from wenet_udps.dataset import features, wave_aug
from wenet_udps.dataset.features import FbankConf, MfccConf, compute_features, feature_dim
from wenet_udps.dataset.processor import BATCH_SPEC, FilterConf, filter_conf_checked, filter_reason, \
    shuffle_buffer, sort_buffer
from wenet_udps.utils.counts import MAX_BAD_FRACTION
from wenet_udps.utils.schema import ConfigError, check_section, section


@dataclass(frozen=True)
class ResampleConf:
    resample_rate: int = 16000


@dataclass(frozen=True)
class SpeedPerturbConf:
    speeds: Tuple[float, ...] = (0.9, 1.0, 1.1)


_AUG_SUPPLIED = ("feats", "rng")
_WAVE_SUPPLIED = ("wav", "sr", "rng")


@dataclass(frozen=True)
class DatasetConf:
    """``dataset_conf`` (WeNet's keys; ``cycle`` and ``list_shuffle`` are WeNet keys too). ``seed`` seeds the list
    shuffle and augmentation streams. ``max_bad_fraction``: a pass (an epoch, a decode, the soup's dev set, CMVN
    stats) whose share of unusable utterances (bad audio, non-finite samples) exceeds it is an error, as is a pass
    with no usable utterance at all (the one rule: ``wenet_udps.utils.counts``). ``channel``: the channel (an index)
    read from multi-channel audio (files, shard members, API arrays alike), or ``mean`` (the mean of its channels);
    unset, such audio is bad audio, skipped and counted. Mono audio is read as it is whatever ``channel`` says, so
    one list may mix mono and multi-channel files (``audio.load_audio``'s channel policy)."""
    filter_conf: Optional[dict] = section(FilterConf)
    resample_conf: Optional[dict] = section(ResampleConf)
    speed_perturb: bool = False
    speed_perturb_conf: Optional[dict] = section(SpeedPerturbConf)
    reverb_aug: bool = False
    reverb_aug_conf: Optional[dict] = section(wave_aug.reverb_aug, supplied=_WAVE_SUPPLIED)
    noise_aug: bool = False
    noise_aug_conf: Optional[dict] = section(wave_aug.noise_aug, supplied=_WAVE_SUPPLIED)
    volume_aug: bool = False
    volume_aug_conf: Optional[dict] = section(wave_aug.volume_aug, supplied=_WAVE_SUPPLIED)
    feats_type: str = "fbank"
    fbank_conf: Optional[dict] = section(FbankConf)
    mfcc_conf: Optional[dict] = section(MfccConf)
    spec_aug: bool = False
    spec_aug_conf: Optional[dict] = section(features.spec_aug, supplied=_AUG_SUPPLIED)
    spec_sub: bool = False
    spec_sub_conf: Optional[dict] = section(features.spec_sub, supplied=_AUG_SUPPLIED)
    spec_trim: bool = False
    spec_trim_conf: Optional[dict] = section(features.spec_trim, supplied=_AUG_SUPPLIED)
    shuffle: bool = True
    shuffle_conf: Optional[dict] = section(shuffle_buffer, supplied=("samples", "rng"))
    list_shuffle: Optional[bool] = None
    sort: bool = True
    sort_conf: Optional[dict] = section(sort_buffer, supplied=("samples",))
    batch_conf: Optional[dict] = section(BATCH_SPEC, supplied=("samples",))
    cycle: int = 1
    seed: int = 777
    max_bad_fraction: float = MAX_BAD_FRACTION
    channel: Union[int, str, None] = None


def check_dataset_conf(conf: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """``dataset_conf`` checked and converted (ConfigError names the key path)."""
    checked = check_section(conf, DatasetConf, "dataset_conf")
    channel = checked.get("channel")
    if isinstance(channel, str) and channel != CHANNEL_MEAN:
        raise ConfigError("dataset_conf.channel", f"must be a channel index (>= 0) or {CHANNEL_MEAN!r}, got "
                                                  f"{channel!r}")
    return checked


class UtteranceProcessor:
    """Turn ``{"key", "wav" | "audio", "txt", "start"?, "end"?}`` into ``{"key", "feat" (T, F), "label"}``.

    ``__call__`` returns the ``filter_conf`` key (a str) when the filter drops the utterance, and raises
    ``BadAudioError`` for bad audio (unreadable, truncated, empty, non-finite samples or features).
    ``admission`` (training only; ``wenet_udps.train.targets.TargetAdmission``) checks the label: its
    ``check_text`` raises ``UnusableUtterance``, its ``ctc_reason`` names a reason (a str) to drop it.
    """

    def __init__(self, conf: Dict[str, Any], tokenizer: Any = None, min_frames: int = 1, admission: Any = None):
        conf = check_dataset_conf(conf)
        self.min_frames = max(1, int(min_frames))
        self.admission = admission
        self.conf = conf
        self.tokenizer = tokenizer
        self.filter_conf = filter_conf_checked(conf.get("filter_conf"))
        self.channel = conf.get("channel")
        self.sample_rate = int((conf.get("resample_conf") or {}).get("resample_rate", ResampleConf.resample_rate))
        speeds: List[float] = list((conf.get("speed_perturb_conf") or {}).get("speeds", SpeedPerturbConf.speeds))
        self.speeds = speeds if conf.get("speed_perturb", False) else [1.0]
        self.feat_dim = feature_dim(conf)
        self.wave_augmentations = [(func, wave_aug.check_wave_aug(name, dict(conf.get(f"{name}_conf") or {})))
                                   for name, func in wave_aug.WAVE_AUGMENTATIONS.items() if conf.get(name, False)]
        self.augmentations = [(func, dict(conf.get(f"{name}_conf") or {}))
                              for name, func in (("spec_aug", features.spec_aug), ("spec_sub", features.spec_sub),
                                                 ("spec_trim", features.spec_trim)) if conf.get(name, False)]
        for func, kwargs in self.augmentations:  # a bad value fails here, naming its key, not later in a worker
            func(np.zeros((2, self.feat_dim), dtype=np.float32), np.random.default_rng(0), **kwargs)

    def __call__(self, sample: Dict[str, Any], rng: np.random.Generator):
        source = sample["audio"] if "audio" in sample else sample["wav"]
        label = None
        if self.tokenizer is not None:
            label = self.tokenizer.tokenize(sample["txt"])[1]
            if self.admission is not None:  # before the audio is read: a rejected text costs no decoding
                self.admission.check_text(sample["key"], sample["txt"], label)
        # max_length is checked from the header, before the samples are read; the whole filter then runs on the
        # file's own rate, before resampling spends memory on a dropped utterance.
        try:
            wav, sr = load_audio(source, sample.get("start"), sample.get("end"), name=sample["key"],
                                 max_seconds=self.filter_conf["max_length"] / 100, channel=self.channel,
                                 where=sample.get("wav"))
        except TooLong:
            return "max_length"
        reason = filter_reason(len(wav), sr, None if label is None else len(label), self.filter_conf)
        if reason is not None:
            return reason
        seconds = duration_seconds(wav, sr)
        # Every rate other than the configured one is converted, never misread.
        wav = resample(wav, sr, self.sample_rate)
        if len(self.speeds) > 1:
            wav = speed_perturb(wav, self.sample_rate, float(self.speeds[int(rng.integers(len(self.speeds)))]))
        for func, kwargs in self.wave_augmentations:
            wav = func(wav, self.sample_rate, rng, **kwargs)
        feat = compute_features(wav, self.sample_rate, self.conf, rng)
        if not np.isfinite(feat).all():
            raise BadAudioError(f"non-finite features for {sample['key']}")
        for func, kwargs in self.augmentations:
            feat = func(feat, rng, **kwargs)
        if feat.shape[0] < self.min_frames:
            return "no_frames"
        # On the features as computed (after speed perturbation and spec_trim), the frames the encoder really gets.
        reason = None if self.admission is None else self.admission.ctc_reason(label, feat.shape[0])
        if reason is not None:
            return reason
        return {"key": sample["key"], "feat": feat, "label": label or [], "txt": sample["txt"], "seconds": seconds}
