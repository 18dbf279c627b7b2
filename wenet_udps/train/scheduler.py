"""Optimizers (``optim`` + ``optim_conf``) and learning-rate schedulers (``scheduler`` + ``scheduler_conf``)."""
import inspect
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


def warmup_shortfall(config: Mapping[str, Any], batches_per_epoch: int) -> Optional[str]:
    """Why a run may learn little, said before it trains: a ``warmuplr`` warm-up longer than the whole run keeps the
    learning rate rising throughout, so it never reaches ``optim_conf.lr`` (a 3-epoch trial of a conf made for 24
    decodes to nothing). ``batches_per_epoch``: the most one process makes
    (:func:`wenet_udps.dataset.processor.most_batches`). None when the warm-up ends within the run."""
    checked = _checked(config)
    if (checked.get("scheduler") or "warmuplr") != "warmuplr":
        return None
    default = inspect.signature(WarmupLR).parameters["warmup_steps"].default
    warmup = (checked.get("scheduler_conf") or {}).get("warmup_steps", default)
    max_epoch, accum_grad = int(config["max_epoch"]), int(config.get("accum_grad") or 1)
    steps = max_epoch * (batches_per_epoch // accum_grad)
    if steps >= warmup:
        return None
    return (f"scheduler_conf.warmup_steps {warmup:g} is more than the {steps} optimizer steps this run takes at most "
            f"(max_epoch {max_epoch} x {batches_per_epoch} batches / accum_grad {accum_grad}): the learning rate "
            f"rises for the whole run and ends at {steps / warmup:.0%} of optim_conf.lr, so the model may learn "
            f"little (empty hypotheses); train more epochs, or lower the warm-up (e.g. --train_override "
            f"scheduler_conf.warmup_steps={max(1, steps // 4)})")


def restore_with_config(optimizer: torch.optim.Optimizer, scheduler: LRScheduler,
                        state: Mapping[str, Any]) -> Dict[str, Any]:
    """Load a checkpoint's optimizer and scheduler ``state``, keeping the hyper-parameters of the config they were
    built from (an ``optim_conf.lr`` or ``scheduler_conf.warmup_steps`` changed for the resume is applied, not
    silently replaced by the checkpoint's). The moments, step counts and schedule position come from the checkpoint.

    Returns:
        ``{"optim_conf.<key>" / "scheduler_conf.<key>": (checkpoint value, applied value)}`` of what changed.
    """
    fresh_groups = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
    fresh_sched = {k: v for k, v in scheduler.state_dict().items() if not k.startswith("_") and k != "last_epoch"}
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    changed: Dict[str, Any] = {}
    for group, fresh in zip(optimizer.param_groups, fresh_groups):
        for key, value in fresh.items():
            if key not in ("lr", "initial_lr") and group.get(key) != value:
                changed[f"optim_conf.{key}"] = (group.get(key), value)
                group[key] = value
    for key, value in fresh_sched.items():
        old = getattr(scheduler, key, None)
        if old != value:
            name = "optim_conf.lr" if key == "base_lrs" else f"scheduler_conf.{key}"
            changed[name] = (old[0] if key == "base_lrs" else old, value[0] if key == "base_lrs" else value)
            setattr(scheduler, key, value)
    if changed:  # the lr of the restored step under the applied schedule
        for group, base, lr in zip(optimizer.param_groups, scheduler.base_lrs, scheduler.get_lr()):
            group["initial_lr"], group["lr"] = base, lr
        scheduler._last_lr = [g["lr"] for g in optimizer.param_groups]
    return changed
