"""The ASR IterableDataset: exact partition over DDP ranks and DataLoader workers, per-epoch reshuffle.

Unequal work across ranks: the partition gives each rank every ``world_size``-th list item (utterances for raw
lists, whole shards for shard lists), so ranks can end an epoch with different numbers of batches. The trainer
must not block in a collective on a rank that has run out: wrap the epoch in
``torch.distributed.algorithms.Join([model])`` (as WeNet does), or all-reduce a "has a batch" flag every step
and stop all ranks at the first rank that has none (then a few utterances are unused in that epoch).
"""
import logging
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from wenet_udps.dataset.audio import BadAudioError
from wenet_udps.dataset.lists import iterate_shard, partition, read_raw_list, read_shard_list
from wenet_udps.dataset.processor import make_batches, pad_batch, shuffle_buffer, sort_buffer
from wenet_udps.dataset.transforms import UtteranceProcessor
from wenet_udps.utils.registry import lookup

DATA_TYPES = ("raw", "shard")


def _dist_rank_world() -> tuple:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class AsrDataset(IterableDataset):
    """Yields padded batches (see ``pad_batch``) plus ``num_skipped``: bad audio files dropped since the previous
    batch of the same worker, so that summing it over all batches of all workers and ranks counts every bad file.

    Args:
        data_type: ``raw`` (data.list) or ``shard`` (shard list).
        data_list_file: the list file; parsed here, so malformed lines fail before training starts.
        tokenizer: a ``wenet_udps.text`` tokenizer (None: empty targets, no token filters).
        conf: WeNet ``dataset_conf``.
        partition: split the list over DDP ranks (False for decoding in one process); DataLoader workers always
            split it, so no utterance is read twice.
    """

    def __init__(self, *, data_type: str, data_list_file: str, tokenizer: Any, conf: Dict[str, Any],
                 partition: bool = True):
        super().__init__()
        lookup({t: t for t in DATA_TYPES}, data_type, "data_type")
        self.data_type = data_type
        self.conf = dict(conf or {})
        self.processor = UtteranceProcessor(self.conf, tokenizer)
        self.tokenizer = tokenizer
        self.items: List[Any] = (read_raw_list(data_list_file) if data_type == "raw"
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
                yield from iterate_shard(self.items[idx], stats)

    def _processed(self, raw: Iterator[Dict[str, Any]], rng: np.random.Generator,
                   stats: Dict[str, int]) -> Iterator[Dict[str, Any]]:
        for sample in raw:
            try:
                out = self.processor(sample, rng)
            except BadAudioError as e:
                logging.warning("skipping utterance %s: %s", sample["key"], e)
                stats["skipped"] += 1
                continue
            if out is not None:
                yield out

    def iterate(self, *, rank: int, world_size: int, worker_id: int, num_workers: int) -> Iterator[Dict[str, Any]]:
        """The batches of one (rank, worker) for the current epoch (``__iter__`` fills in the real ones)."""
        indices = partition(len(self.items), rank=rank, world_size=world_size, worker_id=worker_id,
                            num_workers=num_workers, shuffle=self.list_shuffle, seed=self.seed, epoch=self.epoch)
        rng = np.random.default_rng([self.seed, self.epoch, rank, worker_id])
        stats = {"skipped": 0}
        samples = self._processed(self._samples(indices, stats), rng, stats)
        if self.shuffle:
            samples = shuffle_buffer(samples, rng, int((self.conf.get("shuffle_conf") or {}).get("shuffle_size",
                                                                                                10000)))
        if self.sort:
            samples = sort_buffer(samples, int((self.conf.get("sort_conf") or {}).get("sort_size", 500)))
        total_skipped = 0
        pending: Optional[Dict[str, Any]] = None
        # One batch of look-ahead: a batch is handed out only once the next is formed, so the files skipped
        # after the last full batch still reach the caller through the final batch's num_skipped.
        for batch in make_batches(samples, self.conf.get("batch_conf")):
            if pending is not None:
                pending["num_skipped"], stats["skipped"] = stats["skipped"], 0
                total_skipped += pending["num_skipped"]
                yield pending
            pending = pad_batch(batch)
        if pending is not None:
            pending["num_skipped"], stats["skipped"] = stats["skipped"], 0
            total_skipped += pending["num_skipped"]
            yield pending
        total_skipped += stats["skipped"]
        log = logging.warning if total_skipped else logging.info
        log("epoch %d rank %d worker %d: %d bad audio files skipped in %s", self.epoch, rank, worker_id,
            total_skipped, self.data_list_file)
        if self.tokenizer is not None:
            self.tokenizer.log_unk_summary()


def init_dataset(data_type: str, data_list_file: str, tokenizer: Any, conf: Dict[str, Any],
                 partition: bool = True) -> AsrDataset:
    """WeNet's entry point: ``init_dataset('raw' | 'shard', list_file, tokenizer, dataset_conf, partition)``.

    Use with ``DataLoader(dataset, batch_size=None, num_workers=N)``; call ``dataset.set_epoch(e)`` each epoch.
    For cv/decoding pass a conf with ``shuffle: false``, ``sort: false`` and no speed_perturb/spec_* keys.
    """
    return AsrDataset(data_type=data_type, data_list_file=data_list_file, tokenizer=tokenizer, conf=conf,
                      partition=partition)
