#!/usr/bin/env python3
"""Collect decoding results of all experiments into a Markdown table and plots.

Usage: collect_results.py --exp_dir exp [--out exp/RESULTS.md] [--plots_dir exp/plots]

Reads ``EXP/<name>/<test_set>/<mode>/wer`` (compute-wer.py output, last ``Overall -> X % N=...`` line) and
``EXP/<name>/train.yaml`` (encoder type; UDPS on when ``att_udps`` is true or any attention site's layer type is
``udps_*``/``rel_udps_*``). The checkpoint a result came from is read from a ``decode.info`` file (a
``checkpoint: PATH`` or ``checkpoint=PATH`` line) in the mode, test-set or experiment folder, if there is one.
Plots (PNG): train/cv loss curves and UDPS scale trajectories from the TensorBoard event files under
``EXP/<name>/tensorboard``, and error-rate bars per decoding mode for every test set.
"""
import argparse
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import yaml

WER_RE = re.compile(r"^Overall -> ([0-9.]+|inf|nan) % N=(\d+) C=(\d+) S=(\d+) D=(\d+) I=(\d+)")
# WeNet's order of decoding modes; others follow alphabetically.
MODE_ORDER = ("attention", "ctc_greedy_search", "ctc_prefix_beam_search", "attention_rescoring")
ATTENTION_SITES = (
    ("encoder_conf", "selfattention_layer_type", "enc-self"),
    ("decoder_conf", "selfattention_layer_type", "dec-self"),
    ("decoder_conf", "src_attention_layer_type", "dec-cross"),
)


@dataclass
class Experiment:
    """One ``EXP/<name>`` folder: what model it is and its error rates."""

    name: str
    path: Path
    model: str = "?"
    attention: str = "?"
    wer: Dict[Tuple[str, str], float] = field(default_factory=dict)          # (test_set, mode) -> %
    checkpoints: Dict[Tuple[str, str], str] = field(default_factory=dict)    # (test_set, mode) -> path


def parse_wer_file(path: Path) -> Optional[float]:
    """Error rate (%) from the last ``Overall -> ...`` line, or None when there is none."""
    value = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = WER_RE.match(line.strip())
        if m:
            value = float(m.group(1))
    return value


def describe_model(train_yaml: Path) -> Tuple[str, str]:
    """(model, attention) labels from a train.yaml: encoder type, and ``udps``, ``udps (sites)`` or ``dot-product``."""
    with open(train_yaml, encoding="utf-8") as f:
        config = yaml.safe_load(f) or {}
    if not isinstance(config, dict):
        raise ValueError(f"{train_yaml}: not a YAML mapping")
    model = str(config.get("encoder", "conformer"))
    decoder = config.get("decoder")
    if decoder and decoder != "transformer":
        model += f"+{decoder}"
    if config.get("att_udps", False):
        return model, "udps"
    udps_sites = []
    for section, key, label in ATTENTION_SITES:
        layer_type = str((config.get(section) or {}).get(key, ""))
        if layer_type.startswith(("udps_", "rel_udps_")):
            udps_sites.append(label)
    if not udps_sites:
        return model, "dot-product"
    if len(udps_sites) == len(ATTENTION_SITES):
        return model, "udps"
    return model, f"udps ({', '.join(udps_sites)})"


def read_checkpoint(*dirs: Path) -> str:
    """``checkpoint`` entry of the first ``decode.info`` found in ``dirs`` (most specific first), else ``-``."""
    for d in dirs:
        info = d / "decode.info"
        if info.is_file():
            for line in info.read_text(encoding="utf-8", errors="replace").splitlines():
                m = re.match(r"^\s*checkpoint\s*[:=]\s*(.+?)\s*$", line)
                if m:
                    return m.group(1)
    return "-"


