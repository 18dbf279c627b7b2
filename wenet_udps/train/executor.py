"""The training loop: one epoch of updates, the cross-validation pass, step-based checkpoints.

Distributed (DDP) rules:
- Unequal batch counts: before every batch all ranks all-reduce a "has a batch" flag (MIN) and the epoch ends for
  everybody at the first rank that has run out (a rank's extra batch, at most one or two per epoch since the data
  partition differs by at most one list item per rank, is unused that epoch). We chose this over DDP's ``join()``
  because the loop runs its own collectives (the skip flag below), which ``join()`` does not shadow.
- Non-finite batch: features are checked before the forward and the loss after it; the flag is all-reduced (MAX)
  so every rank skips the batch together. A skipped batch leaves no trace: no backward, no optimizer or GradScaler
  step, and the BatchNorm running statistics its forward changed are restored from a snapshot. A non-finite
  gradient norm is computed from the already all-reduced gradients, so every rank sees the same value and skips
  the same update. A non-finite cv loss is an error (the model is broken; continuing would hide it).
- Data counts: every item's ``stats`` (used / skipped per reason, see ``wenet_udps.dataset.DataTally``) are summed
  over DataLoader workers, then over ranks (SUM), once per pass.
- Gradient accumulation (``accum_grad``): micro-batches run under ``no_sync()`` except the last one of each
  window. Gradients of an incomplete window at the end of an epoch are dropped (their micro-batches were not
  synchronised).
- Only rank 0 logs, writes TensorBoard and checkpoints.
"""
import contextlib
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

import torch
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.parallel import DistributedDataParallel

from wenet_udps.dataset.dataset import DataTally
from wenet_udps.train.distributed import DistInfo, all_reduce_max, all_reduce_min, all_reduce_sum
from wenet_udps.train.tensorboard import TensorboardLogger
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.schema import check_section, defaults_of, route

AMP_DTYPES = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}
LOSS_KEYS = ("loss", "loss_ctc", "loss_att")
BATCH_KEYS = ("feats", "feats_lengths", "target", "target_lengths")


@dataclass
class TrainLoopConfig:
    """The train.yaml keys of the training loop, with WeNet's defaults (filled into train.yaml). ``seed`` seeds
    the model initialisation and dropout (``dataset_conf.seed`` the data order)."""
    accum_grad: int = 1
    grad_clip: float = 50.0
    log_interval: int = 100
    max_epoch: int = 100
    save_interval: int = 0
    seed: int = 777


class NonFiniteCvLoss(UserError):
    """The cross-validation loss is NaN/Inf: the model is broken."""


@dataclass
class EpochStats:
    """What one epoch did (summed over ranks where noted)."""
    batches: int = 0
    steps: int = 0
    skipped_batches: int = 0          # non-finite features, loss or gradient (all ranks agree)
    overflow_steps: int = 0           # fp16 steps the GradScaler skipped (inf gradients while calibrating)
    data: DataTally = field(default_factory=DataTally)  # utterances used/skipped, summed over workers and ranks
    losses: Dict[str, float] = field(default_factory=dict)


def _value(x: Optional[torch.Tensor]) -> Optional[float]:
    return None if x is None else float(x.detach())


@torch.no_grad()
def loss_sums(model: torch.nn.Module, batches: Iterable[Mapping[str, Any]],
              to_device: Callable[[Mapping[str, Any]], Tuple[torch.Tensor, ...]] = lambda b: tuple(
                  b[k] for k in BATCH_KEYS),
              autocast: Callable[[], Any] = contextlib.nullcontext) -> Tuple[Dict, Dict, int, str]:
    """Utterance-weighted loss sums of ``model`` (in eval mode) over ``batches``: the cv loss of training and of
    the greedy soup. Returns (sums, utterance counts) per ``LOSS_KEYS`` entry, the number of batches skipped for a
    NaN/Inf loss and the first key of the first such batch."""
    sums = {k: 0.0 for k in LOSS_KEYS}
    nums = {k: 0 for k in LOSS_KEYS}
    bad_batches, first_bad = 0, ""
    for batch in batches:
        feats, feats_lens, target, target_lens = to_device(batch)
        with autocast():
            out = model(feats, feats_lens, target, target_lens)
        values = {k: _value(out.get(k)) for k in LOSS_KEYS}
        if not all(math.isfinite(v) for v in values.values() if v is not None):
            bad_batches += 1
            first_bad = first_bad or batch["keys"][0]
            continue
        for k, v in values.items():
            if v is not None:
                sums[k] += v * feats.size(0)
                nums[k] += feats.size(0)
    return sums, nums, bad_batches, first_bad


