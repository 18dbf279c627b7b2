"""Build an ``ASRModel`` from a WeNet-style train.yaml dict, including the attention family wiring.

Keys read: ``input_dim``, ``output_dim``, ``encoder`` / ``encoder_conf``, ``decoder`` / ``decoder_conf``,
``ctc`` / ``ctc_conf``, ``cmvn`` / ``cmvn_conf``, ``model`` / ``model_conf``, ``att_udps``, ``att_family``, each
family's options section (``udps_conf``, ``cosine_conf``: ``Family.conf_key``), ``tokenizer_conf.special_tokens``.
Every other key (dataset_conf, optim, scheduler, ...) belongs to other parts and is ignored here. Which family
each attention site is: wenet_udps.transformer.site_families (docs/udps.md).
"""
import copy
import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Mapping, Optional, Union

from torch import nn

from wenet_udps.transformer.asr_model import ASRModel
from wenet_udps.transformer.attention import ATTENTION_CLASSES, FAMILIES, family_classes
from wenet_udps.transformer.cmvn import GlobalCMVN, load_cmvn_json
from wenet_udps.transformer.ctc import CTC
from wenet_udps.transformer.decoder import DECODER_CLASSES
from wenet_udps.transformer.encoder import ENCODER_CLASSES
from wenet_udps.transformer.site_families import SITES, check_unread_options, site_families, site_type
from wenet_udps.transformer.subsampling import SUBSAMPLING_CLASSES
from wenet_udps.utils.cmvn_stats import CmvnError
from wenet_udps.utils.registry import lookup
from wenet_udps.utils.schema import MODEL_PARAMS_MAX, ConfigError, check_section, convert, defaults_of, route, \
    section

CMVN_CLASSES = {"global_cmvn": GlobalCMVN}
CTC_CLASSES = {"ctc": CTC}
MODEL_CLASSES = {"asr_model": ASRModel}

# Constructor arguments that the parts receive from the code, never from the config.
_ATTENTION_SUPPLIED = ("n_head", "n_feat", "dropout_rate")


@dataclass(frozen=True)
class CmvnConf:
    """``cmvn_conf``: JSON statistics from tools/compute_cmvn_stats.py (Kaldi-format stats are not read)."""
    cmvn_file: Optional[str] = None
    is_json_cmvn: bool = True


@dataclass(frozen=True)
class CtcConf:
    ctc_blank_id: int = 0


@dataclass
class _ModelKeys:
    """The train.yaml keys :func:`build_model` reads but the families' options (part names default to WeNet's)."""
    input_dim: Optional[int] = None
    output_dim: Optional[int] = None
    att_udps: Optional[Union[bool, str]] = None
    att_family: Optional[str] = None
    encoder: str = "conformer"
    encoder_conf: Optional[dict] = section(choice="encoder", registry=ENCODER_CLASSES,
                                           supplied=("input_size", "global_cmvn"))
    decoder: str = "bitransformer"
    decoder_conf: Optional[dict] = section(choice="decoder", registry=DECODER_CLASSES,
                                           supplied=("vocab_size", "encoder_output_size"))
    ctc: str = "ctc"
    ctc_conf: Optional[dict] = section(CtcConf)
    cmvn: Optional[str] = None
    cmvn_conf: Optional[dict] = section(CmvnConf)
    model: str = "asr_model"
    model_conf: Optional[dict] = section(choice="model", registry=MODEL_CLASSES,
                                         supplied=("vocab_size", "encoder", "decoder", "ctc", "special_tokens"))


# The keys :class:`_ModelKeys` declares, and each registered family's options section (its classes' keyword
# arguments; lazy, so a variant registered later is found).
ModelConfig = dataclasses.make_dataclass(
    "ModelConfig", [(f.conf_key, Optional[dict], section(functools.partial(family_classes, f.name),
                                                         supplied=_ATTENTION_SUPPLIED, lazy=True))
                    for f in FAMILIES.values() if f.conf_key], bases=(_ModelKeys,))
ModelConfig.__doc__ = "The train.yaml keys :func:`build_model` reads: :class:`_ModelKeys` and each family's options."