def collect(exp_dir: Path) -> List[Experiment]:
    """Every experiment under ``exp_dir`` that has at least one ``<test_set>/<mode>/wer``."""
    experiments: Dict[Path, Experiment] = {}
    for wer_file in sorted(exp_dir.glob("*/*/*/wer")):
        mode_dir = wer_file.parent
        test_dir = mode_dir.parent
        exp_path = test_dir.parent
        value = parse_wer_file(wer_file)
        if value is None:
            print(f"collect_results.py: {wer_file}: no 'Overall -> ...' line, skipped", file=sys.stderr)
            continue
        if exp_path not in experiments:
            exp = Experiment(name=exp_path.name, path=exp_path)
            train_yaml = exp_path / "train.yaml"
            if train_yaml.is_file():
                exp.model, exp.attention = describe_model(train_yaml)
            else:
                print(f"collect_results.py: {train_yaml} not found; model unknown", file=sys.stderr)
            experiments[exp_path] = exp
        key = (test_dir.name, mode_dir.name)
        experiments[exp_path].wer[key] = value
        experiments[exp_path].checkpoints[key] = read_checkpoint(mode_dir, test_dir, exp_path)
    return sorted(experiments.values(), key=lambda e: (e.model, e.attention, e.name))


def mode_sort_key(mode: str) -> Tuple[int, str]:
    return (MODE_ORDER.index(mode), mode) if mode in MODE_ORDER else (len(MODE_ORDER), mode)


def columns(experiments: Sequence[Experiment]) -> List[Tuple[str, str]]:
    keys = {k for e in experiments for k in e.wer}
    return sorted(keys, key=lambda k: (k[0], mode_sort_key(k[1])))


