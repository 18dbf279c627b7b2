"""Checkpoints: ``<tag>.pt`` (model, optimizer, scheduler, scaler, RNG states) + ``<tag>.yaml`` (epoch, step, lr,
cv_loss, config), written atomically.

Atomic write (``wenet_udps.utils.atomic``): the bytes go to a hidden temp file in the same directory
(``.<name>.tmp.<pid>.<n><random>``), are fsync'ed, then ``os.replace``d onto the final name, and the directory is
fsync'ed; a crash leaves either the old file or the new one, plus perhaps a temp file that every reader here
ignores. The ``.pt`` is written before the ``.yaml``, so a tag whose YAML exists has a complete ``.pt``:
:mod:`wenet_udps.train.checkpoint_files` looks only at YAMLs.

Tags: ``epoch_N`` at the end of epoch N (0-based, as WeNet, and as every log line numbers epochs) and ``step_N``
every ``save_interval`` optimizer steps. ``final.pt`` is a copy-free hard link (a copy where links fail) of the last
epoch's checkpoint.

A checkpoint is data, not code: it is loaded with ``torch.load(weights_only=True)``, which builds only tensors and
plain containers, so a tampered file cannot run anything (it is refused with :class:`CheckpointError`). Everything a
resume needs is stored in such forms (the numpy RNG state as a tensor). The YAML records the ``.pt``'s SHA-256 and
the run id, so a resume can verify the file and averaging can refuse to mix runs.
"""
import hashlib
import io
import logging
import os
import pickle
import random
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import torch
import yaml

from wenet_udps.text.base_tokenizer import check_units
from wenet_udps.train.checkpoint_files import newest_first, read_info
from wenet_udps.utils.atomic import TMP_MARK, write_bytes
from wenet_udps.utils.cli import UserError, open_input, regular_file
from wenet_udps.utils.source_info import file_sha256

NO_VERIFY_FLAG = "--no_verify_checkpoint"


class CheckpointError(UserError):
    """A checkpoint that cannot be used: refused by the safe loader, unreadable, truncated or not a dict."""


def save_yaml(config: Mapping[str, Any], path: str) -> None:
    """Write ``config`` as YAML atomically (train.yaml, a checkpoint's yaml)."""
    write_bytes(path, yaml.safe_dump(dict(config), sort_keys=False, allow_unicode=True).encode("utf-8"))


def seed_all(seed: int) -> None:
    """Seed Python's, numpy's and torch's global generators."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> Dict[str, Any]:
    """Python, numpy and torch (CPU and, when present, CUDA) random states, in forms the safe loader accepts
    (the numpy key array as an int64 tensor)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"python": random.getstate(), "torch": torch.get_rng_state(),
             "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def gather_rng_states(distributed: bool, world_size: int) -> List[Dict[str, Any]]:
    """Every rank's RNG state (rank order), so each rank resumes its own dropout stream (a collective)."""
    state = rng_state()
    if not distributed:
        return [state]
    states: List[Any] = [None] * world_size
    torch.distributed.all_gather_object(states, state)
    return states


def set_rank_rng_state(states: List[Mapping[str, Any]], rank: int, world_size: int) -> None:
    """Restore this rank's state of :func:`gather_rng_states` (rank 0's when the world size changed)."""
    if len(states) != world_size:
        logging.warning("checkpoint has RNG states of %d ranks, this run has %d; using rank 0's",
                        len(states), world_size)
    set_rng_state(states[rank] if len(states) == world_size else states[0])


def save_checkpoint(model_dir: str, tag: str, state: Mapping[str, Any], info: Mapping[str, Any]) -> str:
    """Write ``<model_dir>/<tag>.pt`` (``state``) then ``<tag>.yaml`` (``info``); returns the .pt path."""
    path = os.path.join(model_dir, f"{tag}.pt")
    write_checkpoint(path, state, info)
    return path


def write_checkpoint(path: str, state: Mapping[str, Any], info: Mapping[str, Any]) -> None:
    """Write ``path`` (``state``), then its :func:`sidecar` YAML: ``info`` plus the file's SHA-256."""
    buf = io.BytesIO()
    torch.save(dict(state), buf)
    data = buf.getvalue()
    info = {**dict(info), "sha256": hashlib.sha256(data).hexdigest()}
    try:
        write_bytes(path, data)
    except OSError as e:  # a full disk, most often: write_bytes left every earlier file as it was
        raise CheckpointError(f"{path} not saved ({e.strerror or e}); every checkpoint saved before is intact "
                              f"(each is written to a temporary file first, then renamed)") from e
    try:
        save_yaml(info, sidecar(path))
    except OSError as e:  # without its .yaml the new file cannot be verified: remove it, keep the earlier ones
        os.unlink(path)
        raise CheckpointError(f"{sidecar(path)} not saved ({e.strerror or e}); {path} removed with it, every "
                              f"checkpoint saved before is intact") from e


def sidecar(pt_path: str) -> str:
    """The YAML that describes a checkpoint: ``epoch_3.pt`` -> ``epoch_3.yaml``."""
    return os.path.splitext(pt_path)[0] + ".yaml"


