"""Build an ``ASRModel`` from a WeNet-style train.yaml dict, including the ``att_udps`` wiring.

Keys read: ``input_dim``, ``output_dim``, ``encoder`` / ``encoder_conf``, ``decoder`` / ``decoder_conf``,
``ctc`` / ``ctc_conf``, ``cmvn`` / ``cmvn_conf``, ``model`` / ``model_conf``, ``att_udps``, ``udps_conf``,
``tokenizer_conf.special_tokens``. Every other key (dataset_conf, optim, scheduler, ...) belongs to other parts
and is ignored here.

UDPS selection (docs/design.md): ``att_udps: true`` maps the encoder self-attention and both decoder attention
sites through ``UDPS_COUNTERPART``; ``false`` keeps the per-site ``*_layer_type`` keys. ``udps_conf`` reaches
only UDPS sites, each getting the keys its class accepts.
"""
import copy
from pathlib import Path
from typing import Dict, Mapping, Optional

from torch import nn

from wenet_udps.transformer.asr_model import ASRModel
from wenet_udps.transformer.attention import ATTENTION_CLASSES, UDPS_COUNTERPART, is_udps
from wenet_udps.transformer.cmvn import GlobalCMVN, load_cmvn_json
from wenet_udps.transformer.ctc import CTC
from wenet_udps.transformer.decoder import DECODER_CLASSES
from wenet_udps.transformer.encoder import ENCODER_CLASSES
from wenet_udps.utils.common import keyword_params
from wenet_udps.utils.registry import lookup

CMVN_CLASSES = {"global_cmvn": GlobalCMVN}
CTC_CLASSES = {"ctc": CTC}
MODEL_CLASSES = {"asr_model": ASRModel}

# WeNet's defaults when train.yaml omits the part names.
DEFAULT_ENCODER = "conformer"
DEFAULT_DECODER = "bitransformer"

# Where each attention site's type lives: (conf key, type key).
ENCODER_SITES = ("selfattention_layer_type",)
DECODER_SITES = ("selfattention_layer_type", "src_attention_layer_type")

# Constructor arguments that build_model supplies itself; a user may not set them in the *_conf dicts.
_ENCODER_SUPPLIED = ("input_size", "global_cmvn")
_DECODER_SUPPLIED = ("vocab_size", "encoder_output_size")
_MODEL_SUPPLIED = ("vocab_size", "encoder", "decoder", "ctc", "special_tokens")
_ATTENTION_SUPPLIED = ("n_head", "n_feat", "dropout_rate")
CMVN_CONF_KEYS = ("cmvn_file", "is_json_cmvn")
CTC_CONF_KEYS = ("ctc_blank_id",)


