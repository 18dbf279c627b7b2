"""What a config builds, as labels: the attention type and family of each site, the run label run.sh names exp dirs
with, and whether the encoder streams (used by bin/describe, tools/collect_results and the tests).

Run labels: ``scaled_dot``; a family's name (``udps``, ``cosine``) when every site is of that family; else, per
family besides scaled-dot, the family and the sites that have it (``udps_enc_self``, ``cosine_dec_self_dec_cross``,
``udps_enc_self_cosine_dec_cross``).
"""
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from torch import nn

from wenet_udps.dataset.features import feature_dim
from wenet_udps.model_builder import attention_sites, build_model
from wenet_udps.transformer.site_families import SITES, family_sites
from wenet_udps.transformer.attention import FAMILIES, SCALED_DOT, family_classes, family_of, family_type

SITE_NAMES = {"enc_self": "encoder self-attention", "dec_self": "decoder self-attention",
              "dec_cross": "decoder source attention"}
PLACEHOLDER_VOCAB = 8   # when the units file is not made yet: the vocabulary sizes only the output layers


def site_of(path: str) -> str:
    """``encoder.encoders.0.self_attn`` -> ``enc_self``; decoder ``self_attn`` / ``src_attn`` -> ``dec_self`` /
    ``dec_cross``."""
    if path.startswith("encoder."):
        return "enc_self"
    return "dec_cross" if path.endswith("src_attn") else "dec_self"


def placeholder_model(config: Mapping, output_dim: int = PLACEHOLDER_VOCAB) -> nn.Module:
    """``config``'s model without its CMVN stats, with ``output_dim`` outputs (the attention and sizes it has)."""
    # CMVN stats are made by stage 1; they change neither the attention nor the parameter count.
    return build_model(dict(config, input_dim=feature_dim(config.get("dataset_conf") or {}), output_dim=output_dim,
                            cmvn=None))


def model_site_types(model: nn.Module) -> Dict[str, List[str]]:
    """Site short name -> the attention registry names of ``model``'s modules there."""
    types: Dict[str, List[str]] = {s: [] for s in SITES}
    for path, name in attention_sites(model).items():
        types[site_of(path)].append(name)
    return types


def site_types(config: Mapping) -> Dict[str, List[str]]:
    """Site short name -> the attention registry names its modules have in the built model."""
    return model_site_types(placeholder_model(config))


def checkpoint_site_types(names: Iterable[str]) -> Dict[str, List[str]]:
    """:func:`site_types` of a checkpoint, from its parameter names alone (the weights, not an editable config):
    every attention has ``<path>.linear_q.weight``, and one of a family besides scaled-dot also ``<path>.<marker>``
    (``Family.marker``: ``alpha`` for UDPS, ``cos_alpha`` for cosine). Each site gets its family's self-attention
    type (enough for the labels)."""
    keys = set(names)
    types: Dict[str, List[str]] = {s: [] for s in SITES}
    for key in sorted(keys):
        if key.endswith(".linear_q.weight"):
            path = key[:-len(".linear_q.weight")]
            family = next((f.name for f in FAMILIES.values() if f.marker and f"{path}.{f.marker}" in keys), SCALED_DOT)
            types[site_of(path)].append(family_type("selfattn", family) or family_classes(family)[0].name)
    return types


def site_families(types: Mapping[str, List[str]]) -> Dict[str, List[str]]:
    """Site -> the families of its modules (one entry per family, in ``FAMILIES`` order) from :func:`site_types`."""
    return {s: [f for f in FAMILIES if any(family_of(n) == f for n in names)] for s, names in types.items()}


def attention_label(types: Mapping[str, List[str]]) -> str:
    """The run label (module docstring) of :func:`site_types`."""
    built = [s for s in SITES if types.get(s)]
    families = site_families(types)
    used = [f for f in FAMILIES if f != SCALED_DOT and any(f in families.get(s, []) for s in built)]
    if not used:
        return SCALED_DOT
    if len(used) == 1 and all(families[s] == used for s in built):
        return used[0]
    return "_".join(f"{f}_" + "_".join(s for s in built if f in families[s]) for f in used)


def label_parts(label: str, families: Optional[Sequence[str]] = None) -> List[Tuple[str, List[str]]]:
    """A run label as (family, sites) pairs: ``udps_enc_self_cosine_dec_cross`` -> [(udps, [enc_self]), (cosine,
    [dec_cross])]; a whole-model label (``cosine``) -> [(cosine, every site)]; ValueError for another string
    (the empty one too). ``families``: the family names (default: the registry's ``FAMILIES``)."""
    families = list(FAMILIES if families is None else families)
    if label in families:
        return [(label, list(SITES))]
    words, parts = label, []
    if not words:
        raise ValueError("an empty string is no run label")
    while words:
        family = next((f for f in families if f != SCALED_DOT and words.startswith(f + "_")), None)
        if family is None:
            raise ValueError(f"{label!r} is no run label (a family of {', '.join(families)}, or <family>_<sites>)")
        words = words[len(family) + 1:]
        sites = []
        while (site := next((s for s in SITES if words == s or words.startswith(s + "_")), None)) is not None:
            sites.append(site)
            words = words[len(site) + 1:]
        if not sites:
            raise ValueError(f"{label!r}: no site after {family!r}; sites: {', '.join(SITES)}")
        parts.append((family, sites))
    return parts


def display_label(label: str) -> str:
    """The label as users read it: ``scaled-dot``, ``udps``, ``cosine``, ``udps (enc-self, dec-cross)``."""
    if label == SCALED_DOT:
        return "scaled-dot"
    if label in FAMILIES:
        return label
    return ", ".join(f"{family} ({', '.join(s.replace('_', '-') for s in sites)})"
                     for family, sites in label_parts(label))


def families_error(values: Sequence[str]) -> str:
    """run.sh --families' check: each value an ``att_family`` value (a registered family, or a site set of one),
    each once; "" when they are, else the problem and the valid families."""
    if not values:
        return f"no family given; valid: {' '.join(FAMILIES)}"
    seen: Dict[str, str] = {}
    for value in values:
        try:
            chosen = str(sorted(family_sites(value).items()))
        except ValueError as e:
            return str(e).split(": ", 1)[-1]
        if chosen in seen:
            return f"{seen[chosen]} and {value} are one model: give it once"
        seen[chosen] = value
    return ""


def is_streaming(config: Mapping) -> bool:
    """Whether the encoder is trained for chunked decoding (dynamic chunks or a static chunk)."""
    conf = config.get("encoder_conf") or {}
    return bool(conf.get("use_dynamic_chunk", False)) or int(conf.get("static_chunk_size", 0) or 0) > 0
