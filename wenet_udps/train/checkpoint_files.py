"""Which checkpoints a model dir holds, from their YAML records alone (``<tag>.yaml`` is written after its ``.pt``,
so a tag with a readable YAML has a complete ``.pt``; see :mod:`wenet_udps.train.checkpoint`). No torch here, so
that run.sh's stage 4 (tools/run_lib.sh) asks for the newest one in a tenth of a second."""
import glob
import logging
import os
import re
from typing import Any, Dict, List, Optional, Tuple

import yaml

from wenet_udps.utils.cli import open_input


def read_info(yaml_path: str) -> Optional[Dict[str, Any]]:
    """A checkpoint's YAML, or None when unreadable (logged)."""
    try:
        with open_input(yaml_path, "r", encoding="utf-8") as f:
            info = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        logging.warning("ignoring %s: %s", yaml_path, e)
        return None
    return info if isinstance(info, dict) else None


def list_checkpoints(model_dir: str, pattern: str = r"(epoch|step)_\d+") -> List[Tuple[str, Dict[str, Any]]]:
    """``(pt_path, info)`` of every complete checkpoint whose tag matches ``pattern`` (temp files ignored)."""
    found = []
    for yaml_path in sorted(glob.glob(os.path.join(model_dir, "*.yaml"))):
        tag = os.path.basename(yaml_path)[:-len(".yaml")]
        if not re.fullmatch(pattern, tag):
            continue
        pt = os.path.join(model_dir, f"{tag}.pt")
        info = read_info(yaml_path)
        if info is not None and os.path.isfile(pt):
            found.append((pt, info))
    return found


def newest_first(model_dir: str) -> List[Tuple[str, Dict[str, Any]]]:
    """Complete checkpoints, most optimizer steps first (an epoch one before a step one on ties)."""
    return sorted(list_checkpoints(model_dir), reverse=True,
                  key=lambda item: (int(item[1].get("step", 0)), os.path.basename(item[0]).startswith("epoch")))


def latest_checkpoint(model_dir: str) -> Optional[str]:
    """The complete checkpoint with the most optimizer steps (an epoch one on ties), or None."""
    found = newest_first(model_dir)
    return found[0][0] if found else None
