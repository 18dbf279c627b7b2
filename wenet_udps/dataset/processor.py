"""Sample filtering, shuffle/sort buffers, batching (static | dynamic | bucket) and padding.

A sample here is ``{"key": str, "feat": (T, F) float32 numpy, "label": List[int], ...}``.
"""
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np
import torch

from wenet_udps.utils.registry import lookup
from wenet_udps.utils.schema import ConfigError, check_section, defaults_of, route

IGNORE_ID = -1


@dataclass(frozen=True)
class FilterConf:
    """WeNet's ``filter_conf`` and defaults: lengths in 10 ms frames, ratios in tokens per frame."""
    max_length: float = 10240
    min_length: float = 10
    token_max_length: float = 200
    token_min_length: float = 1
    min_output_input_ratio: float = 0.0005
    max_output_input_ratio: float = 1.0


def filter_conf_checked(conf: Optional[Dict[str, Any]]) -> Dict[str, float]:
    """``dataset_conf.filter_conf`` checked, with the defaults filled in."""
    return {**defaults_of(FilterConf), **check_section(conf, FilterConf, "dataset_conf.filter_conf")}


def filter_reason(num_samples: int, sample_rate: int, num_tokens: Optional[int],
                  conf: Dict[str, float]) -> Optional[str]:
    """WeNet's filter: None to keep the utterance, else the ``filter_conf`` key that drops it (duration in 10 ms
    frames within [min_length, max_length], token count and tokens/frames ratio within bounds; token checks are
    skipped when ``num_tokens`` is None, i.e. no tokenizer)."""
    frames = num_samples / sample_rate * 100
    if frames < conf["min_length"]:
        return "min_length"
    if frames > conf["max_length"]:
        return "max_length"
    if num_tokens is None:
        return None
    if num_tokens < conf["token_min_length"]:
        return "token_min_length"
    if num_tokens > conf["token_max_length"]:
        return "token_max_length"
    if frames > 0:
        ratio = num_tokens / frames
        if ratio < conf["min_output_input_ratio"]:
            return "min_output_input_ratio"
        if ratio > conf["max_output_input_ratio"]:
            return "max_output_input_ratio"
    return None


def keep_sample(num_samples: int, sample_rate: int, num_tokens: Optional[int], conf: Dict[str, float]) -> bool:
    """Whether WeNet's filter keeps the utterance (see :func:`filter_reason`)."""
    return filter_reason(num_samples, sample_rate, num_tokens, conf) is None


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


@dataclass(frozen=True)
class BatchType:
    batch_type: str = "static"


# ``batch_conf`` takes the keys of every batch type (WeNet configs mix them); the chosen type uses its own.
BATCH_SPEC = [BatchType, *BATCH_FUNCS.values()]


def batch_plan(batch_conf: Optional[Dict[str, Any]]) -> Tuple[Callable[..., Iterator[List[Dict]]], Dict[str, Any]]:
    """The batch function and its arguments for ``dataset_conf.batch_conf`` (checked: keys, types, sizes >= 1)."""
    where = "dataset_conf.batch_conf"
    conf = check_section(batch_conf, BATCH_SPEC, where, supplied=("samples",))
    func = lookup(BATCH_FUNCS, conf.get("batch_type", "static"), f"{where}.batch_type")
    kwargs = route(conf, func, supplied=("samples",))
    for key, value in kwargs.items():
        sizes = value if isinstance(value, list) else [value]
        if key != "bucket_boundaries" and any(v < 1 for v in sizes):
            raise ConfigError(f"{where}.{key}", f"must be >= 1, got {value}")
    return func, kwargs


def most_batches(num_utts: int, batch_conf: Optional[Dict[str, Any]], num_workers: int = 1) -> int:
    """The most batches ``num_utts`` utterances make in one pass of one process whose ``num_workers`` DataLoader
    workers (0: the process itself) each batch their own share, as :class:`AsrDataset` does: static batches exactly
    (none filtered out), bucket batches at most (each bucket may end with a short one), dynamic batches at most (one
    utterance each, for utterances longer than ``max_frames_in_batch``)."""
    func, kwargs = batch_plan(batch_conf)
    workers = max(1, num_workers)
    shares = [len(range(w, num_utts, workers)) for w in range(workers)]
    if func is static_batch:
        return sum(sum(1 for _ in static_batch(range(n), **kwargs)) for n in shares)
    if func is bucket_batch:
        sizes = kwargs["bucket_batch_sizes"]
        return sum(-(-n // min(sizes)) + len(sizes) - 1 for n in shares if n)
    return num_utts


def make_batches(samples: Iterable[Dict], batch_conf: Optional[Dict[str, Any]]) -> Iterator[List[Dict]]:
    """Batch with ``batch_conf.batch_type`` (see :func:`batch_plan`)."""
    func, kwargs = batch_plan(batch_conf)
    return func(samples, **kwargs)


def pad_batch(samples: List[Dict]) -> Dict[str, Any]:
    """Collate, longest utterance first (as WeNet): feats (B, T, F) float32 zero-padded, feats_lengths (B,)
    int32, target (B, L) int64 padded with -1, target_lengths (B,) int32, keys List[str], txts List[str] (the
    transcripts, as the list gives them), seconds List[float] (each utterance's duration,
    wenet_udps.dataset.audio.duration_seconds), order List[int] (each row's place in ``samples``: decoding writes
    its results in the list's order, whatever the batch size)."""
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
    return {"keys": [s["key"] for s in samples], "txts": [s["txt"] for s in samples], "feats": torch.from_numpy(feats),
            "feats_lengths": torch.tensor(feat_lens, dtype=torch.int32), "target": torch.from_numpy(target),
            "target_lengths": torch.tensor(label_lens, dtype=torch.int32), "seconds": [s["seconds"] for s in samples],
            "order": order}