def verify_checkpoint(pt_path: str, info: Mapping[str, Any]) -> None:
    """CheckpointError unless ``pt_path`` has the SHA-256 its YAML recorded (when it recorded one)."""
    expected = info.get("sha256")
    if expected and file_sha256(pt_path) != expected:
        raise CheckpointError(f"{pt_path} does not match the SHA-256 in {os.path.basename(sidecar(pt_path))} "
                              f"(truncated or modified); pass {NO_VERIFY_FLAG} to load it anyway")


def add_verify_flag(parser: Any) -> None:
    """The opt-out of :func:`load_checkpoint`'s SHA-256 check, the same on every program that loads one."""
    parser.add_argument(NO_VERIFY_FLAG, dest="verify_checkpoint", action="store_false",
                        help="load a checkpoint whose SHA-256 does not match the one recorded in its .yaml")


def link_final(model_dir: str, src: str, name: str = "final.pt") -> str:
    """Point ``<model_dir>/final.pt`` (and ``final.yaml``) at ``src`` and its YAML (hard links; copies where the file
    system has none), atomically."""
    dst = os.path.join(model_dir, name)
    for source, target in ((src, dst), (sidecar(src), sidecar(dst))):
        if not os.path.isfile(source):
            continue
        tmp = os.path.join(model_dir, f".{os.path.basename(target)}{TMP_MARK}{os.getpid()}")
        try:
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.link(source, tmp)
            os.replace(tmp, target)
        except OSError:
            with open_input(source, "rb") as f:
                write_bytes(target, f.read())
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
    return dst


def load_checkpoint(path: str, map_location: str = "cpu", *, verify: bool = True,
                    units: Optional[str] = None) -> Dict[str, Any]:
    """Load a checkpoint dict with the safe loader; a bare state dict (WeNet's epoch_N.pt, or ``average_model``'s
    output) comes back as ``{"model": state_dict}``. A temp file is refused (it may be partial).

    Every load (train, recognize, export, average_model) checks the file against its YAML (:func:`sidecar`): the
    SHA-256 recorded there (skipped with ``verify=False``, the programs' ``--no_verify_checkpoint``; a checkpoint
    without a record is loaded with a warning) and, given ``units`` (the units file this load will use), the units
    file recorded there.

    Raises:
        FileNotFoundError: no such file.
        CheckpointError: a temp file, a SHA-256 mismatch, a file holding anything but tensors and plain containers
            (e.g. a pickled callable: refused before anything runs), or an unreadable/truncated one.
        UnitsError: ``units`` is not the units file the checkpoint was trained with (naming both).
    """
    if TMP_MARK in os.path.basename(path):
        raise CheckpointError(f"{path} is a temporary file of an interrupted save, not a checkpoint")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    info = read_info(sidecar(path)) if os.path.isfile(sidecar(path)) else None
    if verify and info and info.get("sha256"):
        verify_checkpoint(path, info)
    elif verify:
        logging.warning("%s: no SHA-256 recorded (no %s); loading it unverified", path,
                        os.path.basename(sidecar(path)))
    if units and info:
        check_units(info.get("units"), units, path)
    try:
        obj = torch.load(regular_file(path, "checkpoint"), map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"{path}: refused: it holds objects other than tensors and plain containers, which "
                              f"could run code when loaded ({first})") from None
    except (RuntimeError, EOFError, OSError, ValueError) as e:
        raise CheckpointError(f"{path}: unreadable or truncated checkpoint ({e})") from None
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: expected a checkpoint dict, got {type(obj).__name__}")
    if "model" in obj and isinstance(obj["model"], dict):
        return obj
    return {"model": obj}


def load_model_state(model: torch.nn.Module, path: str, *, verify: bool = True,
                     units: Optional[str] = None) -> Dict[str, Any]:
    """Load ``path``'s weights into ``model`` (strict; missing/unexpected keys are named) and return the checkpoint
    (checked as :func:`load_checkpoint` does)."""
    ckpt = load_checkpoint(path, verify=verify, units=units)
    fit_weights(model, ckpt["model"], path)
    return ckpt


def fit_weights(model: torch.nn.Module, state: Mapping[str, Any], path: Optional[str]) -> None:
    """``state`` into ``model``; CheckpointError naming ``path`` when keys or shapes differ (another vocabulary or
    architecture than the config's)."""
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as e:  # a shape mismatch
        lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
        raise CheckpointError(f"{path} does not fit the model: {lines[1] if len(lines) > 1 else lines[0]}") from None
    if missing or unexpected:
        raise CheckpointError(f"{path} does not fit the model: missing keys {missing[:5]}{'...' if len(missing) > 5 else ''}"
                         f", unexpected keys {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}")


def load_newest_valid(model_dir: str, units: Optional[str] = None) -> Tuple[Optional[str], Dict[str, Any]]:
    """``(path, checkpoint)`` of the newest checkpoint that verifies and loads; a broken one is skipped with a
    warning naming it and the next older one is tried. ``(None, {})`` when there is none. ``units``: as in
    :func:`load_checkpoint`."""
    for path, _ in newest_first(model_dir):
        try:
            return path, load_checkpoint(path, units=units)
        except CheckpointError as e:
            logging.warning("skipping checkpoint %s: %s; trying an older one", os.path.basename(path), e)
    return None, {}
