"""The ASR IterableDataset: exact partition over DDP ranks and DataLoader workers, per-epoch reshuffle.

Unequal work across ranks: the partition gives each rank every ``world_size``-th list item (utterances for raw
lists, whole shards for shard lists), so ranks can end an epoch with different numbers of batches. The trainer
must not block in a collective on a rank that has run out: wrap the epoch in
``torch.distributed.algorithms.Join([model])`` (as WeNet does), or all-reduce a "has a batch" flag every step
and stop all ranks at the first rank that has none (then a few utterances are unused in that epoch).
"""
import copy
import logging
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from wenet_udps.dataset.audio import UnusableUtterance
from wenet_udps.dataset.lists import iterate_shard, member_cap, partition, read_raw_list, read_shard_list
from wenet_udps.dataset.processor import batch_plan, make_batches, pad_batch, shuffle_buffer, sort_buffer
from wenet_udps.dataset.transforms import DatasetConf, UtteranceProcessor
from wenet_udps.dataset.wave_aug import WAVE_AUGMENTATIONS
from wenet_udps.utils.counts import MAX_BAD_FRACTION, WorkFailed, check_pass
from wenet_udps.utils.schema import section
from wenet_udps.utils.registry import lookup

DATA_TYPES = ("raw", "shard")
# Why an utterance of the list was not used: unusable data, then the filter_conf key that dropped it.
BAD_REASONS = ("bad_audio", "non_finite", "missing_member", "bad_text", "bad_key", "empty_text", "special_symbol",
               "unk_text", "shard_error")
FILTER_REASONS = ("min_length", "max_length", "token_min_length", "token_max_length", "min_output_input_ratio",
                  "max_output_input_ratio", "no_frames", "ctc_frames", "oversize_member")
# Why a filtered utterance was dropped, in the log line, for the reasons that are not filter_conf keys.
_WHY = {"no_frames": "fewer frames than the encoder needs",
        "ctc_frames": "more target tokens (and blanks between repeats) than its encoder frames can align (CTC)"}
# Bookkeeping for the utterances lost in broken shards (see ``iterate_shard``), not reasons.
SHARD_KEYS = ("shard_ok", "shard_ok_utts", "shard_error_utts")
COUNT_KEYS = ("used",) + BAD_REASONS + FILTER_REASONS + SHARD_KEYS
# Filtered utterances logged by key per (rank, worker, epoch); the rest are only counted.
_LOGGED_FILTERED = 10
# Keep every utterance when decoding (WeNet relaxes the training filter the same way).
DECODE_FILTER = {"min_length": 0, "max_length": 1e12, "token_min_length": 0, "token_max_length": 1e12,
                 "min_output_input_ratio": 0.0, "max_output_input_ratio": 1e12}


class DataError(WorkFailed):
    """A pass's data is unusable: no utterance left, or too many bad ones (exit 1)."""


class DataTally:
    """Utterance counts of one pass over a dataset, summed from the ``stats`` of every item the loader yields.

    Items without ``feats`` carry only counts (a worker that formed no batch still reports what it skipped);
    :meth:`batches` drops them.
    """

    def __init__(self):
        self.counts: Dict[str, int] = dict.fromkeys(COUNT_KEYS, 0)

    def batches(self, loader: Iterable[Dict[str, Any]]) -> Iterator[Dict[str, Any]]:
        for item in loader:
            for key, value in item.get("stats", {}).items():
                self.counts[key] += int(value)
            if "feats" in item:
                yield item

    def as_list(self) -> List[int]:
        return [self.counts[k] for k in COUNT_KEYS]

    def set_list(self, values: Iterable[float]) -> None:
        self.counts = {k: int(v) for k, v in zip(COUNT_KEYS, values)}

    def shard_loss(self) -> Optional[int]:
        """Utterances lost in broken shards: the mean size of the complete shards times the broken ones, less the
        utterances read from them before the error (at least one per broken shard). None when unknowable (no
        complete shard in the pass)."""
        broken = self.counts["shard_error"]
        if not broken:
            return 0
        if not self.counts["shard_ok"]:
            return None
        expected = round(broken * self.counts["shard_ok_utts"] / self.counts["shard_ok"])
        return max(broken, expected - self.counts["shard_error_utts"])

    def skipped(self) -> Dict[str, int]:
        """Skipped utterances per reason; ``shard_error`` as the utterances lost (one per shard when unknowable)."""
        skipped = {k: v for k, v in self.counts.items() if k not in ("used",) + SHARD_KEYS and v}
        if skipped.get("shard_error"):
            skipped["shard_error"] = self.shard_loss() or skipped["shard_error"]
        return skipped

    def summary(self) -> str:
        skipped = self.skipped()
        reasons = ", ".join(f"{k} {v}" for k, v in skipped.items()) or "none"
        broken = self.counts["shard_error"]
        if broken:
            loss = self.shard_loss()
            lost = "an unknown number of" if loss is None else f"about {loss}"
            reasons += (f"; {broken} broken shard{'s' * (broken > 1)}: {lost} utterances lost, estimated from "
                        f"{self.counts['shard_ok']} complete shards")
        return f"{self.counts['used']} utterances used, {sum(skipped.values())} skipped ({reasons})"


