"""Experiment-directory protection: one run at a time, and no run silently overwrites another's checkpoints.

- Lock: the training process (rank 0) holds an exclusive ``flock`` on ``<model_dir>/.lock``, which holds its pid.
  A second run on the same directory is refused, naming that pid. The kernel drops the lock when the process dies
  (even by ``kill -9``), so a stale lock file never blocks a later run.
- Run id: every checkpoint records the id of the run that wrote it (a resumed run keeps its id). A new run refuses
  a directory that holds checkpoints, unless it resumes that run (``--checkpoint`` of the same run id, or
  ``--checkpoint auto``) or ``--force`` is given, which deletes them first; so ``average_model`` never mixes runs.
- One timeline: a run resumed from an earlier checkpoint (``--checkpoint epoch_3.pt`` of a run that went further)
  moves the checkpoints past it (and ``final.pt``) into ``<model_dir>/abandoned_<time>/``, so neither
  ``--checkpoint auto`` nor ``average_model`` can return to the abandoned timeline.
- What a removed checkpoint invalidates: the averages made from it go with it (to ``abandoned_<time>/``), and so
  every result decoded with them is left out of the results table (``retire_averages``); ``--force`` moves the
  previous run's TensorBoard events there too. ``average_model`` never
  writes over a training checkpoint (``check_derived_output``).
"""
import fcntl
import glob
import logging
import os
import re
import time
from typing import List, Optional, Set

from wenet_udps.train.checkpoint import sidecar
from wenet_udps.train.checkpoint_files import list_checkpoints, read_info
from wenet_udps.utils.cli import UserError

LOCK_NAME = ".lock"
_OWNED = re.compile(r"(epoch|step)_\d+\.(pt|yaml)|final\.(pt|yaml)")


class RunDirError(UserError):
    """The experiment directory is in use or holds another run."""


class RunLock:
    """An exclusive lock on ``<model_dir>/.lock`` for this process's lifetime (see the module docstring)."""

    def __init__(self, model_dir: str):
        self.path = os.path.join(model_dir, LOCK_NAME)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self.fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(self.fd)
            raise RunDirError(f"{model_dir} is in use by another training run (pid {holder}); wait for it or use "
                              f"another --model_dir") from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode("ascii"), 0)

    def release(self) -> None:
        if self.fd >= 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1


def owned_files(model_dir: str) -> List[str]:
    """The checkpoint files of ``model_dir`` (epoch_N / step_N .pt and .yaml, final.pt)."""
    return sorted(p for p in glob.glob(os.path.join(model_dir, "*")) if _OWNED.fullmatch(os.path.basename(p)))


def check_derived_output(path: str, option: str) -> None:
    """RunDirError unless ``path`` (and its .yaml) can take a model derived from checkpoints (an average, a soup)
    without destroying one: a training checkpoint's name (``epoch_N.pt``, ``step_N.pt``, ``final.pt``) would be
    replaced and then read by ``--checkpoint auto`` and averaging as part of the run, and a .yaml that is not a
    checkpoint's record (``train.pt`` -> the experiment's ``train.yaml``) would be overwritten."""
    record = sidecar(path)
    if _OWNED.fullmatch(os.path.basename(path)):
        raise RunDirError(f"{option} {path}: that is the name of a training checkpoint, which it would replace; "
                          f"name the output e.g. avg_N.pt")
    if os.path.isfile(record):
        info = read_info(record) or {}
        if "sha256" not in info:
            raise RunDirError(f"{option} {path}: its record {record} would overwrite a file that is not a "
                              f"checkpoint's .yaml; choose another name")
        if "averaged" not in info:
            raise RunDirError(f"{option} {path}: {record} records a training checkpoint (no 'averaged' list), "
                              f"which it would replace; choose another name")


def run_ids(model_dir: str) -> Set[Optional[str]]:
    """The run ids recorded by the checkpoints of ``model_dir`` (None for one without, e.g. WeNet's)."""
    return {info.get("run_id") for _, info in list_checkpoints(model_dir)}


