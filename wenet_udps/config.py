"""train.yaml: loading, the checked ``--override key.path=value``, and the finished config written to model_dir.

Every key at every level is checked against :class:`TrainConfig`, which each part declares for itself (the model
builder, tokenizer, dataset, optimizer/scheduler and training loop; a ``name_conf`` section is checked against the
class ``name`` picks) through the one mechanism of ``wenet_udps.utils.schema``. A mistake raises ``ConfigError``:
``<file or --override>: <key path>: <problem>``, listing the valid keys with a "did you mean". Values are converted
to the declared types (PyYAML 1.1 reads ``2e-3`` as a string; it becomes a float where a float is expected).

An override ``a.b.c=value`` (value parsed as YAML) may set any key the schema knows, creating missing sections; the
result is checked as a whole, so a typo is rejected like one in the file.
"""
import copy
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Mapping, Optional

import yaml

from wenet_udps.dataset.dataset import DataConfig
from wenet_udps.dataset.features import feature_dim
from wenet_udps.dataset.processor import batch_plan
from wenet_udps.model_builder import ModelConfig, resolve_model_config
from wenet_udps.text import TokenizerConfig, init_tokenizer
from wenet_udps.train.executor import TrainLoopConfig
from wenet_udps.train.scheduler import OPTIM_DEFAULTS, OptimConfig
from wenet_udps.utils.schema import ConfigError, check_section, defaults_of


@dataclass
class TrainConfig(ModelConfig, TokenizerConfig, DataConfig, OptimConfig, TrainLoopConfig):
    """Every top-level train.yaml key: the union of what each part declares."""


def validate_config(config: Mapping[str, Any], source: str = "") -> Dict[str, Any]:
    """``config`` checked against :class:`TrainConfig` and converted (a new dict).

    Raises:
        ConfigError: naming ``source`` (the file or the override), the key path and the valid keys.
    """
    try:
        checked = check_section(config, TrainConfig, "")
        resolve_model_config(checked)  # the attention_conf / udps_conf routing depends on the chosen types
        batch_plan((checked.get("dataset_conf") or {}).get("batch_conf"))
    except ConfigError as e:
        raise e.in_source(source) from None
    except ValueError as e:  # a registry look-up (unknown part name): already names the key and the choices
        raise ConfigError("", str(e), source) from None
    return checked


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


def load_config(path: str, overrides: Iterable[str] = ()) -> Dict[str, Any]:
    """Read and check a train.yaml, then apply and check each override in order."""
    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.load(f, Loader=_UniqueKeyLoader)
    except UnicodeDecodeError as e:
        raise ConfigError("", f"not UTF-8 ({e.reason} at byte {e.start})", path) from None
    except yaml.YAMLError as e:
        raise ConfigError("", f"not valid YAML: {e}", path) from None
    if not isinstance(config, dict):
        raise ConfigError("", f"expected a YAML mapping at the top level, got {type(config).__name__}", path)
    return apply_overrides(validate_config(config, path), overrides)


def apply_override(config: Dict[str, Any], override: str) -> Dict[str, Any]:
    """``config`` with one ``a.b.c=value`` applied and the result checked (a new dict)."""
    source = f"--override {override}"
    if "=" not in override:
        raise ConfigError("", "expected key.path=value", source)
    key, _, text = override.partition("=")
    parts = key.strip().split(".")
    if any(not p for p in parts):
        raise ConfigError("", "empty key", source)
    try:
        value = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError as e:
        raise ConfigError(key, f"value {text!r} is not valid YAML: {e}", source) from None
    config = copy.deepcopy(dict(config))
    node = config
    for depth, part in enumerate(parts[:-1]):
        if node.get(part) is None:
            node[part] = {}
        if not isinstance(node[part], dict):
            raise ConfigError(".".join(parts[:depth + 1]), f"is a {type(node[part]).__name__}, not a section",
                              source)
        node = node[part]
    node[parts[-1]] = value
    return validate_config(config, source)


def apply_overrides(config: Mapping[str, Any], overrides: Iterable[str]) -> Dict[str, Any]:
    """A copy of ``config`` with every override applied (and checked) in order."""
    config = copy.deepcopy(dict(config))
    for override in overrides or ():
        config = apply_override(config, override)
    return config


def _abs(path: Optional[str]) -> Optional[str]:
    return os.path.abspath(path) if path else path


def finalize_config(config: Mapping[str, Any], *, symbol_table: Optional[str] = None,
                    cmvn: Optional[str] = None) -> Dict[str, Any]:
    """The config as written to ``model_dir/train.yaml``: training-loop and optimizer defaults filled in,
    ``input_dim`` (fbank ``num_mel_bins`` / mfcc ``num_ceps``), ``output_dim`` (vocabulary size), and the units,
    BPE model, non-language-symbol and CMVN paths made absolute (so decoding and export work from any directory).

    ``symbol_table`` / ``cmvn`` replace ``tokenizer_conf.symbol_table_path`` / ``cmvn_conf.cmvn_file``.
    """
    config = validate_config(config)
    for key, value in {**defaults_of(TrainLoopConfig), **OPTIM_DEFAULTS}.items():
        if config.get(key) is None:
            config[key] = copy.deepcopy(value)
    tok = dict(config.get("tokenizer_conf") or {})
    if symbol_table:
        tok["symbol_table_path"] = symbol_table
    for key in ("symbol_table_path", "bpe_path", "non_lang_syms_path"):
        if tok.get(key):
            tok[key] = _abs(tok[key])
    config["tokenizer_conf"] = tok
    if cmvn:
        config["cmvn"] = config.get("cmvn") or "global_cmvn"
        config["cmvn_conf"] = {**(config.get("cmvn_conf") or {}), "cmvn_file": cmvn, "is_json_cmvn": True}
    if config.get("cmvn") and (config.get("cmvn_conf") or {}).get("cmvn_file"):
        config["cmvn_conf"]["cmvn_file"] = _abs(config["cmvn_conf"]["cmvn_file"])
    config["input_dim"] = feature_dim(config.get("dataset_conf") or {})
    config["output_dim"] = init_tokenizer(config).vocab_size()
    return config


def save_yaml(config: Mapping[str, Any], path: str) -> None:
    """Write ``config`` as YAML atomically (temp file in the same directory, then rename)."""
    from wenet_udps.train.checkpoint import atomic_write_bytes
    atomic_write_bytes(path, yaml.safe_dump(dict(config), sort_keys=False, allow_unicode=True).encode("utf-8"))