def _attention_conf(conf: Dict, site_types, config: Mapping, where: str) -> None:
    """Set ``conf['attention_conf']``: the part's own ``attention_conf`` (checked against its sites' attention
    classes) over each family's options (``udps_conf``, ``cosine_conf``) that some site of this part of that family
    takes. The part routes them per site."""
    classes = [ATTENTION_CLASSES[name] for name in site_types]
    own = check_section(conf.get("attention_conf"), classes, f"{where}.attention_conf", supplied=_ATTENTION_SUPPLIED)
    merged: Dict = {}
    for family in FAMILIES.values():
        mine = [cls for cls in classes if cls.family == family.name]
        if family.conf_key and mine:
            merged.update(route(config.get(family.conf_key) or {}, mine))
    merged.update(own)
    if merged:
        conf["attention_conf"] = merged
    else:
        conf.pop("attention_conf", None)


def _build_cmvn(config: Mapping) -> Optional[nn.Module]:
    """The global CMVN layer, or None when ``cmvn`` is absent/null."""
    name = config.get("cmvn")
    if name is None:
        return None
    cls = lookup(CMVN_CLASSES, name, "cmvn")
    cmvn_conf = config.get("cmvn_conf") or {}
    if not cmvn_conf.get("cmvn_file"):
        raise ConfigError("cmvn_conf.cmvn_file", f"required by cmvn: {name}")
    path = Path(cmvn_conf["cmvn_file"])
    if not cmvn_conf.get("is_json_cmvn", True):
        raise ConfigError("cmvn_conf.is_json_cmvn", f"false (Kaldi stats) is not supported: convert {path} with "
                          f"'python tools/cmvn_kaldi2json.py {path} {path}.json' (or recompute the stats with "
                          f"tools/compute_cmvn_stats.py) and set is_json_cmvn: true")
    if not path.is_file():
        raise ConfigError("cmvn_conf.cmvn_file", f"{path} does not exist")
    mean, istd = load_cmvn_json(path)
    if config.get("input_dim") is not None and mean.numel() != int(config["input_dim"]):
        raise CmvnError(f"{path} holds stats of {mean.numel()} dimensions, but the features have "
                        f"{config['input_dim']} (dataset_conf fbank_conf.num_mel_bins / mfcc_conf.num_ceps): "
                        f"recompute them with tools/compute_cmvn_stats.py")
    return cls(mean, istd)


def build_model(config: Mapping) -> ASRModel:
    """Build the hybrid CTC/attention model described by a train.yaml dict (not modified).

    Raises:
        ConfigError (a ValueError): missing ``input_dim``/``output_dim``, unknown part names (listing valid ones),
            unknown keys or wrongly typed values in any model section (naming the key path and the valid keys), or
            a missing cmvn file.
    """
    special_tokens = convert((config.get("tokenizer_conf") or {}).get("special_tokens"), Optional[Dict[str, int]],
                             "tokenizer_conf.special_tokens") or None
    config = resolve_model_config(config)
    for key in ("input_dim", "output_dim"):
        if not isinstance(config.get(key), int) or config[key] <= 0:
            raise ConfigError(key, f"the config needs a positive integer, got {config.get(key)!r}")
    input_dim, vocab_size = config["input_dim"], config["output_dim"]
    encoder_cls = ENCODER_CLASSES[config["encoder"]]
    decoder_cls = DECODER_CLASSES[config["decoder"]]
    ctc_cls = CTC_CLASSES[config["ctc"]]
    ctc_conf = {**defaults_of(CtcConf), **(config.get("ctc_conf") or {})}
    model_cls = MODEL_CLASSES[config["model"]]

    encoder = encoder_cls(input_size=input_dim, global_cmvn=_build_cmvn(config), **config["encoder_conf"])
    decoder = decoder_cls(vocab_size=vocab_size, encoder_output_size=encoder.output_size(), **config["decoder_conf"])
    ctc = ctc_cls(odim=vocab_size, encoder_output_size=encoder.output_size(), blank_id=ctc_conf["ctc_blank_id"])
    return model_cls(vocab_size=vocab_size, encoder=encoder, decoder=decoder, ctc=ctc,
                     special_tokens=special_tokens, **(config.get("model_conf") or {}))


