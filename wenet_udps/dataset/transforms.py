"""Per-utterance processing: read -> resample -> filter -> speed perturb -> features -> spec_aug/sub/trim.

``UtteranceProcessor`` validates ``dataset_conf`` once, so the per-utterance path does no config work.
"""
from typing import Any, Dict, List, Optional

import numpy as np

from wenet_udps.dataset.audio import load_audio, resample, speed_perturb
from wenet_udps.dataset.features import compute_features, feature_dim, spec_aug, spec_sub, spec_trim
from wenet_udps.dataset.processor import filter_conf_checked, keep_sample

# dataset_conf keys understood here and by the dataset (WeNet names). ``cycle`` and ``list_shuffle`` are
# WeNet keys; ``seed`` seeds the list shuffle and augmentation streams.
DATASET_KEYS = {"filter_conf", "resample_conf", "speed_perturb", "speed_perturb_conf", "feats_type", "fbank_conf",
                "mfcc_conf", "spec_aug", "spec_aug_conf", "spec_sub", "spec_sub_conf", "spec_trim",
                "spec_trim_conf", "shuffle", "shuffle_conf", "sort", "sort_conf", "batch_conf", "list_shuffle",
                "cycle", "seed"}
_AUG_KEYS = {"spec_aug_conf": {"num_t_mask", "num_f_mask", "max_t", "max_f", "max_w"},
             "spec_sub_conf": {"max_t", "num_t_sub"}, "spec_trim_conf": {"max_t"}}


def check_dataset_conf(conf: Dict[str, Any]) -> None:
    """Raise ValueError for unknown dataset_conf keys or augmentation options."""
    unknown = set(conf) - DATASET_KEYS
    if unknown:
        raise ValueError(f"unknown dataset_conf keys {sorted(unknown)}; valid: {', '.join(sorted(DATASET_KEYS))}")
    for name, valid in _AUG_KEYS.items():
        bad = set(conf.get(name) or {}) - valid
        if bad:
            raise ValueError(f"unknown dataset_conf.{name} keys {sorted(bad)}; valid: {', '.join(sorted(valid))}")


class UtteranceProcessor:
    """Turn ``{"key", "wav" | "audio", "txt", "start"?, "end"?}`` into ``{"key", "feat" (T, F), "label"}``.

    ``__call__`` returns None when the filter drops the utterance and raises ``BadAudioError`` for bad audio.
    """

    def __init__(self, conf: Dict[str, Any], tokenizer: Any = None):
        check_dataset_conf(conf)
        self.conf = conf
        self.tokenizer = tokenizer
        self.filter_conf = filter_conf_checked(conf.get("filter_conf"))
        self.sample_rate = int((conf.get("resample_conf") or {}).get("resample_rate", 16000))
        speeds: List[float] = list((conf.get("speed_perturb_conf") or {}).get("speeds", [0.9, 1.0, 1.1]))
        self.speeds = speeds if conf.get("speed_perturb", False) else [1.0]
        self.feat_dim = feature_dim(conf)
        self.augmentations = [(func, dict(conf.get(f"{name}_conf") or {}))
                              for name, func in (("spec_aug", spec_aug), ("spec_sub", spec_sub),
                                                 ("spec_trim", spec_trim)) if conf.get(name, False)]

    def __call__(self, sample: Dict[str, Any], rng: np.random.Generator) -> Optional[Dict[str, Any]]:
        source = sample["audio"] if "audio" in sample else sample["wav"]
        wav, sr = load_audio(source, sample.get("start"), sample.get("end"), name=sample["key"])
        # Every rate other than the configured one is converted, never misread.
        wav = resample(wav, sr, self.sample_rate)
        label = None
        if self.tokenizer is not None:
            label = self.tokenizer.tokenize(sample["txt"])[1]
        if not keep_sample(len(wav), self.sample_rate, None if label is None else len(label), self.filter_conf):
            return None
        if len(self.speeds) > 1:
            wav = speed_perturb(wav, self.sample_rate, float(self.speeds[int(rng.integers(len(self.speeds)))]))
        feat = compute_features(wav, self.sample_rate, self.conf, rng)
        for func, kwargs in self.augmentations:
            feat = func(feat, rng, **kwargs)
        if feat.shape[0] == 0:
            return None
        return {"key": sample["key"], "feat": feat, "label": label or [], "txt": sample["txt"]}
