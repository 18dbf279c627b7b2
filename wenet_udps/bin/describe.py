"""What a training config builds: the attention each site really has, the model's size, whether it streams.

    python -m wenet_udps.bin.describe --config conf/tiny_zh/train_conformer.yaml \
        [--override att_udps=true ...] [--variant conf|FAMILY|FAMILY:SITES ...] [--checkpoint exp/x/epoch_7.pt] \
        [--porcelain]

For people (the default), per ``--variant``: a table of the three attention sites (``enc_self`` encoder
self-attention, ``dec_self`` decoder self-attention, ``dec_cross`` decoder source attention) with the attention type,
its similarity family and how many layers have it, the run label (the exp dir suffix run.sh uses), whether the
encoder streams, the parameter count and the model size (the state_dict; a training checkpoint adds the optimizer
state). ``--variant``: ``conf`` (default) is the config as written; any other value is an ``att_family`` value (a
family such as ``scaled_dot``, ``udps``, ``cosine``, or a site set of one, ``udps:enc_self``) and adds the override
``att_family=<value>`` (docs/udps.md), as run.sh --families and --udps_sites train it.

``--porcelain`` (what run.sh reads) prints one line per variant instead: ``VARIANT LABEL STREAMING``, e.g.
``cosine cosine false``. LABEL is the run label (wenet_udps.model_info: ``scaled_dot``, a family, or
``<family>_<sites>`` for a mixed model, e.g. ``udps_enc_self``); STREAMING is ``true`` when the encoder is trained
for chunked decoding (``use_dynamic_chunk`` or ``static_chunk_size > 0``). With ``--checkpoint`` (one variant), the
checkpoint's parameter names must be the model's. A bad config, override or checkpoint prints ``describe: error:
<what>`` and exits 2.
"""
import argparse
from typing import List, Mapping, Optional

from wenet_udps.config import apply_overrides, load_config
from wenet_udps.model_info import PLACEHOLDER_VOCAB, SITE_NAMES, attention_label, checkpoint_site_types, \
    display_label, is_streaming, model_site_types, placeholder_model, site_types
from wenet_udps.transformer.attention import FAMILIES, family_of
from wenet_udps.text import init_tokenizer
from wenet_udps.utils import cli
from wenet_udps.utils.cli import NotRegularFileError, UserError, run_cli


def check_checkpoint(config: Mapping, path: str, label: str) -> None:
    """UserError unless the checkpoint's parameter names are those of ``config``'s model."""
    from wenet_udps.train.checkpoint import load_checkpoint
    # CMVN stats are buffers of the trained model only (the model here is built without them).
    want = {k for k in placeholder_model(config).state_dict() if ".global_cmvn." not in k}
    # Only the parameter names are read (no weight is used), so the SHA-256 check is not needed here.
    have = {k for k in load_checkpoint(path, verify=False)["model"] if ".global_cmvn." not in k}
    if want == have:
        return
    kind = display_label(attention_label(checkpoint_site_types(have)))
    missing, extra = sorted(want - have), sorted(have - want)
    example = (missing or extra)[0]
    raise UserError(f"checkpoint {path} does not fit the {display_label(label)} model ({len(missing)} missing, "
                    f"{len(extra)} unexpected parameters, e.g. {example}); it looks like a {kind} model: "
                    f"pick the --families / --config it was trained with")


def _vocab(config: Mapping) -> Optional[int]:
    """The vocabulary size: train.yaml's ``output_dim``, else the units file's, else None (not made yet)."""
    if config.get("output_dim"):
        return int(config["output_dim"])
    try:
        return init_tokenizer(dict(config)).vocab_size()
    except NotRegularFileError:  # a FIFO would not be "not made yet": refused by name (run_cli: one line)
        raise
    except (OSError, ValueError):
        return None


def human_lines(config: Mapping, title: str) -> List[str]:
    """The per-site table, label, parameter count and size of one variant."""
    vocab = _vocab(config)
    model = placeholder_model(config, vocab or PLACEHOLDER_VOCAB)
    types = model_site_types(model)
    label = attention_label(types)
    params = sum(p.numel() for p in model.parameters())
    size = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    lines = [title, f"  {'site':<10} {'attention type':<20} {'family':<11} {'layers':>6}  where"]
    for site, names in types.items():
        for name in sorted(set(names)):
            family = FAMILIES[family_of(name)].display
            lines.append(f"  {site:<10} {name:<20} {family:<11} {names.count(name):>6}  {SITE_NAMES[site]}")
    vocab_note = (f"vocabulary of {vocab}" if vocab else f"placeholder vocabulary of {PLACEHOLDER_VOCAB}: the units "
                  f"file {(config.get('tokenizer_conf') or {}).get('symbol_table_path')} is not made yet")
    lines += [f"  attention: {display_label(label)} (run label {label}: run.sh names the exp dir <prefix>_{label})",
              f"  streaming encoder: {'yes' if is_streaming(config) else 'no'}",
              f"  parameters: {params:,} ({params / 1e6:.2f} M, {vocab_note})",
              f"  model size: {size / 2**20:.1f} MiB state_dict ({params * 4 / 2**20:.1f} MiB fp32 weights, the "
              f"rest buffers such as positional tables); a training checkpoint adds Adam's state, 2x the weights"]
    return lines


def describe(config_path: str, overrides: List[str], variants: List[str], checkpoint: Optional[str] = None,
             porcelain: bool = True) -> List[str]:
    """The output lines (see the module docstring)."""
    if checkpoint and len(variants) != 1:
        raise UserError(f"--checkpoint {checkpoint} belongs to one model, but {len(variants)} variants "
                        f"({' '.join(variants)}) would train: choose one with --families <family>")
    base = load_config(config_path)
    lines = []
    for variant in variants:
        extra = [] if variant == "conf" else [f"att_family={variant}"]
        config = apply_overrides(base, extra + overrides)
        if porcelain:
            label = attention_label(site_types(config))
            if checkpoint:
                check_checkpoint(config, checkpoint, label)
            lines.append(f"{variant} {label} {str(is_streaming(config)).lower()}")
        else:
            how = "as written" if variant == "conf" else f"with att_family={variant}"
            lines += human_lines(config, f"{config_path} {how}{' ' + ' '.join(overrides) if overrides else ''}:")
            if checkpoint:
                check_checkpoint(config, checkpoint, attention_label(site_types(config)))
                lines.append(f"  checkpoint {checkpoint}: its parameter names fit this model")
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    p = cli.ArgumentParser(prog="describe", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, type=cli.existing_file)
    p.add_argument("--override", action="append", default=[], metavar="KEY.PATH=VALUE")
    p.add_argument("--variant", action="append", default=None, metavar="conf|FAMILY|FAMILY:SITES")
    p.add_argument("--checkpoint", default=None, type=cli.existing_file)
    p.add_argument("--porcelain", action="store_true", help="one 'VARIANT LABEL STREAMING' line per variant")
    args = p.parse_args(argv)
    try:
        lines = describe(args.config, args.override, args.variant or ["conf"], args.checkpoint, args.porcelain)
    except UserError:
        raise
    except (OSError, ValueError, TypeError, KeyError) as e:   # e.g. a missing file: the user's to fix
        raise UserError(str(e)) from None
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    run_cli(main, "describe")
