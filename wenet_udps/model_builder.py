"""Build an ``ASRModel`` from a WeNet-style train.yaml dict, including the attention family wiring.

Keys read: ``input_dim``, ``output_dim``, ``encoder`` / ``encoder_conf``, ``decoder`` / ``decoder_conf``,
``ctc`` / ``ctc_conf``, ``cmvn`` / ``cmvn_conf``, ``model`` / ``model_conf``, ``att_udps``, ``att_family``, each
family's options section (``udps_conf``, ``cosine_conf``: ``Family.conf_key``), ``tokenizer_conf.special_tokens``.
Every other key (dataset_conf, optim, scheduler, ...) belongs to other parts and is ignored here.

Family selection (docs/udps.md), the one place that maps ``att_udps`` / ``att_family`` to layer types
(:func:`site_families`): ``att_family: cosine`` makes every attention site cosine, ``att_family: cosine:enc_self``
(a site set such as ``enc_self`` or ``dec_self+dec_cross``, names in :data:`SITES`) those sites cosine and the others
scaled-dot; ``att_udps`` keeps its meaning, as the UDPS case of the same rule (``true`` is ``att_family: udps``,
``false`` is ``scaled_dot``, a site set ``enc_self`` is ``udps:enc_self``). Each site's type goes through
``attention.family_type``. Both keys absent or null keep each site's ``*_layer_type`` as written; both given and
choosing differently is an error naming both. A family's options section reaches only its own sites, each getting
the keys its class accepts; one that reaches no site where it would set another family's option is an error
(:func:`check_unread_options`).
"""
import copy
import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, FrozenSet, Mapping, Optional, Union

from torch import nn

from wenet_udps.transformer.asr_model import ASRModel
from wenet_udps.transformer.attention import ATTENTION_CLASSES, FAMILIES, SCALED_DOT, attention_classes, \
    family_classes, family_of, family_type
from wenet_udps.transformer.cmvn import GlobalCMVN, load_cmvn_json
from wenet_udps.transformer.ctc import CTC
from wenet_udps.transformer.decoder import DECODER_CLASSES
from wenet_udps.transformer.encoder import ENCODER_CLASSES
from wenet_udps.transformer.subsampling import SUBSAMPLING_CLASSES
from wenet_udps.utils.cmvn_stats import CmvnError
from wenet_udps.utils.registry import lookup
from wenet_udps.utils.schema import MODEL_PARAMS_MAX, ConfigError, check_section, convert, defaults_of, route, \
    section

CMVN_CLASSES = {"global_cmvn": GlobalCMVN}
CTC_CLASSES = {"ctc": CTC}
MODEL_CLASSES = {"asr_model": ASRModel}

# The attention sites: short name (att_udps / att_family site sets, run labels, run.sh --udps_sites) -> (part, type key).
SITES = {"enc_self": ("encoder", "selfattention_layer_type"),
         "dec_self": ("decoder", "selfattention_layer_type"),
         "dec_cross": ("decoder", "src_attention_layer_type")}
# The attention kind (``attention.ATTENTION_KINDS``, each class's ``kind``) each site takes: a cross attention reuses
# a given cache as the memory's keys (wrong for a self-attention's growing cache), a self-attention has no
# ``memory_cache`` and a decoder self-attention needs ``step``; a wrong kind would train and then fail to decode.
SITE_KINDS = {"enc_self": "self", "dec_self": "self", "dec_cross": "cross"}

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
SELECTION_KEYS = ("att_udps", "att_family")   # the keys that choose each site's family


def udps_sites(att_udps: Union[None, bool, str]) -> Optional[FrozenSet[str]]:
    """The sites ``att_udps`` makes UDPS (every other one scaled-dot), or None when it is absent (types as written).

    Raises:
        ConfigError: a site set naming an unknown site (listing the valid values).
    """
    if att_udps is None or isinstance(att_udps, bool):
        return None if att_udps is None else frozenset(SITES if att_udps else ())
    names = [n.strip() for n in att_udps.split("+")]
    unknown = [n for n in names if n not in SITES]
    if unknown:
        raise ConfigError("att_udps", f"{att_udps!r}: unknown site {unknown[0]!r}; valid: true, false, null or "
                          f"sites joined by '+' from {', '.join(SITES)} (e.g. enc_self, dec_self+dec_cross)")
    return frozenset(names)


