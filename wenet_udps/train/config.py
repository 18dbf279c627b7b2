"""train.yaml loading, checked ``--override key.path=value`` and the finished config written to ``model_dir``.

An override ``a.b.c=value`` must name a key that exists in the YAML (or one of ``OPTIONAL_KEYS``, keys WeNet
configs may leave out), and ``value`` (parsed as YAML) must have the type of the value it replaces; otherwise a
ValueError names the key and lists the valid keys at that level. Ints are accepted where a float is expected,
and YAML 1.1 leaves ``1e-3`` a string, so such strings are read as floats where a float is expected.
"""
import copy
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional

import yaml

from wenet_udps.dataset.features import feature_dim
from wenet_udps.text import init_tokenizer

# Keys a config may omit but an override may still set, with the type their value must have.
# (A key inside a section that does not exist yet creates the section.)
OPTIONAL_KEYS: Dict[str, type] = {
    "att_udps": bool,
    "accum_grad": int,
    "grad_clip": float,
    "log_interval": int,
    "max_epoch": int,
    "save_interval": int,
    "seed": int,
    "udps_conf.alpha_init": float,
    "udps_conf.beta_init": float,
    "udps_conf.alpha_form": str,
    "udps_conf.alpha_per_head": bool,
    "udps_conf.pos_norm": str,
    "udps_conf.eps": float,
    "model_conf.reverse_weight": float,
    "encoder_conf.static_chunk_size": int,
    "encoder_conf.use_dynamic_chunk": bool,
    "encoder_conf.use_dynamic_left_chunk": bool,
    "encoder_conf.gradient_checkpointing": bool,
    "dataset_conf.shuffle": bool,
    "dataset_conf.sort": bool,
    "dataset_conf.spec_aug": bool,
    "dataset_conf.spec_sub": bool,
    "dataset_conf.spec_trim": bool,
    "dataset_conf.speed_perturb": bool,
    "dataset_conf.seed": int,
    "optim_conf.weight_decay": float,
}

# Training-loop keys with their defaults (WeNet's).
TRAIN_DEFAULTS = {"accum_grad": 1, "grad_clip": 50.0, "log_interval": 100, "max_epoch": 100, "save_interval": 0,
                  "optim": "adam", "optim_conf": {"lr": 0.001}, "scheduler": "warmuplr",
                  "scheduler_conf": {"warmup_steps": 25000}}


def load_config(path: str) -> Dict[str, Any]:
    """Read a train.yaml; a file that is not a YAML mapping raises ValueError naming it."""
    with open(path, encoding="utf-8") as f:
        try:
            config = yaml.safe_load(f)
        except yaml.YAMLError as e:
            raise ValueError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path}: expected a YAML mapping at the top level, got {type(config).__name__}")
    return config


def _type_name(value: Any) -> str:
    return type(value).__name__


def _coerce(key: str, value: Any, expected: Any, expected_type: Optional[type] = None) -> Any:
    """``value`` converted to the type of ``expected`` (or ``expected_type``), else ValueError."""
    want = expected_type if expected_type is not None else type(expected)
    if expected is None and expected_type is None:
        return value
    if want is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif want is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(value, want):
        return value
    raise ValueError(f"override {key}: expected a value of type {want.__name__} "
                     f"(like {expected!r}), got {value!r} ({_type_name(value)})")


def _optional_at(prefix: str) -> List[str]:
    """Names of the optional keys directly under ``prefix`` ('' for the top level)."""
    names = []
    for key in OPTIONAL_KEYS:
        head, _, last = key.rpartition(".")
        if head == prefix:
            names.append(last)
    return names


def apply_override(config: Dict[str, Any], override: str) -> None:
    """Apply one ``a.b.c=value`` to ``config`` in place (checked as the module docstring says)."""
    if "=" not in override:
        raise ValueError(f"override {override!r}: expected key.path=value")
    key, _, text = override.partition("=")
    key = key.strip()
    parts = key.split(".")
    if not key or any(not p for p in parts):
        raise ValueError(f"override {override!r}: empty key")
    try:
        value = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError as e:
        raise ValueError(f"override {key}: value {text!r} is not valid YAML: {e}") from None
    node = config
    for depth, part in enumerate(parts):
        prefix = ".".join(parts[:depth])
        last = depth == len(parts) - 1
        valid = sorted(set(node) | set(_optional_at(prefix)))
        where = f"under {prefix}" if prefix else "at the top level"
        if part not in node and ".".join(parts[:depth + 1]) not in OPTIONAL_KEYS and not any(
                k.startswith(".".join(parts[:depth + 1]) + ".") for k in OPTIONAL_KEYS):
            raise ValueError(f"override {key}: unknown key {part!r} {where}; valid keys: {', '.join(valid)}")
        if last:
            if part in node:
                node[part] = _coerce(key, value, node[part], OPTIONAL_KEYS.get(key) if node[part] is None else None)
            else:
                node[part] = _coerce(key, value, None, OPTIONAL_KEYS[key])
            return
        if node.get(part) is None:
            node[part] = {}
        if not isinstance(node[part], dict):
            raise ValueError(f"override {key}: {'.'.join(parts[:depth + 1])} is a {_type_name(node[part])}, "
                             f"not a section")
        node = node[part]


def apply_overrides(config: Mapping[str, Any], overrides: Iterable[str]) -> Dict[str, Any]:
    """A copy of ``config`` with every override applied in order."""
    config = copy.deepcopy(dict(config))
    for override in overrides or ():
        apply_override(config, override)
    return config


def _abs(path: Optional[str]) -> Optional[str]:
    return os.path.abspath(path) if path else path


def finalize_config(config: Mapping[str, Any], *, symbol_table: Optional[str] = None,
                    cmvn: Optional[str] = None) -> Dict[str, Any]:
    """The config as written to ``model_dir/train.yaml``: training defaults filled in, ``input_dim`` (fbank
    ``num_mel_bins`` / mfcc ``num_ceps``), ``output_dim`` (vocabulary size), and the units, BPE model,
    non-language-symbol and CMVN paths made absolute (so decoding and export work from any directory).

    ``symbol_table`` / ``cmvn`` replace ``tokenizer_conf.symbol_table_path`` / ``cmvn_conf.cmvn_file``.
    """
    config = copy.deepcopy(dict(config))
    for key, value in TRAIN_DEFAULTS.items():
        config.setdefault(key, copy.deepcopy(value))
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
