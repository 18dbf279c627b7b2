"""Which family each attention site is, from ``att_udps`` / ``att_family``: the one place that maps them to
layer types (:func:`site_families`), used by wenet_udps.model_builder.

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
from typing import Dict, FrozenSet, Mapping, Optional, Union

from wenet_udps.transformer.attention import ATTENTION_CLASSES, FAMILIES, SCALED_DOT, attention_classes, family_of, \
    family_type
from wenet_udps.utils.registry import lookup
from wenet_udps.utils.schema import ConfigError, defaults_of

# The attention sites: short name (att_udps / att_family site sets, run labels, --udps_sites) -> (part, type key).
SITES = {"enc_self": ("encoder", "selfattention_layer_type"),
         "dec_self": ("decoder", "selfattention_layer_type"),
         "dec_cross": ("decoder", "src_attention_layer_type")}
# The attention kind (``attention.ATTENTION_KINDS``, each class's ``kind``) each site takes: a cross attention reuses
# a given cache as the memory's keys (wrong for a self-attention's growing cache), a self-attention has no
# ``memory_cache`` and a decoder self-attention needs ``step``; a wrong kind would train and then fail to decode.
SITE_KINDS = {"enc_self": "self", "dec_self": "self", "dec_cross": "cross"}

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


def site_type(conf: Dict, site: str, cls: type, where: str, chosen: Optional[Mapping[str, str]]) -> str:
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
