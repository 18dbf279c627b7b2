"""A conf file as written: YAML with no key given twice, its ``base`` chain resolved and deep-merged (not yet checked
against the schema: :mod:`wenet_udps.config` does that). No torch here, so that run.sh's stamps (tools/run_lib.sh
``conf_sum``) read a conf in a tenth of a second."""
import copy
import os
from typing import Any, Dict, Mapping, Tuple

import yaml

from wenet_udps.utils.schema import ConfigError
from wenet_udps.utils.cli import open_input


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, but a key given twice in one mapping is an error (PyYAML keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen: Dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(str(key), f"given twice, on lines {seen[key]} and {line} (YAML would silently keep "
                                            f"the last)", f"{self.name}:{line}")
            seen[key] = line
        return super().construct_mapping(node, deep)


def _read_yaml(path: str) -> Dict[str, Any]:
    try:
        with open_input(path, "r", encoding="utf-8") as f:
            config = yaml.load(f, Loader=_UniqueKeyLoader)
    except UnicodeDecodeError as e:
        raise ConfigError("", f"not UTF-8 ({e.reason} at byte {e.start})", path) from None
    except yaml.YAMLError as e:
        raise ConfigError("", f"not valid YAML: {e}", path) from None
    if not isinstance(config, dict):
        raise ConfigError("", f"expected a YAML mapping at the top level, got {type(config).__name__}", path)
    return config


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> Dict[str, Any]:
    """``over`` on top of ``base``: mappings merged key by key, any other value (lists too) replaced."""
    merged = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def read_conf(path: str, _chain: Tuple[str, ...] = ()) -> Dict[str, Any]:
    """A conf file with its ``base`` chain resolved (not yet checked against the schema)."""
    real = os.path.realpath(path)
    if real in _chain:
        raise ConfigError("base", "cycle: " + " -> ".join(_chain + (real,)), path)
    config = _read_yaml(path)
    if "base" not in config:
        return config
    base = config.pop("base")
    if not isinstance(base, str) or not base.strip():
        raise ConfigError("base", f"expected the path of a conf file, got {base!r}", path)
    base_path = os.path.join(os.path.dirname(path), base)   # an absolute base stays absolute
    if not os.path.isfile(base_path):
        raise ConfigError("base", f"{base_path} not found (a base is relative to the directory of the conf that "
                          f"names it)", path)
    return deep_merge(read_conf(base_path, _chain + (real,)), config)