def _as_dict(value, key: str) -> Dict:
    """A ``*_conf`` value as a dict (None/missing -> {}); anything else is a config error."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{key} must be a mapping, got {type(value).__name__}")
    return dict(value)


def _check_keys(conf: Mapping, valid, key: str) -> None:
    """Reject keys not in ``valid``, naming the first bad key and listing the valid ones."""
    for name in conf:
        if name not in valid:
            raise ValueError(f"unknown key {key}.{name}; valid keys: {', '.join(sorted(valid))}")


def udps_conf_keys() -> Dict[str, set]:
    """UDPS attention type -> the ``udps_conf`` keys it accepts."""
    return {name: set(keyword_params(cls)) - set(_ATTENTION_SUPPLIED)
            for name, cls in ATTENTION_CLASSES.items() if is_udps(name)}


def _site_type(conf: Dict, key: str, cls: type, where: str, att_udps: bool) -> str:
    """The attention type of one site after the ``att_udps`` rule; written back into ``conf``."""
    default = keyword_params(cls).get(key)
    name = conf.get(key, default)
    lookup(ATTENTION_CLASSES, name, f"{where}.{key}")
    if att_udps:
        if name not in UDPS_COUNTERPART:
            raise ValueError(f"{where}.{key} {name!r} has no UDPS counterpart for att_udps: true; types with one: "
                             f"{', '.join(sorted(UDPS_COUNTERPART))}")
        name = UDPS_COUNTERPART[name]
    conf[key] = name
    return name


def _attention_conf(conf: Dict, site_types, udps_conf: Dict, where: str) -> None:
    """Set ``conf['attention_conf']``: the user's own ``attention_conf`` over the UDPS options of its UDPS sites.

    Only the ``udps_conf`` keys some UDPS site of this part accepts are kept (the part splits them per site).
    """
    accepted = set()
    keys = udps_conf_keys()
    for name in site_types:
        if is_udps(name):
            accepted |= keys[name]
    merged = {k: v for k, v in udps_conf.items() if k in accepted}
    merged.update(_as_dict(conf.get("attention_conf"), f"{where}.attention_conf"))
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
    cmvn_conf = _as_dict(config.get("cmvn_conf"), "cmvn_conf")
    _check_keys(cmvn_conf, CMVN_CONF_KEYS, "cmvn_conf")
    if not cmvn_conf.get("cmvn_file"):
        raise ValueError(f"cmvn: {name} needs cmvn_conf.cmvn_file")
    path = Path(cmvn_conf["cmvn_file"])
    if not cmvn_conf.get("is_json_cmvn", True):
        raise ValueError(f"cmvn_conf.is_json_cmvn: false (Kaldi stats) is not supported: convert {path} with "
                         f"'python tools/cmvn_kaldi2json.py {path} {path}.json' (or recompute the stats with "
                         f"tools/compute_cmvn_stats.py) and set is_json_cmvn: true")
    if not path.is_file():
        raise ValueError(f"cmvn_conf.cmvn_file {path} does not exist")
    mean, istd = load_cmvn_json(path)
    return cls(mean, istd)


def build_model(config: Mapping) -> ASRModel:
    """Build the hybrid CTC/attention model described by a train.yaml dict (not modified).

    Raises:
        ValueError: missing ``input_dim``/``output_dim``, unknown part names (listing valid ones), unknown keys in
            ``encoder_conf``/``decoder_conf``/``ctc_conf``/``cmvn_conf``/``model_conf``/``udps_conf`` (naming the
            key and listing valid keys), or a missing cmvn file.
    """
    config = copy.deepcopy(dict(config))
    for key in ("input_dim", "output_dim"):
        if not isinstance(config.get(key), int) or config[key] <= 0:
            raise ValueError(f"config needs a positive integer {key}, got {config.get(key)!r}")
    input_dim, vocab_size = config["input_dim"], config["output_dim"]
    att_udps = config.get("att_udps", False)
    if not isinstance(att_udps, bool):
        raise ValueError(f"att_udps must be true or false, got {att_udps!r}")
    lookup(MODEL_CLASSES, config.get("model", "asr_model"), "model")

    udps_conf = _as_dict(config.get("udps_conf"), "udps_conf")
    all_udps_keys = set().union(*udps_conf_keys().values())
    _check_keys(udps_conf, all_udps_keys, "udps_conf")

    encoder_name = config.get("encoder", DEFAULT_ENCODER)
    encoder_cls = lookup(ENCODER_CLASSES, encoder_name, "encoder")
    encoder_conf = _as_dict(config.get("encoder_conf"), "encoder_conf")
    _check_keys(encoder_conf, set(keyword_params(encoder_cls)) - set(_ENCODER_SUPPLIED), "encoder_conf")
    enc_types = [_site_type(encoder_conf, k, encoder_cls, "encoder_conf", att_udps) for k in ENCODER_SITES]
    _attention_conf(encoder_conf, enc_types, udps_conf, "encoder_conf")

    decoder_name = config.get("decoder", DEFAULT_DECODER)
    decoder_cls = lookup(DECODER_CLASSES, decoder_name, "decoder")
    decoder_conf = _as_dict(config.get("decoder_conf"), "decoder_conf")
    _check_keys(decoder_conf, set(keyword_params(decoder_cls)) - set(_DECODER_SUPPLIED), "decoder_conf")
    dec_types = [_site_type(decoder_conf, k, decoder_cls, "decoder_conf", att_udps) for k in DECODER_SITES]
    _attention_conf(decoder_conf, dec_types, udps_conf, "decoder_conf")

    ctc_cls = lookup(CTC_CLASSES, config.get("ctc", "ctc"), "ctc")
    ctc_conf = _as_dict(config.get("ctc_conf"), "ctc_conf")
    _check_keys(ctc_conf, CTC_CONF_KEYS, "ctc_conf")

    model_conf = _as_dict(config.get("model_conf"), "model_conf")
    _check_keys(model_conf, set(keyword_params(ASRModel)) - set(_MODEL_SUPPLIED), "model_conf")
    tokenizer_conf = _as_dict(config.get("tokenizer_conf"), "tokenizer_conf")
    special_tokens = _as_dict(tokenizer_conf.get("special_tokens"), "tokenizer_conf.special_tokens") or None

    encoder = encoder_cls(input_size=input_dim, global_cmvn=_build_cmvn(config), **encoder_conf)
    decoder = decoder_cls(vocab_size=vocab_size, encoder_output_size=encoder.output_size(), **decoder_conf)
    ctc = ctc_cls(odim=vocab_size, encoder_output_size=encoder.output_size(),
                  blank_id=ctc_conf.get("ctc_blank_id", 0))
    return ASRModel(vocab_size=vocab_size, encoder=encoder, decoder=decoder, ctc=ctc,
                    special_tokens=special_tokens, **model_conf)


def attention_sites(model: nn.Module) -> Dict[str, str]:
    """Every attention module of ``model``: module path -> ``ATTENTION_CLASSES`` name (exact class match)."""
    names = {cls: name for name, cls in ATTENTION_CLASSES.items()}
    return {path: names[type(m)] for path, m in model.named_modules() if type(m) in names}