class Executor:
    """Owns the model (DDP-wrapped or not), optimizer, scheduler and scaler for the whole run.

    Args:
        model: the module to train (``DistributedDataParallel`` under DDP).
        optimizer, scheduler: from :mod:`wenet_udps.train.scheduler`.
        config: the finished train.yaml dict (accum_grad, grad_clip, log_interval, save_interval).
        device: where batches go.
        dist_info: rank/world size.
        dtype: fp32 | fp16 (autocast + GradScaler) | bf16 (autocast).
        tb: TensorBoard logger (no-op off rank 0).
        save_fn: ``save_fn(tag, epoch, batch_in_epoch, cv_loss)``, called every ``save_interval`` steps (rank 0).
        step: optimizer steps done before this run (resume).
    """

    def __init__(self, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
                 config: Mapping[str, Any], device: torch.device, dist_info: DistInfo, dtype: str = "fp32",
                 tb: Optional[TensorboardLogger] = None, save_fn: Optional[Callable[..., None]] = None,
                 step: int = 0):
        if dtype not in AMP_DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; valid: {', '.join(AMP_DTYPES)}")
        self.model = model
        self.raw_model = model.module if isinstance(model, DistributedDataParallel) else model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.device = device
        self.dist = dist_info
        self.dtype = dtype
        self.amp_dtype = AMP_DTYPES[dtype]
        self.scaler = torch.amp.GradScaler(device.type, enabled=dtype == "fp16")
        self.tb = tb or TensorboardLogger(None)
        self.save_fn = save_fn
        self.step = step
        loop = {**defaults_of(TrainLoopConfig), **check_section(route(config, TrainLoopConfig), TrainLoopConfig, "")}
        self.accum_grad = loop["accum_grad"]
        self.grad_clip = loop["grad_clip"]
        self.log_interval = max(1, loop["log_interval"])
        self.save_interval = loop["save_interval"]
        self.max_epoch = loop["max_epoch"]
        if self.accum_grad < 1:
            raise ValueError(f"accum_grad must be >= 1, got {self.accum_grad}")
        self.batches_per_epoch: Optional[int] = None

    def _autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

    def _to_device(self, batch: Mapping[str, Any]):
        # non_blocking: the DataLoader pins batches on CUDA, so the copies overlap the previous step's kernels.
        return tuple(batch[k].to(self.device, non_blocking=True) for k in BATCH_KEYS)

    def _norm_buffers(self) -> List[torch.Tensor]:
        """BatchNorm running statistics: a forward in train mode updates them, even for a batch then skipped.
        Found once per epoch: walking the modules every step cost 0.7 ms of host time a step (the AN4 Conformer's
        261 modules, docs/gpu_report.md), a few % of a small model's step on a GPU."""
        return [b for m in self.raw_model.modules() if isinstance(m, _BatchNorm) for b in m.buffers()]

    def _bad(self, bad: bool) -> bool:
        """``bad`` on any rank (all ranks agree on the result)."""
        if self.dist.distributed:
            return all_reduce_max(1.0 if bad else 0.0, self.device) > 0.0
        return bad

    def _next_batch(self, it) -> Optional[Dict[str, Any]]:
        """The next batch, or None when this rank or (under DDP) any rank has none left."""
        batch = next(it, None)
        if self.dist.distributed:
            if all_reduce_min(0.0 if batch is None else 1.0, self.device) == 0.0:
                if batch is not None:
                    logging.info("rank %d: another rank ran out of batches; ending the epoch", self.dist.rank)
                return None
        return batch

    def _optimizer_step(self, stats: EpochStats) -> Optional[float]:
        """Unscale, clip, and step unless the gradient norm is not finite; returns the norm (None if skipped)."""
        self.scaler.unscale_(self.optimizer)
        max_norm = self.grad_clip if self.grad_clip > 0 else math.inf
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.raw_model.parameters(), max_norm))
        finite = math.isfinite(grad_norm)
        if self.dist.distributed:
            # Gradients are all-reduced, so the norm agrees already; the flag makes that explicit and cheap.
            finite = all_reduce_max(0.0 if finite else 1.0, self.device) == 0.0
        if not finite:
            if self.dtype == "fp16":
                stats.overflow_steps += 1
                self.scaler.step(self.optimizer)  # records the skip for update(), does not step
                self.scaler.update()
            else:
                stats.skipped_batches += 1
                logging.warning("step %d: gradient norm is %s; update skipped", self.step + 1, grad_norm)
            self.optimizer.zero_grad(set_to_none=True)
            return None
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        return grad_norm

    def train_epoch(self, loader: Iterable[Dict[str, Any]], epoch: int, start_batch: int = 0) -> EpochStats:
        """Train one epoch; ``start_batch`` batches are read and dropped first (resume from a step checkpoint:
        the data order is a function of seed and epoch, so the rest of the epoch is what it would have been)."""
        self.model.train()
        stats = EpochStats(batches=start_batch)
        sums = {k: 0.0 for k in LOSS_KEYS}
        counts = {k: 0 for k in LOSS_KEYS}
        interval = {"frames": 0, "t0": time.time(), "losses": {k: [] for k in LOSS_KEYS}, "grad_norm": []}
        it = stats.data.batches(loader)
        norm_buffers = self._norm_buffers()  # the tensors BatchNorm updates in place, the same all epoch
        for _ in range(start_batch):
            if self._next_batch(it) is None:
                break
        self.optimizer.zero_grad(set_to_none=True)
        while True:
            batch = self._next_batch(it)
            if batch is None:
                break
            boundary = (stats.batches + 1) % self.accum_grad == 0
            stats.batches += 1
            feats, feats_lens, target, target_lens = self._to_device(batch)
            if self._bad(not bool(torch.isfinite(feats).all())):
                stats.skipped_batches += 1
                logging.warning("epoch %d batch %d (%s...): features are not finite on some rank; batch skipped",
                                epoch, stats.batches, batch["keys"][0])
                continue
            sync = boundary or not self.dist.distributed
            ctx = contextlib.nullcontext() if sync else self.model.no_sync()
            with ctx:
                norm_state = [b.clone() for b in norm_buffers]
                with self._autocast():
                    out = self.model(feats, feats_lens, target, target_lens)
                loss = out["loss"]
                if self._bad(not bool(torch.isfinite(loss.detach()).all())):
                    with torch.no_grad():
                        for buf, saved in zip(norm_buffers, norm_state):
                            buf.copy_(saved)
                    stats.skipped_batches += 1
                    logging.warning("epoch %d batch %d (%s...): loss is not finite on some rank; batch skipped",
                                    epoch, stats.batches, batch["keys"][0])
                    continue
                self.scaler.scale(loss / self.accum_grad).backward()
            for k in LOSS_KEYS:
                v = _value(out.get(k))
                if v is not None:
                    sums[k] += v
                    counts[k] += 1
                    interval["losses"][k].append(v)
            interval["frames"] += int(batch["feats_lengths"].sum())
            if not boundary:
                continue
            grad_norm = self._optimizer_step(stats)
            if grad_norm is None:
                continue
            stats.steps += 1
            interval["grad_norm"].append(grad_norm)
            if self.step % self.log_interval == 0:
                self._log_interval(epoch, stats, interval)
            if self.save_interval > 0 and self.step % self.save_interval == 0 and self.save_fn is not None:
                self.save_fn(f"step_{self.step}", epoch, stats.batches, None)
        self.optimizer.zero_grad(set_to_none=True)
        for _ in it:  # batches left when another rank ran out: unused, but their counts belong to the epoch
            pass
        stats.data.set_list(all_reduce_sum(stats.data.as_list(), self.device))
        stats.losses = {k: sums[k] / counts[k] for k in LOSS_KEYS if counts[k]}
        self.batches_per_epoch = stats.batches
        return stats

    def _log_interval(self, epoch: int, stats: EpochStats, interval: Dict[str, Any]) -> None:
        elapsed = max(time.time() - interval["t0"], 1e-9)
        values: Dict[str, Optional[float]] = {
            k: (sum(v) / len(v) if v else None) for k, v in interval["losses"].items()}
        values["lr"] = self.optimizer.param_groups[0]["lr"]
        values["grad_norm"] = sum(interval["grad_norm"]) / len(interval["grad_norm"])
        values["frames_per_sec"] = interval["frames"] / elapsed
        if self.dist.is_main:
            self.tb.train(self.step, values)
            self.tb.udps(self.step, self.raw_model.udps_scales())
            total = f"/{self.batches_per_epoch}" if self.batches_per_epoch else ""
            parts = [f"{k} {values[k]:.4f}" for k in LOSS_KEYS if values[k] is not None]
            logging.info("Epoch %d | batch %d%s | step %d | %s | lr %.3e | grad_norm %.3f | %.0f frames/s | "
                         "skipped %d", epoch, stats.batches, total, self.step, " ".join(parts),
                         values["lr"], values["grad_norm"], values["frames_per_sec"], stats.skipped_batches)
        interval["frames"] = 0
        interval["t0"] = time.time()
        interval["losses"] = {k: [] for k in LOSS_KEYS}
        interval["grad_norm"] = []

    def cv(self, loader: Iterable[Dict[str, Any]], epoch: int) -> Tuple[Dict[str, Optional[float]], DataTally]:
        """Utterance-weighted mean losses over the cv set (all ranks' shares combined) and its data counts.

        Raises:
            NonFiniteCvLoss: a cv batch gave a NaN/Inf loss (on any rank), naming ``epoch``.
        """
        self.raw_model.eval()
        tally = DataTally()
        sums, nums, bad_batches, first_bad = loss_sums(self.raw_model, tally.batches(loader), self._to_device,
                                                       self._autocast)
        flat = all_reduce_sum([sums[k] for k in LOSS_KEYS] + [nums[k] for k in LOSS_KEYS] + [bad_batches]
                              + tally.as_list(), self.device)
        n_keys = len(LOSS_KEYS)
        tally.set_list(flat[2 * n_keys + 1:])
        self.raw_model.train()
        if flat[2 * n_keys]:
            raise NonFiniteCvLoss(f"epoch {epoch}: the cv loss is not finite on {int(flat[2 * n_keys])} batches"
                                  f"{f' (first: {first_bad}...)' if first_bad else ''}; the model is broken")
        result: Dict[str, Optional[float]] = {}
        for i, k in enumerate(LOSS_KEYS):
            num = flat[n_keys + i]
            result[k] = flat[i] / num if num else None
        return result, tally