def resolve_model_config(config: Mapping) -> Dict:
    """The model sections of ``config`` checked, with part names filled in and each part's attention types (after
    ``att_udps`` / ``att_family``) and ``attention_conf`` (checked against those types) written into its conf."""
    config = check_section(route(config, ModelConfig), ModelConfig, "")
    fields = defaults_of(ModelConfig)
    for key, registry in (("encoder", ENCODER_CLASSES), ("decoder", DECODER_CLASSES), ("ctc", CTC_CLASSES),
                          ("model", MODEL_CLASSES)):
        config[key] = config.get(key) or fields[key]
        lookup(registry, config[key], key)
    chosen = site_families(config)
    site_types: Dict[str, str] = {}
    for part, registry in (("encoder", ENCODER_CLASSES), ("decoder", DECODER_CLASSES)):
        where = f"{part}_conf"
        conf = copy.deepcopy(config.get(where) or {})
        for site, (site_part, _) in SITES.items():
            if site_part == part:
                site_types[site] = site_type(conf, site, registry[config[part]], where, chosen)
        _attention_conf(conf, [site_types[s] for s in SITES if SITES[s][0] == part], config, where)
        config[where] = conf
    check_unread_options(config, site_types)
    check_model_size(config)
    return config


def parameter_estimate(config: Mapping) -> Dict[str, int]:
    """About how many weights each part of the model ``config`` describes (resolved: part names filled in), from
    its widths and depths alone, nothing allocated: ``encoder_conf`` and ``decoder_conf`` (the vocabulary's
    embedding and output layers with the decoder, where ``output_dim`` is known)."""
    enc = {**defaults_of(ENCODER_CLASSES[config["encoder"]]), **config["encoder_conf"]}
    dec = {**defaults_of(DECODER_CLASSES[config["decoder"]]), **config["decoder_conf"]}
    d, vocab = int(enc.get("output_size", 256)), config.get("output_dim")
    conformer = "cnn_module_kernel" in enc
    block = 4 * d * d + 2 * d * int(enc.get("linear_units", 2048)) * (2 if enc.get("macaron_style", conformer) else 1)
    if enc.get("use_cnn_module", conformer):
        block += 3 * d * d + d * int(enc.get("cnn_module_kernel", 15))
    encoder = 9 * d * d + int(enc.get("num_blocks", 6)) * block   # + the subsampling convolutions
    blocks = int(dec.get("num_blocks", 6)) + int(dec.get("r_num_blocks", 0) or 0)
    decoder = blocks * (8 * d * d + 2 * d * int(dec.get("linear_units", 2048)))
    if isinstance(vocab, int):
        decoder += 3 * vocab * d   # embedding, output layer, CTC
    return {"encoder_conf": encoder, "decoder_conf": decoder}


def check_model_size(config: Mapping) -> None:
    """ConfigError naming the part and its size keys when the model would have more than ``MODEL_PARAMS_MAX``
    weights (:func:`parameter_estimate`): refused before anything is allocated (an allocator's traceback in
    describe, train and recognize otherwise)."""
    parts = parameter_estimate(config)
    total = sum(parts.values())
    if total <= MODEL_PARAMS_MAX:
        return
    where = max(parts, key=parts.get)
    conf = config[where]
    keys = ", ".join(f"{k} {conf[k]}" for k in ("output_size", "linear_units", "num_blocks", "r_num_blocks",
                                               "attention_heads") if k in conf)
    raise ConfigError(where, f"{keys or 'its defaults'} make a model of about {total:.3g} parameters "
                             f"({total * 4 / 2 ** 30:.0f} GiB of float32 weights), above the ceiling of "
                             f"{MODEL_PARAMS_MAX:.0e} (far above any speech model's; its weights are allocated at "
                             f"once): make it smaller")


def attention_sites(model: nn.Module) -> Dict[str, str]:
    """Every attention module of ``model``: module path -> ``ATTENTION_CLASSES`` name (exact class match)."""
    names = {cls: name for name, cls in ATTENTION_CLASSES.items()}
    return {path: names[type(m)] for path, m in model.named_modules() if type(m) in names}


def _subsampling(config: Mapping):
    layer = (config.get("encoder_conf") or {}).get("input_layer") or "conv2d"
    return lookup(SUBSAMPLING_CLASSES, layer, "encoder_conf.input_layer")


def min_input_frames(config: Mapping) -> int:
    """The fewest feature frames the config's encoder front end (``encoder_conf.input_layer``) turns into one output
    frame: the data pipeline drops shorter utterances before they reach a convolution."""
    return _subsampling(config).min_frames()


def ctc_output_frames(config: Mapping) -> Optional[Callable[[int], int]]:
    """Input frames -> the encoder output frames CTC aligns a target to; None when the model trains no CTC
    (``model_conf.ctc_weight`` 0), so that no target length is impossible."""
    if float((config.get("model_conf") or {}).get("ctc_weight", 0.5)) <= 0:
        return None
    return _subsampling(config).output_frames
