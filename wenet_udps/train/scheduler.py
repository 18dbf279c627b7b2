"""Optimizers (``optim`` + ``optim_conf``) and learning-rate schedulers (``scheduler`` + ``scheduler_conf``)."""
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

import torch
from torch.optim.lr_scheduler import LRScheduler

from wenet_udps.utils.registry import lookup
from wenet_udps.utils.schema import call_with, check_section, route, section


class WarmupLR(LRScheduler):
    """WeNet's ``warmuplr``: lr = base_lr * warmup^0.5 * min(step^-0.5, step * warmup^-1.5).

    The lr rises linearly to ``base_lr`` at ``step == warmup_steps`` and then decays as step^-0.5. ``step`` counts
    optimizer steps from 1 (the first update uses step 1). ``warmup_steps: 0`` gives the pure step^-0.5 decay.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, *, warmup_steps: float = 25000, last_epoch: int = -1):
        if warmup_steps < 0:
            raise ValueError(f"scheduler_conf.warmup_steps must be >= 0, got {warmup_steps}")
        self.warmup_steps = warmup_steps
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        step = self.last_epoch + 1
        if self.warmup_steps == 0:
            factor = step ** -0.5
        else:
            factor = self.warmup_steps ** 0.5 * min(step ** -0.5, step * self.warmup_steps ** -1.5)
        return [base_lr * factor for base_lr in self.base_lrs]


class ConstantLR(LRScheduler):
    """``constantlr``: the base lr throughout (useful for fine-tuning and tests)."""

    def __init__(self, optimizer: torch.optim.Optimizer, *, last_epoch: int = -1):
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return list(self.base_lrs)


OPTIMIZER_CLASSES = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
SCHEDULER_CLASSES = {"warmuplr": WarmupLR, "constantlr": ConstantLR}


@dataclass
class OptimConfig:
    """The train.yaml keys of the optimizer and scheduler, with WeNet's defaults (filled into train.yaml)."""
    optim: str = "adam"
    optim_conf: Optional[dict] = section(choice="optim", registry=OPTIMIZER_CLASSES, supplied=("params",))
    scheduler: str = "warmuplr"
    scheduler_conf: Optional[dict] = section(choice="scheduler", registry=SCHEDULER_CLASSES,
                                             supplied=("optimizer", "last_epoch"))


# Written into train.yaml when the config leaves them out, so a run records what it used.
OPTIM_DEFAULTS = {"optim": "adam", "optim_conf": {"lr": 0.001}, "scheduler": "warmuplr",
                  "scheduler_conf": {"warmup_steps": 25000}}


def _checked(config: Mapping[str, Any]) -> Dict[str, Any]:
    return check_section(route(config, OptimConfig), OptimConfig, "")


def build_optimizer(config: Mapping[str, Any], params) -> torch.optim.Optimizer:
    """``optim`` (adam | adamw) with ``optim_conf`` (lr, betas, weight_decay, ...)."""
    checked = _checked(config)
    cls = lookup(OPTIMIZER_CLASSES, checked.get("optim") or "adam", "optim")
    return call_with(cls, checked.get("optim_conf"), "optim_conf", params=params)


def build_scheduler(config: Mapping[str, Any], optimizer: torch.optim.Optimizer) -> LRScheduler:
    """``scheduler`` (warmuplr | constantlr) with ``scheduler_conf``."""
    checked = _checked(config)
    cls = lookup(SCHEDULER_CLASSES, checked.get("scheduler") or "warmuplr", "scheduler")
    return call_with(cls, checked.get("scheduler_conf"), "scheduler_conf", supplied=("last_epoch",),
                     optimizer=optimizer)
