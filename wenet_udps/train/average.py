"""Checkpoint averaging: WeNet's N-best-by-cv-loss / epoch-range average, and greedy soup.

Greedy soup (the paper author's recipe): candidates are ranked by their own dev metric (lower is better), the
soup starts as the best one, and candidates are then tried in rank order, a window of ``num_look`` at a time:
each candidate of the window is averaged (uniformly, with the current ingredients) and evaluated; the best
of them joins the soup only if its metric is strictly better than the soup's, and the others of the window stay
first in line for the next round. When none improves, the whole window is dropped. ``num_look == 1`` is the
classic greedy soup (each candidate tried once, in order).
"""
import logging
import os
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from wenet_udps.train.checkpoint import CheckpointError, load_checkpoint
from wenet_udps.train.checkpoint_files import list_checkpoints

Metric = Callable[[List[List[str]]], List[float]]


def average_state_dicts(paths: Sequence[str], verify: bool = True) -> Dict[str, torch.Tensor]:
    """Uniform average of the checkpoints' model weights (float tensors summed in float64; integer buffers,
    e.g. BatchNorm's num_batches_tracked, summed and floor-divided as WeNet does). Each checkpoint is verified
    against its YAML's SHA-256 unless ``verify`` is False."""
    if not paths:
        raise ValueError("no checkpoints to average")
    total: Optional[Dict[str, torch.Tensor]] = None
    for path in paths:
        state = load_checkpoint(path, verify=verify)["model"]
        if total is None:
            total = {k: v.detach().clone().to(torch.float64) if v.is_floating_point() else v.detach().clone()
                     for k, v in state.items()}
            dtypes = {k: v.dtype for k, v in state.items()}
            continue
        if set(state) != set(total):
            diff = sorted(set(state) ^ set(total))[:5]
            raise CheckpointError(f"{path} has different parameters from {paths[0]} (e.g. {diff})")
        for k, v in state.items():
            total[k] += v.to(total[k].dtype)
    n = len(paths)
    out = {}
    for k, v in total.items():
        out[k] = (v / n).to(dtypes[k]) if v.is_floating_point() else torch.div(v, n, rounding_mode="floor")
    return out


def epoch_checkpoints(src_path: str) -> List[Tuple[str, Dict]]:
    """``(epoch_N.pt, info)`` of every complete epoch checkpoint in ``src_path``, by epoch."""
    found = list_checkpoints(src_path, pattern=r"epoch_\d+")
    if not found:  # a user error (one line, exit 2), not a traceback: an empty folder, or WeNet's own .pt files
        bare = sorted(f for f in os.listdir(src_path) if f.endswith(".pt"))
        why = (f": its {len(bare)} .pt file(s) ({', '.join(bare[:3])}{' ...' if len(bare) > 3 else ''}) have no "
               f"epoch_N.yaml beside them (written by wenet_udps training: the epoch, cv_loss and SHA-256 that "
               f"averaging reads; checkpoints of another toolkit cannot be averaged here)" if bare else
               ": the folder holds no checkpoint (train first: run.sh --stage 4)")
        raise CheckpointError(f"no epoch_N.pt/epoch_N.yaml checkpoints in {src_path}{why}")
    return sorted(found, key=lambda item: int(item[1].get("epoch", -1)))


def select_checkpoints(src_path: str, num: int, *, val_best: bool = False, min_epoch: int = 0,
                       max_epoch: int = 1 << 30) -> List[str]:
    """WeNet's choice: the ``num`` lowest cv_loss checkpoints (``val_best``) or the last ``num`` epochs, among
    epochs in [min_epoch, max_epoch]."""
    found = [(p, i) for p, i in epoch_checkpoints(src_path) if min_epoch <= int(i.get("epoch", -1)) <= max_epoch]
    if val_best:
        scored = [(p, i) for p, i in found if i.get("cv_loss") is not None]
        found = sorted(scored, key=lambda item: float(item[1]["cv_loss"]))
    else:
        found = found[::-1]
    chosen = [p for p, _ in found[:num]]
    runs = {}
    for path, info in found[:num]:
        runs.setdefault(info.get("run_id"), []).append(os.path.basename(path))
    if len(runs) > 1:
        detail = "; ".join(f"run {run_id or '(none)'}: {', '.join(names)}" for run_id, names in runs.items())
        raise CheckpointError(f"{src_path}: the checkpoints to average come from {len(runs)} different runs "
                              f"({detail}); average checkpoints of one run only")
    if len(chosen) < num:
        # WeNet asserts this too: avg_N.pt must hold N checkpoints.
        what = "with a cv_loss " if val_best else ""
        raise CheckpointError(f"asked for {num} checkpoints, but only {len(chosen)} {what}in {src_path} match epochs "
                         f"{min_epoch}..{max_epoch}")
    return chosen


def greedy_soup(candidates: Sequence[str], evaluate: Metric, *, num_look: int = 1,
                individual: Optional[Mapping[str, float]] = None) -> Tuple[List[str], float, List[Dict]]:
    """Select soup ingredients (see the module docstring).

    Args:
        candidates: checkpoint paths.
        evaluate: maps a list of ingredient lists to their metrics (lower is better); called once per round,
            so an implementation may evaluate the lists in parallel.
        num_look: look-ahead window (candidates tried per round).
        individual: metrics of the candidates alone when already known (else they are evaluated).
    Returns:
        the ingredients (best candidate first), the soup's metric, and the history of rounds
        ``{"tried": [...], "metrics": [...], "added": path or None}``.
    """
    if not candidates:
        raise ValueError("greedy soup needs at least one candidate")
    if num_look < 1:
        raise ValueError(f"num_look must be >= 1, got {num_look}")
    if individual is None:
        individual = dict(zip(candidates, evaluate([[c] for c in candidates])))
    ranked = sorted(candidates, key=lambda c: individual[c])
    soup, best = [ranked[0]], individual[ranked[0]]
    logging.info("greedy soup: start from %s (metric %.4f)", os.path.basename(ranked[0]), best)
    pending = list(ranked[1:])
    history: List[Dict] = []
    while pending:
        window = pending[:num_look]
        metrics = evaluate([soup + [c] for c in window])
        i = min(range(len(window)), key=lambda j: metrics[j])
        added = None
        if metrics[i] < best:
            added = window[i]
            soup.append(added)
            best = metrics[i]
            pending.remove(added)
        else:
            pending = pending[len(window):]
        history.append({"tried": list(window), "metrics": list(metrics), "added": added})
        logging.info("greedy soup: tried %s -> %s; %s", [os.path.basename(w) for w in window],
                     [round(m, 4) for m in metrics],
                     f"added {os.path.basename(added)} (metric {best:.4f})" if added else "none improves")
    return soup, best, history