def family_sites(att_family: Optional[str]) -> Optional[Dict[str, str]]:
    """Site -> family as ``att_family`` chooses it (``<family>``: every site; ``<family>:<site>+<site>``: those
    sites, the others scaled-dot), or None when it is absent.

    Raises:
        ConfigError: an unknown family or site (listing the valid ones).
    """
    if att_family is None:
        return None
    name, colon, sites = str(att_family).partition(":")
    how = (f"a family of {', '.join(FAMILIES)}, or <family>:<sites> with sites joined by '+' from "
           f"{', '.join(SITES)} (e.g. cosine, cosine:enc_self, udps:dec_self+dec_cross)")
    if name.strip() not in FAMILIES:
        raise ConfigError("att_family", f"{att_family!r}: unknown family {name.strip()!r}; valid: {how}")
    if colon and not sites.strip():   # not every site: that is the family's name alone
        raise ConfigError("att_family", f"{att_family!r}: no site after ':'; valid: {how}")
    chosen = {n.strip() for n in sites.split("+")} if colon else set(SITES)
    if "" in chosen:
        raise ConfigError("att_family", f"{att_family!r}: an empty site name; valid: {how}")
    unknown = sorted(chosen - set(SITES))
    if unknown:
        raise ConfigError("att_family", f"{att_family!r}: unknown site {unknown[0]!r}; valid: {how}")
    return {site: name.strip() if site in chosen else SCALED_DOT for site in SITES}


def site_families(config: Mapping) -> Optional[Dict[str, str]]:
    """Site -> family as ``att_udps`` and ``att_family`` choose it; None when neither is set (types as written).

    Raises:
        ConfigError: a bad value, or both keys set and choosing differently (naming both).
    """
    sites = udps_sites(config.get("att_udps"))
    by_udps = None if sites is None else {s: "udps" if s in sites else SCALED_DOT for s in SITES}
    by_family = family_sites(config.get("att_family"))
    if by_udps is not None and by_family is not None and by_udps != by_family:
        raise ConfigError("att_family", f"{config['att_family']} contradicts att_udps: {config['att_udps']} (which "
                          f"is att_family: {family_value(by_udps)}); give one of the two keys, or set the other null")
    return by_family if by_family is not None else by_udps


def family_value(families: Mapping[str, str]) -> str:
    """The ``att_family`` value of a site -> family mapping with one family besides scaled-dot (``scaled_dot``,
    ``cosine``, ``udps:enc_self``); ValueError for a mix of two such families, which one value cannot say."""
    used = sorted({f for f in families.values() if f != SCALED_DOT})
    if not used:
        return SCALED_DOT
    if len(used) > 1:
        raise ValueError(f"sites of {' and '.join(used)}: no att_family value chooses a mix of two families")
    sites = [s for s in SITES if families.get(s) == used[0]]
    return used[0] if len(sites) == len(SITES) else f"{used[0]}:{'+'.join(sites)}"


def site_choices(site: str) -> Dict[str, type]:
    """The attention types ``site`` takes, by name: those of its kind (:data:`SITE_KINDS`), and at a decoder site
    those without relative positions (the decoder has no positional embedding to give them)."""
    part = SITES[site][0]
    return {name: cls for name, cls in attention_classes(SITE_KINDS[site]).items()
            if part == "encoder" or not cls.uses_pos_emb}


