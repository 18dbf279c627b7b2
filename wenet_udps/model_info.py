"""What a config builds, as labels: the attention type of each site, the run label run.sh names exp dirs with, and
whether the encoder streams (used by bin/describe, tools/collect_results and the tests)."""
from typing import Dict, Iterable, List, Mapping

from torch import nn

from wenet_udps.dataset.features import feature_dim
from wenet_udps.model_builder import SITES, attention_sites, build_model
from wenet_udps.transformer.attention import is_udps

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
    every attention has ``<path>.linear_q.weight``, and a UDPS one also ``<path>.alpha``."""
    keys = set(names)
    types: Dict[str, List[str]] = {s: [] for s in SITES}
    for key in sorted(keys):
        if key.endswith(".linear_q.weight"):
            path = key[:-len(".linear_q.weight")]
            types[site_of(path)].append("udps_selfattn" if f"{path}.alpha" in keys else "selfattn")
    return types


def attention_label(types: Mapping[str, List[str]]) -> str:
    """``scaled_dot``, ``udps`` or ``udps_<site>_...`` from :func:`site_types`."""
    udps = [s for s in SITES if types.get(s) and all(is_udps(n) for n in types[s])]
    partly = [s for s in SITES if types.get(s) and any(is_udps(n) for n in types[s])]
    if not partly:
        return "scaled_dot"
    if udps == [s for s in SITES if types.get(s)]:
        return "udps"
    return "udps_" + "_".join(partly)


def display_label(label: str) -> str:
    """The label as users read it: ``scaled-dot``, ``udps``, ``udps (enc-self, dec-cross)``."""
    if label == "scaled_dot":
        return "scaled-dot"
    if label == "udps":
        return label
    sites = [s.replace("_", "-") for s in SITES if s in label[len("udps_"):]]
    return f"udps ({', '.join(sites)})"


def is_streaming(config: Mapping) -> bool:
    """Whether the encoder is trained for chunked decoding (dynamic chunks or a static chunk)."""
    conf = config.get("encoder_conf") or {}
    return bool(conf.get("use_dynamic_chunk", False)) or int(conf.get("static_chunk_size", 0) or 0) > 0
