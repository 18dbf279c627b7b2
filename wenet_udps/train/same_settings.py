"""Every rank of a distributed run trains the same thing, or none trains (issue 69).

Each node starts its own ``bin.train`` (through torchrun), from its own copy of the code, conf and data lists. Right
after the process group forms, every rank records what it would train -- the resolved config, in which a value
naming a file stands for that file's SHA-256 (the units, BPE model and CMVN stats are compared by content, wherever
each node keeps them), the SHA-256 of the train and cv lists, the package sources' SHA-256 (the code that runs,
whatever the commit says), the torch version, and the options that change what is learned -- and all ranks gather
all records before anything is written. Where a rank's record differs from rank 0's, every rank stops with the same
message, naming the rank and each difference in rank 0's -> that rank's terms, e.g.
``rank 1 was started with other settings than rank 0: config dataset_conf.batch_conf.batch_size: 4 -> 8``.
"""
import os
from typing import Any, Dict, List

import torch

from wenet_udps.train.distributed import gather_objects
from wenet_udps.train.resume_check import config_changes
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.provenance import code_sha256, commit
from wenet_udps.utils.source_info import file_sha256


class SettingsDiffer(UserError):
    """A rank was started with other settings than rank 0."""


def _by_content(value: Any) -> Any:
    """``value`` with every string that names a file replaced by that file's SHA-256."""
    if isinstance(value, dict):
        return {k: _by_content(v) for k, v in value.items()}
    if isinstance(value, str) and os.path.isfile(value):
        return f"<a file of SHA-256 {file_sha256(value)[:12]}>"
    return value


def settings_record(config: Dict[str, Any], data: Dict[str, Dict[str, str]], options: Dict[str, Any]
                    ) -> Dict[str, Any]:
    """What this rank would train: ``config`` (the resolved one), ``data`` (``resume_check.data_record``) and the
    command-line ``options`` that change the result (precision, data type, DataLoader workers)."""
    return {"config": _by_content(config), "data": {name: rec["sha256"][:12] for name, rec in data.items()},
            "options": dict(options), "torch": torch.__version__, "code": code_sha256(), "commit": commit()}


def differences(ref: Dict[str, Any], other: Dict[str, Any]) -> List[str]:
    """How ``other``'s record differs from ``ref``'s: ``what: ref's -> other's`` (max_epoch too: every rank must
    run the same epochs and collectives)."""
    out = [f"config {change}" for change in config_changes(ref["config"], other["config"], exempt=())]
    for section, what in (("data", " (SHA-256)"), ("options", "")):
        for name in sorted(set(ref[section]) | set(other[section])):
            if ref[section].get(name) != other[section].get(name):
                out.append(f"--{name}{what}: {ref[section].get(name)} -> {other[section].get(name)}")
    if ref["torch"] != other["torch"]:
        out.append(f"torch {ref['torch']} -> {other['torch']}")
    if ref["code"] != other["code"]:
        out.append(f"code: the wenet_udps sources differ (SHA-256 {ref['code'][:12]} -> {other['code'][:12]}; "
                   f"commit {ref['commit']} -> {other['commit']})")
    return out


def check_same_settings(record: Dict[str, Any]) -> None:
    """Gather every rank's :func:`settings_record` (a collective; nothing without a process group) and raise
    SettingsDiffer on every rank when one differs from rank 0's."""
    records = gather_objects(record)
    found = [f"rank {rank} was started with other settings than rank 0 (rank 0's -> rank {rank}'s): "
             f"{'; '.join(diff)}" for rank, diff in enumerate(differences(records[0], r) for r in records) if diff]
    if found:
        raise SettingsDiffer(f"{'; '.join(found)}; refused before training: start every node with the same "
                             f"command, conf, data lists and code")