def _site_type(conf: Dict, site: str, cls: type, where: str, chosen: Optional[Mapping[str, str]]) -> str:
    """The attention type of one site after the family rule; written back into ``conf``.

    Raises:
        ConfigError: a type the site does not take (another kind, or relative positions in the decoder), listing
            the site's valid choices; ValueError for an unregistered name (the same list).
    """
    key = SITES[site][1]
    name = conf.get(key, defaults_of(cls).get(key))
    choices = site_choices(site)
    if name in ATTENTION_CLASSES and name not in choices:
        given = ATTENTION_CLASSES[name]
        why = (f"a {given.kind}-attention type" if given.kind != SITE_KINDS[site]
               else "needs relative position embeddings, which the decoder does not have")
        raise ConfigError(f"{where}.{key}", f"{name!r} is {why}; the {site} site takes {SITE_KINDS[site]}-attention "
                          f"types, valid choices: {', '.join(sorted(choices))}")
    lookup(choices, name, f"{where}.{key}")
    if chosen is not None:
        family = chosen[site]
        target = family_type(name, family)
        if target is None:
            with_one = sorted(n for n in choices if family_type(n, family))
            raise ConfigError(f"{where}.{key}", f"{name!r} has no {FAMILIES[family].display} counterpart for the "
                              f"{site} site; types with one: {', '.join(with_one)}")
        name = target
    conf[key] = name
    return name


def check_written_sites(config: Mapping) -> None:
    """ConfigError when a site's ``*_layer_type`` as written is of a family other than scaled-dot, but ``att_udps``
    / ``att_family`` make that site another family: the written type would be replaced silently. Checked on a conf
    file and on an override of a type key (an override of ``att_udps`` or ``att_family``, such as run.sh
    --families, replaces the types on purpose)."""
    chosen = site_families(config)
    if chosen is None:
        return
    for site, (part, key) in SITES.items():
        name = (config.get(f"{part}_conf") or {}).get(key)
        written = family_of(name) if name else None
        if written and written != SCALED_DOT and written != chosen[site]:
            how = " and ".join(f"{k}: {config[k]}" for k in SELECTION_KEYS if config.get(k) is not None)
            raise ConfigError(f"{part}_conf.{key}", f"{name!r} is {FAMILIES[written].display}, but {how} makes the "
                              f"{site} site {FAMILIES[chosen[site]].display}; name the site in the family's site "
                              f"set (e.g. att_family: {written}:{site}) or set att_udps and att_family null to "
                              f"build the types as written")


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
                site_types[site] = _site_type(conf, site, registry[config[part]], where, chosen)
        _attention_conf(conf, [site_types[s] for s in SITES if SITES[s][0] == part], config, where)
        config[where] = conf
    check_unread_options(config, site_types)
    check_model_size(config)
    return config


def check_unread_options(config: Mapping, site_types: Mapping[str, str]) -> None:
    """ConfigError when a family's options section (``udps_conf``) reaches no site, every site being of other
    families, and one of its keys is an option of another family's site (``alpha_form`` of a cosine type) that
    nothing sets there (neither that family's section nor the part's ``attention_conf``), at a value other than the
    site's default: ignored, a model of ``att_family: cosine`` from a conf tuned for UDPS would differ from the
    UDPS one in more than the similarity. ``config`` resolved (each part's ``attention_conf`` merged)."""
    families = {ATTENTION_CLASSES[name].family for name in site_types.values()}
    for absent in FAMILIES.values():
        section = (config.get(absent.conf_key) or {}) if absent.conf_key else {}
        if absent.name in families or not section:
            continue
        how = " and ".join(f"{k}: {config[k]}" for k in SELECTION_KEYS if config.get(k) is not None)
        for key, value in section.items():
            for site, name in site_types.items():
                cls, part = ATTENTION_CLASSES[name], SITES[site][0]
                reads = FAMILIES[cls.family].conf_key
                default = defaults_of(cls).get(key, value)   # a key the type does not take: nothing to set
                if not reads or key in (config[f"{part}_conf"].get("attention_conf") or {}) or default == value:
                    continue
                raise ConfigError(f"{absent.conf_key}.{key}", f"{value!r} reaches no site "
                                  f"({how or 'the types as written'} makes no site {absent.display}); the {site} "
                                  f"site's {name} reads {reads}, where {key} is unset (its default {default!r}): set "
                                  f"{reads}.{key}: {value} for the same option, or remove it from {absent.conf_key}")


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
