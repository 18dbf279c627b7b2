"""What a resumed run must share with the run it resumes: its data and its conf (issue 47, case 13).

Every checkpoint's YAML records the effective config (``config``), the data it trained on (``data``: each list's
path and SHA-256) and the precision and process count it ran with (``dtype``, ``world_size``). A resume is compared
with that record; a difference is refused, naming each key with both values, unless ``--force``, which goes on and
records the differences (``resume_changes``: epoch, step and the list) in every later checkpoint's YAML, so the
record never reads as if the run had always had them. Optimizer and schedule settings (``optim_conf.*``,
``scheduler_conf.*``) may change without ``--force``: a resume applies them on purpose
(``scheduler.restore_with_config``); they are recorded alike. ``max_epoch`` may change (``MAY_CHANGE``): raised, the
run trains on from its newest checkpoint (extending a finished run, WeNet's usual way); lowered, ``final.pt`` points
at epoch ``max_epoch - 1``. run.sh's stage 4 asks this same check (``bin.train --check_resume``) before it trains.
"""
import logging
from typing import Any, Dict, List, Mapping, Optional, Tuple

from wenet_udps.train.checkpoint import sidecar
from wenet_udps.train.checkpoint_files import read_info
from wenet_udps.train.run_dir import RunDirError
from wenet_udps.utils.source_info import file_sha256

# Keys a resume may change without changing what the run learns: a longer run, other logging or saving intervals,
# and paths whose contents are checked elsewhere (the units by their fingerprint when the checkpoint loads).
MAY_CHANGE = frozenset({"max_epoch", "log_interval", "save_interval", "tokenizer_conf.symbol_table_path"})
APPLIED_ON_RESUME = ("optim_conf.", "scheduler_conf.")


def data_record(train_data: str, cv_data: str, cmvn: Optional[str] = None) -> Dict[str, Dict[str, str]]:
    """``{"train_data": {"path", "sha256"}, "cv_data": {...}}`` of the two lists, and ``"cmvn"`` of the global CMVN
    stats when there are some (recomputed stats under the same path would change the features)."""
    files = (("train_data", train_data), ("cv_data", cv_data)) + ((("cmvn", cmvn),) if cmvn else ())
    return {name: {"path": path, "sha256": file_sha256(path)} for name, path in files}


def _flat(value: Any, prefix: str = "") -> Dict[str, Any]:
    if isinstance(value, Mapping):
        out: Dict[str, Any] = {}
        for key, sub in value.items():
            out.update(_flat(sub, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: value}


def config_changes(was: Mapping[str, Any], now: Mapping[str, Any], exempt=MAY_CHANGE) -> List[str]:
    """``key: old -> new`` for every leaf that differs (``<absent>`` on one side), keys in ``exempt`` left out."""
    old, new = _flat(was), _flat(now)
    absent = "<absent>"
    return [f"{key}: {old.get(key, absent)} -> {new.get(key, absent)}" for key in sorted(set(old) | set(new))
            if key not in exempt and old.get(key, absent) != new.get(key, absent)]


def meaning_changes(was: Mapping[str, Any], now: Mapping[str, Any]) -> List[str]:
    """The :func:`config_changes` that change what a trained parameter means, of a model whose weights are kept (a
    decode's ``--override``): each family's options section (``udps_conf``, ``cosine_conf``: ``alpha_form`` reads
    the stored scales linearly, squared or as logs; ``eps`` floors the norms the weights were trained under) and a
    part's ``attention_conf``; their ``*_init`` start a training only (the weights replace them)."""
    from wenet_udps.transformer.attention import FAMILIES
    sections = tuple(f"{f.conf_key}." for f in FAMILIES.values() if f.conf_key) + tuple(
        f"{part}_conf.attention_conf." for part in ("encoder", "decoder"))
    return [change for change in config_changes(was, now)
            if change.startswith(sections) and not change.split(":")[0].endswith("_init")]


def resume_changes(info: Mapping[str, Any], config: Mapping[str, Any], data: Mapping[str, Mapping[str, str]],
                   ran: Optional[Mapping[str, Any]] = None) -> Tuple[List[str], List[str]]:
    """How this resume differs from the run recorded in checkpoint YAML ``info``: (differences that need
    ``--force``, optimizer/schedule changes applied anyway); a record without ``config`` or ``data``, written before
    this check, is not compared on that part. ``ran``: what the run sets besides the config (``dtype``,
    ``world_size``: the effective batch), recorded at the top level of the YAML."""
    changes = [f"{key}: {info[key]} -> {value}" for key, value in (ran or {}).items()
               if key in info and info[key] != value]
    for name, now in data.items():
        was = (info.get("data") or {}).get(name)
        if was and was.get("sha256") != now["sha256"]:
            same = was.get("path") == now["path"]
            changes.append(f"--{name}: {now['path']} " + ("changed since" if same else f"is not {was.get('path')}")
                           + " (another SHA-256)")
    applied = []
    if isinstance(info.get("config"), Mapping):
        for change in config_changes(info["config"], config):
            (applied if change.startswith(APPLIED_ON_RESUME) else changes).append(change)
    return changes, applied


def checked_resume(ckpt_path: str, ckpt: Mapping[str, Any], config: Mapping[str, Any],
                   data: Mapping[str, Mapping[str, str]], ran: Mapping[str, Any], force: bool
                   ) -> List[Dict[str, Any]]:
    """RunDirError when resuming ``ckpt`` (loaded from ``ckpt_path``) changes its data or conf and not ``force``;
    else the ``resume_changes`` record for the checkpoints to come (the earlier ones', plus this resume's)."""
    info = read_info(sidecar(ckpt_path)) or {}
    record = list(info.get("resume_changes") or [])
    changes, applied = resume_changes(info, config, data, ran)
    if changes and not force:
        raise RunDirError(f"--checkpoint {ckpt_path}: this resume changes what the run trains on: "
                          f"{'; '.join(changes)}; resume with the run's own data and conf, or pass --force to go on "
                          f"with the changes (recorded in the checkpoints' yaml)")
    if changes or applied:
        logging.warning("resuming %s with changes (recorded): %s", ckpt_path, "; ".join(changes + applied))
        record.append({"epoch": ckpt.get("epoch"), "step": ckpt.get("step"), "changes": changes + applied})
    return record
