"""What a training config builds: the attention each site really has, and whether the encoder streams.

run.sh asks this before training, so exp dirs and result rows are named from the built model, not from a flag:

    python -m wenet_udps.bin.describe --config conf/aishell/train_conformer.yaml \
        [--override att_udps=true ...] [--variant conf|false|true ...] [--checkpoint exp/x/epoch_7.pt]

prints one line per ``--variant`` (default: ``conf``, the config as written; ``true``/``false`` add the override
``att_udps=true|false``): ``VARIANT LABEL STREAMING``, e.g. ``true udps false``. LABEL is ``scaled_dot``,
``udps`` or ``udps_<sites>`` (the UDPS sites of a mixed model, e.g. ``udps_enc_self``); STREAMING is ``true`` when
the encoder is trained for chunked decoding (``use_dynamic_chunk`` or ``static_chunk_size > 0``).
With ``--checkpoint`` (one variant), the checkpoint's parameter names must be the model's. A bad config, override
or checkpoint prints one line naming it and exits 1.
"""
import argparse
import sys
from typing import Dict, List, Mapping, Optional

from wenet_udps.dataset.features import feature_dim
from wenet_udps.model_builder import attention_sites, build_model
from wenet_udps.config import apply_overrides, load_config
from wenet_udps.transformer.attention import is_udps
from wenet_udps.utils import cli

# Attention sites in a fixed order: (short name, test on the module path).
SITES = ("enc_self", "dec_self", "dec_cross")


def site_of(path: str) -> str:
    """``encoder.encoders.0.self_attn`` -> ``enc_self``; decoder ``self_attn`` / ``src_attn`` -> ``dec_self`` /
    ``dec_cross``."""
    if path.startswith("encoder."):
        return "enc_self"
    return "dec_cross" if path.endswith("src_attn") else "dec_self"


def site_types(config: Mapping) -> Dict[str, List[str]]:
    """Site short name -> the attention registry names its modules have in the built model."""
    config = dict(config)
    config["input_dim"] = feature_dim(config.get("dataset_conf") or {})
    config["output_dim"] = 8          # vocabulary size does not change which attention a site gets
    config["cmvn"] = None             # stats are made by stage 1; they do not change the attention either
    types: Dict[str, List[str]] = {s: [] for s in SITES}
    for path, name in attention_sites(build_model(config)).items():
        types[site_of(path)].append(name)
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
    conf = config.get("encoder_conf") or {}
    return bool(conf.get("use_dynamic_chunk", False)) or int(conf.get("static_chunk_size", 0) or 0) > 0


def check_checkpoint(config: Mapping, path: str, label: str) -> None:
    """ValueError unless the checkpoint's parameter names are those of ``config``'s model."""
    from wenet_udps.train.checkpoint import load_checkpoint
    config = dict(config, input_dim=feature_dim(config.get("dataset_conf") or {}), output_dim=8, cmvn=None)
    # CMVN stats are buffers of the trained model only (the model here is built without them).
    want = {k for k in build_model(config).state_dict() if ".global_cmvn." not in k}
    # Only the parameter names are read (no weight is used), so the SHA-256 check is not needed here.
    have = {k for k in load_checkpoint(path, verify=False)["model"] if ".global_cmvn." not in k}
    if want == have:
        return
    kind = "udps" if any(k.endswith((".alpha", ".beta")) for k in have) else "scaled-dot"
    missing, extra = sorted(want - have), sorted(have - want)
    example = (missing or extra)[0]
    raise ValueError(f"checkpoint {path} does not fit the {display_label(label)} model ({len(missing)} missing, "
                     f"{len(extra)} unexpected parameters, e.g. {example}); it looks like a {kind} model: "
                     f"pick the --att_udps / --config it was trained with")


def describe(config_path: str, overrides: List[str], variants: List[str],
             checkpoint: Optional[str] = None) -> List[str]:
    """The output lines (see the module docstring)."""
    if checkpoint and len(variants) != 1:
        raise ValueError(f"--checkpoint {checkpoint} belongs to one model, but {len(variants)} variants "
                         f"({' '.join(variants)}) would train: choose one with --att_udps true|false")
    base = load_config(config_path)
    lines = []
    for variant in variants:
        extra = [] if variant == "conf" else [f"att_udps={variant}"]
        config = apply_overrides(base, extra + overrides)
        label = attention_label(site_types(config))
        if checkpoint:
            check_checkpoint(config, checkpoint, label)
        lines.append(f"{variant} {label} {str(is_streaming(config)).lower()}")
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    p = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, type=cli.existing_file)
    p.add_argument("--override", action="append", default=[], metavar="KEY.PATH=VALUE")
    p.add_argument("--variant", action="append", choices=["conf", "true", "false"], default=None)
    p.add_argument("--checkpoint", default=None, type=cli.existing_file)
    args = p.parse_args(argv)
    try:
        lines = describe(args.config, args.override, args.variant or ["conf"], args.checkpoint)
    except (OSError, ValueError, TypeError, KeyError) as e:
        print(f"{args.config}: {cli.one_line(e)}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    cli.run_cli(main, "wenet_udps.bin.describe")