def claim(model_dir: str, resume_run_id: Optional[str], force: bool) -> None:
    """Refuse to write into a directory holding another run's checkpoints (see the module docstring).

    Args:
        resume_run_id: the run id of the checkpoint this run resumes (None: a new run).
        force: delete the other run's checkpoint files instead of refusing.
    """
    files = owned_files(model_dir)
    if not files:
        return
    ids = run_ids(model_dir)
    if resume_run_id is not None and ids <= {resume_run_id}:
        return
    if not force:
        names = ", ".join(os.path.basename(f) for f in files[:4]) + (", ..." if len(files) > 4 else "")
        raise RunDirError(f"{model_dir} holds checkpoints of another run ({names}); resume it with --checkpoint "
                          f"auto, or pass --force to delete them, or use another --model_dir")
    logging.warning("--force: deleting %d checkpoint files of the previous run in %s", len(files), model_dir)
    for f in files:
        os.unlink(f)
    retire_averages(model_dir, files)
    # Its TensorBoard events too: the loss plots merge every event file of the dir (tools/collect_results.py).
    events = os.path.join(model_dir, "tensorboard")
    if os.path.isdir(events):
        dest = os.path.join(_abandoned_dir(model_dir), "tensorboard")
        os.replace(events, dest)
        logging.warning("--force: moved the previous run's TensorBoard events to %s", dest)


def retire_averages(model_dir: str, gone: List[str]) -> List[str]:
    """Move the averages (and soups) of ``model_dir`` made from any of the checkpoint files ``gone`` (deleted or
    moved away) into ``<model_dir>/abandoned_<time>/``, with their .yaml, .stamp and .soup.yaml: they are models
    of a run that no longer exists, and the new run's checkpoints take the same names. The results decoded with
    them then name a missing checkpoint, which tools/collect_results.py leaves out (wenet_udps.utils.source_info).
    Returns the moved files."""
    gone_abs = {os.path.abspath(g) for g in gone}
    stale = [pt for pt in glob.glob(os.path.join(model_dir, "*.pt"))
             if gone_abs & set((read_info(sidecar(pt)) or {}).get("averaged") or ())]
    moved = []
    if stale:
        dest = _abandoned_dir(model_dir)
        for pt in stale:
            for path in (pt, sidecar(pt), pt + ".stamp", pt + ".soup.yaml"):
                if os.path.isfile(path):
                    os.replace(path, os.path.join(dest, os.path.basename(path)))
                    moved.append(os.path.basename(path))
        logging.warning("moved %d files of averages made from the retired checkpoints (%s) to %s", len(moved),
                        ", ".join(sorted(moved)), dest)
    return moved


def _abandoned_dir(model_dir: str) -> str:
    dest = os.path.join(model_dir, time.strftime("abandoned_%Y%m%d_%H%M%S"))
    os.makedirs(dest, exist_ok=True)
    return dest


def retire_later(model_dir: str, step: int) -> List[str]:
    """Move the checkpoints of ``model_dir`` with more than ``step`` optimizer steps, and ``final.pt`` when it is one
    of them, into ``<model_dir>/abandoned_<time>/`` (see the module docstring); returns the moved files."""
    later = [pt for pt, info in list_checkpoints(model_dir) if int(info.get("step", 0)) > step]
    final = os.path.join(model_dir, "final.pt")
    final_info = read_info(sidecar(final)) if os.path.isfile(sidecar(final)) else None
    if os.path.isfile(final) and (final_info is None or int(final_info.get("step", 0)) > step):
        later.append(final)
    if not later:
        return []
    dest = _abandoned_dir(model_dir)
    moved = []
    for pt in later:
        for path in (pt, sidecar(pt)):
            if os.path.isfile(path):
                os.replace(path, os.path.join(dest, os.path.basename(path)))
                moved.append(os.path.basename(path))
    logging.warning("resuming at step %d: moved %d files of the abandoned later timeline (%s) to %s", step,
                    len(moved), ", ".join(sorted(moved)), dest)
    return moved + retire_averages(model_dir, later)