def markdown_table(experiments: Sequence[Experiment]) -> str:
    """One row per experiment (model x attention), one column per (test set, decoding mode); error rates in %."""
    cols = columns(experiments)
    header = ["model", "attention"] + [f"{t} {m}" for t, m in cols] + ["exp", "checkpoint"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for e in experiments:
        cells = [e.model, e.attention] + [f"{e.wer[c]:.2f}" if c in e.wer else "-" for c in cols]
        ckpts = sorted({e.checkpoints[c] for c in e.wer})
        cells += [str(e.path), ", ".join(ckpts)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def read_scalars(exp_path: Path) -> Dict[str, List[Tuple[int, float]]]:
    """All scalar series under ``exp_path/tensorboard`` (any depth), as tag -> [(step, value)] sorted by step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    series: Dict[str, Dict[int, float]] = defaultdict(dict)
    tb_root = exp_path / "tensorboard"
    if not tb_root.is_dir():
        return {}
    event_dirs = sorted({p.parent for p in tb_root.rglob("events.out.tfevents*")})
    for d in event_dirs:
        acc = EventAccumulator(str(d), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags().get("scalars", []):
            for ev in acc.Scalars(tag):
                series[tag][ev.step] = ev.value  # a resumed run rewrites steps: keep the latest value
    return {tag: sorted(points.items()) for tag, points in series.items()}


def _new_axes(ncols: int = 1, width: float = 6.0):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, 4.0), squeeze=False)
    return plt, fig, axes[0]


def plot_losses(scalars: Dict[str, Dict[str, List[Tuple[int, float]]]], out: Path) -> bool:
    """train/loss and cv/loss of every experiment, one panel each; False when there is nothing to plot."""
    tags = ("train/loss", "cv/loss")
    if not any(tag in s for s in scalars.values() for tag in tags):
        return False
    plt, fig, axes = _new_axes(len(tags))
    for ax, tag in zip(axes, tags):
        for name, s in sorted(scalars.items()):
            if tag in s:
                steps, values = zip(*s[tag])
                ax.plot(steps, values, marker="o" if tag.startswith("cv/") else None, label=name)
        ax.set_title(tag)
        ax.set_xlabel("epoch" if tag.startswith("cv/") else "step")
        ax.set_ylabel("loss")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True


def plot_wer_bars(experiments: Sequence[Experiment], test_set: str, out: Path) -> None:
    """Grouped bars: decoding modes on the x axis, one bar per experiment."""
    modes = sorted({m for e in experiments for t, m in e.wer if t == test_set}, key=mode_sort_key)
    plt, fig, (ax,) = _new_axes(width=max(6.0, 1.6 * len(modes) + 2))
    width = 0.8 / max(1, len(experiments))
    for i, e in enumerate(experiments):
        xs = [j + i * width for j, m in enumerate(modes) if (test_set, m) in e.wer]
        ys = [e.wer[(test_set, m)] for m in modes if (test_set, m) in e.wer]
        bars = ax.bar(xs, ys, width=width, label=f"{e.name} ({e.model}, {e.attention})")
        ax.bar_label(bars, fmt="%.2f", fontsize=6)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(modes))], modes, fontsize=8)
    ax.set_ylabel("error rate (%)")
    ax.set_title(f"{test_set}: error rate per decoding mode")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def plot_udps(name: str, scalars: Dict[str, List[Tuple[int, float]]], out: Path) -> bool:
    """Trajectories of the head-averaged UDPS scales (``udps/<param>``, not the per-head ``/h<i>`` tags)."""
    tags = sorted(t for t in scalars if t.startswith("udps/") and not re.search(r"/h\d+$", t))
    if not tags:
        return False
    plt, fig, (ax,) = _new_axes(width=8.0)
    for tag in tags:
        steps, values = zip(*scalars[tag])
        ax.plot(steps, values, label=tag[len("udps/"):], linewidth=1)
    ax.set_title(f"{name}: UDPS scales")
    ax.set_xlabel("step")
    ax.set_ylabel("effective scale")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True


def make_plots(experiments: Sequence[Experiment], exp_dir: Path, plots_dir: Path) -> List[Path]:
    """Write all plots; returns the files written. Experiments without results still get loss/UDPS plots."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    written: List[Path] = []
    scalars = {}
    for path in sorted(p for p in exp_dir.iterdir() if p.is_dir()):
        s = read_scalars(path)
        if s:
            scalars[path.name] = s
    if plot_losses(scalars, plots_dir / "loss.png"):
        written.append(plots_dir / "loss.png")
    for name, s in sorted(scalars.items()):
        out = plots_dir / f"udps_{name}.png"
        if plot_udps(name, s, out):
            written.append(out)
    for test_set in sorted({t for e in experiments for t, _ in e.wer}):
        out = plots_dir / f"wer_{test_set}.png"
        plot_wer_bars(experiments, test_set, out)
        written.append(out)
    return written


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exp_dir", type=Path, default=Path("exp"))
    parser.add_argument("--out", type=Path, default=None, help="Markdown file (default EXP_DIR/RESULTS.md)")
    parser.add_argument("--plots_dir", type=Path, default=None, help="PNG folder (default EXP_DIR/plots)")
    args = parser.parse_args(argv)
    if not args.exp_dir.is_dir():
        print(f"collect_results.py: {args.exp_dir} is not a directory", file=sys.stderr)
        return 1
    out = args.out or args.exp_dir / "RESULTS.md"
    plots_dir = args.plots_dir or args.exp_dir / "plots"
    try:
        experiments = collect(args.exp_dir)
    except (OSError, ValueError, yaml.YAMLError) as e:
        print(f"collect_results.py: {e}", file=sys.stderr)
        return 1
    if experiments:
        table = markdown_table(experiments)
    else:
        table = f"No results: no {args.exp_dir}/<name>/<test_set>/<mode>/wer files.\n"
    text = f"# Results\n\nError rates (%) from compute-wer.py, `{args.exp_dir}/<name>/<test_set>/<mode>/wer`.\n\n{table}"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(table, end="")
    for p in make_plots(experiments, args.exp_dir, plots_dir):
        print(f"collect_results.py: wrote {p}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
