"""TensorBoard scalars with the tags of docs/design.md (read back by tools/collect_results.py).

train/loss, train/loss_ctc, train/loss_att, train/lr, train/grad_norm, train/frames_per_sec (per log interval,
x = optimizer step); cv/loss, cv/loss_ctc, cv/loss_att (per epoch, x = epoch); udps/<param> (mean over heads of
the effective scale) and udps/<param>/h<i> (per head) for UDPS models (per log interval, x = optimizer step);
train_epoch/loss, train_epoch/loss_ctc, train_epoch/loss_att and udps_epoch/<param>[/h<i>] once per epoch (x = epoch),
so a run shorter than log_interval still has curves.
"""
from typing import Dict, Mapping, Optional

import torch

TRAIN_TAGS = ("loss", "loss_ctc", "loss_att", "lr", "grad_norm", "frames_per_sec")
CV_TAGS = ("loss", "loss_ctc", "loss_att")


class TensorboardLogger:
    """Wraps ``SummaryWriter``; ``log_dir=None`` (non-zero ranks) makes every call a no-op."""

    def __init__(self, log_dir: Optional[str]):
        self.writer = None
        if log_dir:
            from torch.utils.tensorboard import SummaryWriter
            self.writer = SummaryWriter(log_dir)

    def train(self, step: int, values: Mapping[str, Optional[float]]) -> None:
        if self.writer is None:
            return
        for tag in TRAIN_TAGS:
            if values.get(tag) is not None:
                self.writer.add_scalar(f"train/{tag}", values[tag], step)

    def cv(self, epoch: int, values: Mapping[str, Optional[float]]) -> None:
        if self.writer is None:
            return
        for tag in CV_TAGS:
            if values.get(tag) is not None:
                self.writer.add_scalar(f"cv/{tag}", values[tag], epoch)

    def udps(self, step: int, scales: Dict[str, torch.Tensor], prefix: str = "udps") -> None:
        if self.writer is None:
            return
        for name, value in scales.items():
            value = value.detach().float().reshape(-1).cpu()
            self.writer.add_scalar(f"{prefix}/{name}", float(value.mean()), step)
            if value.numel() > 1:
                for i, v in enumerate(value.tolist()):
                    self.writer.add_scalar(f"{prefix}/{name}/h{i}", v, step)

    def epoch(self, epoch: int, train_losses: Mapping[str, Optional[float]], scales: Dict[str, torch.Tensor]) -> None:
        """Per-epoch train losses and UDPS scales."""
        if self.writer is None:
            return
        for tag in CV_TAGS:
            if train_losses.get(tag) is not None:
                self.writer.add_scalar(f"train_epoch/{tag}", train_losses[tag], epoch)
        self.udps(epoch, scales, prefix="udps_epoch")

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
