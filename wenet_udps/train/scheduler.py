"""Optimizers (``optim`` + ``optim_conf``) and learning-rate schedulers (``scheduler`` + ``scheduler_conf``)."""
import inspect
from typing import Any, Dict, Iterable, Mapping

import torch
from torch.optim.lr_scheduler import LRScheduler

from wenet_udps.utils.registry import lookup


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


def _checked_kwargs(cls, conf: Mapping[str, Any], section: str, skip: Iterable[str]) -> Dict[str, Any]:
    """``conf`` as keyword arguments of ``cls``; an unknown key raises ValueError listing the valid ones."""
    params = inspect.signature(cls.__init__).parameters
    valid = sorted(n for n in params if n not in set(skip) | {"self"} and params[n].kind != params[n].VAR_KEYWORD)
    for key in conf:
        if key not in valid:
            raise ValueError(f"unknown {section} key {key!r} for {cls.__name__}; valid keys: {', '.join(valid)}")
    return dict(conf)


def build_optimizer(config: Mapping[str, Any], params) -> torch.optim.Optimizer:
    """``optim`` (adam | adamw) with ``optim_conf`` (lr, betas, weight_decay, ...)."""
    cls = lookup(OPTIMIZER_CLASSES, config.get("optim", "adam"), "optim")
    conf = _checked_kwargs(cls, config.get("optim_conf") or {}, "optim_conf", ("params",))
    if "betas" in conf:
        conf["betas"] = tuple(conf["betas"])
    return cls(params, **conf)


def build_scheduler(config: Mapping[str, Any], optimizer: torch.optim.Optimizer) -> LRScheduler:
    """``scheduler`` (warmuplr | constantlr) with ``scheduler_conf``."""
    cls = lookup(SCHEDULER_CLASSES, config.get("scheduler", "warmuplr"), "scheduler")
    conf = _checked_kwargs(cls, config.get("scheduler_conf") or {}, "scheduler_conf", ("optimizer", "last_epoch"))
    return cls(optimizer, **conf)
