"""Sample filtering, shuffle/sort buffers, batching (static | dynamic | bucket) and padding.

A sample here is ``{"key": str, "feat": (T, F) float32 numpy, "label": List[int], ...}``.
"""
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional

import numpy as np
import torch

from wenet_udps.utils.registry import lookup

IGNORE_ID = -1
# WeNet's filter_conf defaults; lengths in 10 ms frames, ratios are tokens per frame.
FILTER_DEFAULTS = {"max_length": 10240, "min_length": 10, "token_max_length": 200, "token_min_length": 1,
                   "min_output_input_ratio": 0.0005, "max_output_input_ratio": 1.0}


def filter_conf_checked(conf: Optional[Dict[str, Any]]) -> Dict[str, float]:
    conf = dict(conf or {})
    unknown = set(conf) - set(FILTER_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown filter_conf keys {sorted(unknown)}; valid: {', '.join(FILTER_DEFAULTS)}")
    return {**FILTER_DEFAULTS, **conf}


def keep_sample(num_samples: int, sample_rate: int, num_tokens: Optional[int], conf: Dict[str, float]) -> bool:
    """WeNet's filter: duration in 10 ms frames within [min_length, max_length], token count and
    tokens/frames ratio within bounds (token checks skipped when ``num_tokens`` is None, i.e. no tokenizer)."""
    frames = num_samples / sample_rate * 100
    if not conf["min_length"] <= frames <= conf["max_length"]:
        return False
    if num_tokens is None:
        return True
    if not conf["token_min_length"] <= num_tokens <= conf["token_max_length"]:
        return False
    if frames > 0:
        ratio = num_tokens / frames
        if not conf["min_output_input_ratio"] <= ratio <= conf["max_output_input_ratio"]:
            return False
    return True


def shuffle_buffer(samples: Iterable[Dict], rng: np.random.Generator, shuffle_size: int = 10000) -> Iterator[Dict]:
    """Shuffle within successive buffers of ``shuffle_size`` samples."""
    buf: List[Dict] = []
    for sample in samples:
        buf.append(sample)
        if len(buf) >= shuffle_size:
            for i in rng.permutation(len(buf)):
                yield buf[i]
            buf = []
    for i in rng.permutation(len(buf)):
        yield buf[i]


def sort_buffer(samples: Iterable[Dict], sort_size: int = 500) -> Iterator[Dict]:
    """Sort successive buffers of ``sort_size`` samples by frame count (so batches hold similar lengths)."""
    buf: List[Dict] = []
    for sample in samples:
        buf.append(sample)
        if len(buf) >= sort_size:
            yield from sorted(buf, key=lambda s: s["feat"].shape[0])
            buf = []
    yield from sorted(buf, key=lambda s: s["feat"].shape[0])


def static_batch(samples: Iterable[Dict], *, batch_size: int = 16) -> Iterator[List[Dict]]:
    """Fixed number of utterances per batch (the last one may be smaller)."""
    buf: List[Dict] = []
    for sample in samples:
        buf.append(sample)
        if len(buf) >= batch_size:
            yield buf
            buf = []
    if buf:
        yield buf


def dynamic_batch(samples: Iterable[Dict], *, max_frames_in_batch: int = 12000) -> Iterator[List[Dict]]:
    """Batches whose padded size (longest * count) stays within ``max_frames_in_batch``; an utterance longer
    than that forms a batch by itself."""
    buf: List[Dict] = []
    longest = 0
    for sample in samples:
        frames = sample["feat"].shape[0]
        if buf and max(longest, frames) * (len(buf) + 1) > max_frames_in_batch:
            yield buf
            buf, longest = [], 0
        buf.append(sample)
        longest = max(longest, frames)
    if buf:
        yield buf


def bucket_batch(samples: Iterable[Dict], *, bucket_boundaries: List[int],
                 bucket_batch_sizes: List[int]) -> Iterator[List[Dict]]:
    """Utterances go to bucket i when frames < boundaries[i] (the last bucket takes the rest); a bucket is
    emitted when it holds ``bucket_batch_sizes[i]`` utterances; leftovers are emitted at the end."""
    if len(bucket_batch_sizes) != len(bucket_boundaries) + 1:
        raise ValueError(f"batch_conf.bucket_batch_sizes needs len(bucket_boundaries) + 1 = "
                         f"{len(bucket_boundaries) + 1} entries, got {len(bucket_batch_sizes)}")
    if list(bucket_boundaries) != sorted(bucket_boundaries):
        raise ValueError(f"batch_conf.bucket_boundaries must be ascending, got {bucket_boundaries}")
    buckets: List[List[Dict]] = [[] for _ in bucket_batch_sizes]
    for sample in samples:
        idx = int(np.searchsorted(bucket_boundaries, sample["feat"].shape[0], side="right"))
        buckets[idx].append(sample)
        if len(buckets[idx]) >= bucket_batch_sizes[idx]:
            yield buckets[idx]
            buckets[idx] = []
    for bucket in buckets:
        if bucket:
            yield bucket


BATCH_FUNCS: Dict[str, Callable[..., Iterator[List[Dict]]]] = {
    "static": static_batch, "dynamic": dynamic_batch, "bucket": bucket_batch}
_BATCH_KEYS = {"static": {"batch_size"}, "dynamic": {"max_frames_in_batch"},
               "bucket": {"bucket_boundaries", "bucket_batch_sizes"}}


def make_batches(samples: Iterable[Dict], batch_conf: Optional[Dict[str, Any]]) -> Iterator[List[Dict]]:
    """Batch with ``batch_conf.batch_type`` (keys of the other types are ignored, as WeNet configs mix them)."""
    conf = dict(batch_conf or {})
    batch_type = conf.pop("batch_type", "static")
    func = lookup(BATCH_FUNCS, batch_type, "dataset_conf.batch_conf.batch_type")
    kwargs = {k: v for k, v in conf.items() if k in _BATCH_KEYS[batch_type]}
    return func(samples, **kwargs)


def pad_batch(samples: List[Dict]) -> Dict[str, Any]:
    """Collate, longest utterance first (as WeNet): feats (B, T, F) float32 zero-padded, feats_lengths (B,)
    int32, target (B, L) int64 padded with -1, target_lengths (B,) int32, keys List[str]."""
    order = sorted(range(len(samples)), key=lambda i: -samples[i]["feat"].shape[0])
    samples = [samples[i] for i in order]
    feat_lens = [s["feat"].shape[0] for s in samples]
    label_lens = [len(s["label"]) for s in samples]
    dim = samples[0]["feat"].shape[1]
    feats = np.zeros((len(samples), max(feat_lens), dim), dtype=np.float32)
    target = np.full((len(samples), max(label_lens, default=0)), IGNORE_ID, dtype=np.int64)
    for i, s in enumerate(samples):
        feats[i, :feat_lens[i]] = s["feat"]
        target[i, :label_lens[i]] = s["label"]
    return {"keys": [s["key"] for s in samples], "feats": torch.from_numpy(feats),
            "feats_lengths": torch.tensor(feat_lens, dtype=torch.int32), "target": torch.from_numpy(target),
            "target_lengths": torch.tensor(label_lens, dtype=torch.int32)}
