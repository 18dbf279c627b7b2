"""train.yaml: loading, the checked ``--override key.path=value``, and the finished config written to model_dir.

Every key at every level is checked against :class:`TrainConfig`, which each part declares for itself (the model
builder, tokenizer, dataset, optimizer/scheduler and training loop; a ``name_conf`` section is checked against the
class ``name`` picks) through the one mechanism of ``wenet_udps.utils.schema``. A mistake raises ``ConfigError``:
``<file or --override>: <key path>: <problem>``, listing the valid keys with a "did you mean". Values are converted
to the declared types (PyYAML 1.1 reads ``2e-3`` as a string; it becomes a float where a float is expected).

An override ``a.b.c=value`` (value parsed as YAML) may set any key the schema knows, creating missing sections; the
result is checked as a whole, so a typo is rejected like one in the file.

No default applies silently: a conf file either gives every key of :data:`REQUIRED` (the sections whose WeNet
defaults would build a different model or training) or names a complete conf to start from, ``base: <path>``
(relative to the directory of the file that names it, or absolute). A base may name its own base (a cycle is
refused); the file's keys are deep-merged over its base's (mappings key by key, any other value replaced), and the
merged conf is what is checked and written whole to ``model_dir/train.yaml``. Each attention site's type is written
out as ``att_udps`` / ``att_family`` resolve it (wenet_udps.model_builder), so train.yaml names every site's type.
An override of one of those two keys (run.sh --families passes ``att_family``) chooses the families anew: the other
key is set null, so a conf's ``att_udps: false`` does not contradict an ``att_family=cosine`` override.
"""
import copy
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Mapping, Optional

import yaml

from wenet_udps.dataset.dataset import DataConfig
from wenet_udps.dataset.features import extractor_problem, feature_dim
from wenet_udps.dataset.processor import batch_plan
from wenet_udps.dataset.transforms import ResampleConf
from wenet_udps.model_builder import ModelConfig, resolve_model_config
from wenet_udps.transformer.site_families import SELECTION_KEYS, SITES, check_written_sites
from wenet_udps.text import TokenizerConfig, init_tokenizer
from wenet_udps.train.executor import TrainLoopConfig
from wenet_udps.train.scheduler import OPTIM_DEFAULTS, OptimConfig
from wenet_udps.utils.conf_file import read_conf
from wenet_udps.utils.schema import ConfigError, check_section, defaults_of


@dataclass
class TrainConfig(ModelConfig, TokenizerConfig, DataConfig, OptimConfig, TrainLoopConfig):
    """Every top-level train.yaml key: the union of what each part declares."""


# What a conf file must give (itself or through its base): without them the model, tokenizer, data pipeline or
# optimisation would be WeNet's defaults (a 6-block Conformer of 26 M parameters, adam at 1e-3, 100 epochs).
REQUIRED = ("encoder", "encoder_conf", "decoder", "decoder_conf", "model_conf", "tokenizer", "tokenizer_conf",
            "dataset_conf", "optim", "optim_conf", "scheduler", "scheduler_conf", "max_epoch")


def validate_config(config: Mapping[str, Any], source: str = "", *, check_sites: bool = False) -> Dict[str, Any]:
    """``config`` checked against :class:`TrainConfig` and converted (a new dict), with each attention site's type
    as ``att_udps`` / ``att_family`` resolve it. ``check_sites``: a written type of a family that they would
    replace is an error.

    Raises:
        ConfigError: naming ``source`` (the file or the override), the key path and the valid keys.
    """
    try:
        checked = check_section(config, TrainConfig, "")
        if check_sites:
            check_written_sites(checked)
        resolved = resolve_model_config(checked)  # attention_conf / udps_conf routing depends on the chosen types
        for part, key in SITES.values():
            checked[f"{part}_conf"] = {**(checked.get(f"{part}_conf") or {}), key: resolved[f"{part}_conf"][key]}
        batch_plan((checked.get("dataset_conf") or {}).get("batch_conf"))
        _check_feature_dim(checked)
        _check_feature_frames(checked)
    except ConfigError as e:
        raise e.in_source(source) from None
    except ValueError as e:  # a registry look-up (unknown part name): already names the key and the choices
        raise ConfigError("", str(e), source) from None
    return checked


def _check_feature_dim(config: Mapping[str, Any]) -> None:
    """ConfigError naming the feature key, ``input_dim`` and the CMVN stats file when a train.yaml's features
    (``dataset_conf``) have another dimension than its model takes (an override of ``num_mel_bins``: the model and
    its CMVN stats were made for ``input_dim``; decoding would stop with a shape error inside the model)."""
    input_dim = config.get("input_dim")
    if input_dim is None:
        return
    dataset_conf = config.get("dataset_conf") or {}
    dim = feature_dim(dataset_conf)
    if dim == input_dim:
        return
    key = ("dataset_conf.mfcc_conf.num_ceps" if dataset_conf.get("feats_type") == "mfcc"
           else "dataset_conf.fbank_conf.num_mel_bins")
    cmvn = (config.get("cmvn_conf") or {}).get("cmvn_file") if config.get("cmvn") else None
    stats = f", and its CMVN stats {cmvn} are of {input_dim}" if cmvn else ""
    raise ConfigError(key, f"makes {dim}-dim features, but the model takes {input_dim} (input_dim){stats}: decode "
                           f"with the features it was trained on (train a new model for other features)")


def _check_feature_frames(config: Mapping[str, Any]) -> None:
    """ConfigError naming the feature keys and the rate when the extractor cannot be made at the rate every
    utterance is resampled to (a ValueError traceback in features.py at the first utterance otherwise)."""
    dataset_conf = config.get("dataset_conf") or {}
    rate = int((dataset_conf.get("resample_conf") or {}).get("resample_rate", ResampleConf.resample_rate))
    problem = extractor_problem(dataset_conf, rate)
    if problem:
        raise ConfigError("", problem)


def load_config(path: str, overrides: Iterable[str] = ()) -> Dict[str, Any]:
    """Read a conf (its ``base`` chain resolved), refuse it when it lacks a :data:`REQUIRED` key, check it, then
    apply and check each override in order."""
    config = read_conf(path)
    missing = [key for key in REQUIRED if config.get(key) is None]
    if missing:
        raise ConfigError("", f"missing {', '.join(missing)}: a conf gives every one of these (WeNet's defaults "
                          f"are never filled in), or starts from a complete conf with 'base: <path>' (relative to "
                          f"its own directory), e.g. base: train_conformer.yaml beside it", path)
    return apply_overrides(validate_config(config, path, check_sites=True), overrides)


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
    # An att_udps / att_family override (run.sh --families) replaces every site's type on purpose, and the other
    # key's choice with it; any other override may not contradict them.
    choosing = key.strip() in SELECTION_KEYS
    if choosing:
        config.update({other: None for other in SELECTION_KEYS if other != key.strip()})
    return validate_config(config, source, check_sites=not choosing)


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