def _dist_rank_world() -> tuple:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


@dataclass
class DataConfig:
    """The train.yaml keys of the dataset (``dataset: asr`` is WeNet's only dataset type)."""
    dataset: str = "asr"
    dataset_conf: Optional[dict] = section(DatasetConf)


class AsrDataset(IterableDataset):
    """Yields padded batches (see ``pad_batch``), each with ``stats``: the utterances used and skipped (per reason,
    ``COUNT_KEYS``) since the previous item of the same worker; a worker whose last utterances formed no batch
    yields one more item holding only ``stats``. Summing ``stats`` over all items of all workers and ranks
    (:class:`DataTally`) counts every utterance of the list once.

    Args:
        data_type: ``raw`` (data.list) or ``shard`` (shard list).
        data_list_file: the list file; parsed here, so malformed lines fail before training starts.
        tokenizer: a ``wenet_udps.text`` tokenizer (None: empty targets, no token filters).
        conf: WeNet ``dataset_conf``.
        partition: split the list over DDP ranks (False for decoding in one process); DataLoader workers always
            split it, so no utterance is read twice.
        min_frames: utterances with fewer feature frames are dropped and counted as ``no_frames`` (the model's
            ``model_builder.min_input_frames``: shorter ones would crash its subsampling convolutions).
        admission: training's check of the targets (``wenet_udps.train.targets.TargetAdmission``): counted as
            ``empty_text``, ``special_symbol``, ``unk_text`` and ``ctc_frames``; None (decoding) admits every
            target.
        items: the raw list's entries, read already (the API's wav.scp, ``kaldi_data.scp_utterances``);
            ``data_list_file`` then names the file they came from in every message.
    """

    def __init__(self, *, data_type: str, data_list_file: str, tokenizer: Any, conf: Dict[str, Any],
                 partition: bool = True, min_frames: int = 1, admission: Any = None,
                 items: Optional[List[Dict[str, Any]]] = None):
        super().__init__()
        lookup({t: t for t in DATA_TYPES}, data_type, "data_type")
        self.data_type = data_type
        self.conf = dict(conf or {})
        self.processor = UtteranceProcessor(self.conf, tokenizer, min_frames, admission)
        self.max_member_bytes = member_cap(self.processor.filter_conf["max_length"])
        self.max_bad_fraction = float(self.processor.conf.get("max_bad_fraction", MAX_BAD_FRACTION))
        batch_plan(self.conf.get("batch_conf"))  # batch sizes checked now, not in a worker
        self.tokenizer = tokenizer
        self.items: List[Any] = (items if items is not None else read_raw_list(data_list_file) if data_type == "raw"
                                 else read_shard_list(data_list_file))
        self.data_list_file = data_list_file
        self.partition = partition
        self.epoch = 0
        self.seed = int(self.conf.get("seed", 777))
        self.shuffle = bool(self.conf.get("shuffle", True))
        self.list_shuffle = bool(self.conf.get("list_shuffle", self.shuffle))
        self.sort = bool(self.conf.get("sort", True))

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch: the list order, shuffle buffer and augmentation draws derive from seed + epoch."""
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        rank, world_size = _dist_rank_world() if self.partition else (0, 1)
        info = get_worker_info()
        worker_id, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        return self.iterate(rank=rank, world_size=world_size, worker_id=worker_id, num_workers=num_workers)

    def _samples(self, indices: List[int], stats: Dict[str, int]) -> Iterator[Dict[str, Any]]:
        for idx in indices:
            if self.data_type == "raw":
                yield self.items[idx]
            else:
                yield from iterate_shard(self.items[idx], stats, self.max_member_bytes)

    def _processed(self, raw: Iterator[Dict[str, Any]], rng: np.random.Generator,
                   stats: Dict[str, int]) -> Iterator[Dict[str, Any]]:
        logged = 0
        for sample in raw:
            try:
                out = self.processor(sample, rng)
            except UnusableUtterance as e:
                logging.warning("skipping utterance %s: %s", sample["key"], e)
                stats[e.reason] += 1
                continue
            if isinstance(out, str):
                stats[out] += 1
                if logged < _LOGGED_FILTERED:
                    logged += 1
                    logging.info("filtered utterance %s of %s by %s", sample["key"], self.data_list_file,
                                 _WHY.get(out, f"dataset_conf.filter_conf.{out}"))
                continue
            stats["used"] += 1
            yield out

    def iterate(self, *, rank: int, world_size: int, worker_id: int, num_workers: int) -> Iterator[Dict[str, Any]]:
        """The batches of one (rank, worker) for the current epoch (``__iter__`` fills in the real ones)."""
        indices = partition(len(self.items), rank=rank, world_size=world_size, worker_id=worker_id,
                            num_workers=num_workers, shuffle=self.list_shuffle, seed=self.seed, epoch=self.epoch)
        rng = np.random.default_rng([self.seed, self.epoch, rank, worker_id])
        stats = dict.fromkeys(COUNT_KEYS, 0)
        samples = self._processed(self._samples(indices, stats), rng, stats)
        if self.shuffle:
            samples = shuffle_buffer(samples, rng, int((self.conf.get("shuffle_conf") or {}).get("shuffle_size",
                                                                                                10000)))
        if self.sort:
            samples = sort_buffer(samples, int((self.conf.get("sort_conf") or {}).get("sort_size", 500)))
        pending: Optional[Dict[str, Any]] = None
        # One batch of look-ahead: a batch is handed out only once the next is formed, so the utterances counted
        # after the last full batch still reach the caller through the final batch's stats.
        for batch in make_batches(samples, self.conf.get("batch_conf")):
            if pending is not None:
                pending["stats"] = _take(stats)
                yield pending
            pending = pad_batch(batch)
        if pending is not None:
            pending["stats"] = _take(stats)
            yield pending
        if any(stats.values()):
            yield {"stats": stats}
        if self.tokenizer is not None:
            self.tokenizer.log_unk_summary()

    def check_tally(self, tally: DataTally, what: str) -> str:
        """The one-line summary of a pass (``what``: e.g. "epoch 3 train", "decode"); DataError (exit 1) by the
        one rule of ``wenet_udps.utils.counts``: no utterance usable, or the unusable share above
        ``dataset_conf.max_bad_fraction``, naming the list and reasons."""
        line = f"{what} data {self.data_list_file}: {tally.summary()}"
        skipped = tally.skipped()
        try:
            check_pass(line, used=tally.counts["used"], total=tally.counts["used"] + sum(skipped.values()),
                       unusable=sum(skipped.get(k, 0) for k in BAD_REASONS), max_bad_fraction=self.max_bad_fraction)
        except WorkFailed as e:
            raise DataError(str(e)) from None
        # No complete shard to estimate the loss from: refuse by the share of broken shards (all of them).
        if tally.shard_loss() is None and self.max_bad_fraction < 1:
            raise DataError(f"{line}: every shard of the pass is broken, more than dataset_conf.max_bad_fraction "
                            f"{self.max_bad_fraction:g}")
        return line


def _take(stats: Dict[str, int]) -> Dict[str, int]:
    """A copy of ``stats``, which is then zeroed in place (the sample generators keep counting into it)."""
    taken = dict(stats)
    for key in stats:
        stats[key] = 0
    return taken


def init_dataset(data_type: str, data_list_file: str, tokenizer: Any, conf: Dict[str, Any],
                 partition: bool = True, min_frames: int = 1, admission: Any = None,
                 items: Optional[List[Dict[str, Any]]] = None) -> AsrDataset:
    """WeNet's entry point: ``init_dataset('raw' | 'shard', list_file, tokenizer, dataset_conf, partition)``.

    Use with ``DataLoader(dataset, batch_size=None, num_workers=N)``; call ``dataset.set_epoch(e)`` each epoch.
    For cv/decoding pass a conf with ``shuffle: false``, ``sort: false`` and no speed_perturb/spec_* keys.
    """
    return AsrDataset(data_type=data_type, data_list_file=data_list_file, tokenizer=tokenizer, conf=conf,
                      partition=partition, min_frames=min_frames, admission=admission, items=items)


def eval_dataset_conf(dataset_conf: Optional[Dict[str, Any]], batch_size: Optional[int] = None) -> Dict[str, Any]:
    """The training dataset_conf made deterministic for evaluation: no shuffle, augmentation (of the features or
    of the waveform: ``wave_aug.WAVE_AUGMENTATIONS``), speed perturbation or dither (the cv set of training). With
    ``batch_size`` (decoding, soup, export): also no sort and no length filter, static batches of ``batch_size``."""
    conf = copy.deepcopy(dict(dataset_conf or {}))
    for key in ("speed_perturb", "spec_aug", "spec_sub", "spec_trim", "shuffle", "list_shuffle", *WAVE_AUGMENTATIONS):
        conf[key] = False
    for key in ("fbank_conf", "mfcc_conf"):
        if conf.get(key):
            conf[key]["dither"] = 0.0
    if batch_size is not None:
        conf["sort"] = False
        conf["filter_conf"] = dict(DECODE_FILTER)
        conf["batch_conf"] = {"batch_type": "static", "batch_size": batch_size}
    return conf
