"""Plots of tools/collect_results.py (PNG, matplotlib Agg): losses, error-rate bars, learned α/β of each family.

Scalars come from TensorBoard (tags in wenet_udps/train/tensorboard.py): per optimizer step (``train/*``,
``udps/*``, every ``log_interval``) and per epoch (``cv/*``, ``train_epoch/*``, ``udps_epoch/*``), so a run
shorter than ``log_interval`` still gets its loss and α/β plots.
"""
import re
from pathlib import Path
from typing import Dict, List, Mapping, Sequence, Tuple

from wenet_udps.utils.atomic import open_atomic

Series = List[Tuple[int, float]]
# udps[_epoch]/<module path>.<param>[/h<i>], module path e.g. decoder.left_decoder.decoders.0.src_attn
UDPS_TAG = re.compile(r"^(udps|udps_epoch)/(encoder|decoder)(?:\.(left|right)_decoder)?\.\w+\.(\d+)\."
                      r"(self_attn|src_attn)\.(\w+?)(?:/h(\d+))?$")
SITE_NAMES = {("encoder", "self_attn"): "encoder self-attention", ("decoder", "self_attn"): "decoder self-attention",
              ("decoder", "src_attn"): "decoder cross-attention"}
SITE_ORDER = tuple(SITE_NAMES.values())
SYMBOL_STYLE = {"α": "-", "β": "--"}   # a scale of another symbol (or none known) is dotted
# parameter name -> (symbol, family display name), transformer.attention.scale_symbols (passed in: this layer does
# not import the model)
Scales = Mapping[str, Tuple[str, str]]


def scale_style(param: str, scales: Scales) -> Tuple[str, str]:
    """(legend symbol, line style) of a learned scale's parameter name: α solid, β dashed (``cos_alpha`` too)."""
    symbol = scales[param][0] if param in scales else param
    return symbol, SYMBOL_STYLE.get(symbol, ":")


def scales_title(params: Sequence[str], scales: Scales) -> str:
    """The families of the scales drawn, as the title names them: ``cosine``, ``UDPS``, ``UDPS and cosine``."""
    families = sorted({scales[p][1] for p in params if p in scales})
    return " and ".join(families) if families else "attention"


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_losses(scalars: Mapping[str, Mapping[str, Series]], out: Path) -> bool:
    """Panels: train loss per step (when logged), and train/cv loss per epoch; one line per experiment."""
    panels = [("train/loss", "train loss (every log_interval steps)", "optimizer step"),
              ("train_epoch/loss", "train loss (epoch mean)", "epoch"), ("cv/loss", "cv loss", "epoch")]
    panels = [p for p in panels if any(p[0] in s for s in scalars.values())]
    if not panels:
        return False
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.0), squeeze=False)
    for ax, (tag, title, xlabel) in zip(axes[0], panels):
        for name, s in sorted(scalars.items()):
            if tag in s:
                steps, values = zip(*s[tag])
                ax.plot(steps, values, marker="o" if xlabel == "epoch" else None, label=name)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("loss")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    with open_atomic(out, "wb") as f:
        fig.savefig(f, dpi=100, format="png")
    plt.close(fig)
    return True


def plot_error_bars(rows: Sequence[Tuple[str, Dict[Tuple[str, str], float], Dict[Tuple[str, str], float]]],
                    sets: Sequence[str], modes: Sequence[str], metric: str, out: Path) -> None:
    """One panel per scored set; decoding modes on the x axis, one bar per experiment.

    ``rows``: (label, values, errors), keyed by (set, mode); an error (the std over seeds) draws an error bar, and
    the bar's label then reads ``mean±std``.
    """
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(sets), figsize=(max(5.0, 1.3 * len(modes) + 2) * len(sets), 4.2),
                             squeeze=False, sharey=True)
    width = 0.8 / max(1, len(rows))
    for ax, test_set in zip(axes[0], sets):
        for i, (label, values, errors) in enumerate(rows):
            keys = [(j, (test_set, m)) for j, m in enumerate(modes) if (test_set, m) in values]
            ys = [values[k] for _, k in keys]
            errs = [errors.get(k, 0.0) for _, k in keys]
            bars = ax.bar([j + i * width for j, _ in keys], ys, width=width, label=label,
                          yerr=errs if any(errs) else None, capsize=3)
            ax.bar_label(bars, labels=[f"{y:.1f}±{e:.1f}" if e else f"{y:.1f}" for y, e in zip(ys, errs)],
                         fontsize=7)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(modes))], [m.replace("_", "\n") for m in modes],
                      fontsize=8)
        ax.set_title(test_set)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel(f"{metric} (%)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", fontsize=8, ncol=len(labels))
    fig.suptitle(f"{metric} per decoding mode (lower is better)")
    fig.tight_layout(rect=(0, 0.5 / fig.get_figheight(), 1, 1))
    with open_atomic(out, "wb") as f:
        fig.savefig(f, dpi=100, format="png")
    plt.close(fig)


def udps_panels(scalars: Mapping[str, Series], per_epoch: bool) -> Dict[Tuple[str, int], Dict[Tuple[str, int], Series]]:
    """(site name, layer) -> (param, head) -> series, from the per-head tags (head -1: a shared scale)."""
    prefix = "udps_epoch" if per_epoch else "udps"
    panels: Dict[Tuple[str, int], Dict[Tuple[str, int], Series]] = {}
    heads = {t for t in scalars if UDPS_TAG.match(t) and UDPS_TAG.match(t).group(7) is not None}
    for tag, series in scalars.items():
        m = UDPS_TAG.match(tag)
        if not m or m.group(1) != prefix:
            continue
        part, direction, layer, kind, param, head = m.group(2, 3, 4, 5, 6, 7)
        if head is None and any(h.startswith(tag + "/h") for h in heads):
            continue  # the head mean: the heads themselves are drawn
        site = SITE_NAMES[(part, kind)] + (" (right-to-left)" if direction == "right" else "")
        panels.setdefault((site, int(layer)), {})[(param, -1 if head is None else int(head))] = series
    return panels


def plot_udps(name: str, scalars: Mapping[str, Series], out: Path, per_epoch: bool, scales: Scales) -> bool:
    """Small multiples: a row per attention site, a column per layer; per head one colour, α solid, β dashed."""
    panels = udps_panels(scalars, per_epoch)
    if not panels:
        return False
    sites = sorted({s for s, _ in panels}, key=lambda s: ("right-to-left" in s, SITE_ORDER.index(s.split(" (")[0])))
    layers = sorted({layer for _, layer in panels})
    plt = _pyplot()
    fig, axes = plt.subplots(len(sites), len(layers), figsize=(2.6 * len(layers) + 1.5, 2.3 * len(sites) + 0.8),
                             squeeze=False, sharex=True, sharey="row")
    from matplotlib.ticker import MaxNLocator
    colours = plt.get_cmap("tab10")
    for r, site in enumerate(sites):
        for c, layer in enumerate(layers):
            ax = axes[r][c]
            for (param, head), series in sorted(panels.get((site, layer), {}).items()):
                steps, values = zip(*series)
                symbol, style = scale_style(param, scales)
                ax.plot(steps, values, style, color=colours(max(head, 0) % 10),
                        marker="o" if per_epoch and len(steps) < 30 else None, markersize=3, linewidth=1.2,
                        label=f"{symbol}{' shared' if head < 0 else f' head {head}'}")
            if (site, layer) not in panels:
                ax.set_axis_off()
            ax.set_title(f"{site}, layer {layer}", fontsize=9)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
            ax.yaxis.get_major_formatter().set_useOffset(False)   # show the scale itself, not "1e-6 + 5"
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes[r][0].set_ylabel("effective scale", fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel("epoch" if per_epoch else "optimizer step", fontsize=8)
    handles, labels = _legend_entries(axes)
    ncol = max(1, len({label.split(" ", 1)[1] for label in labels}))
    fig.legend(handles, labels, loc="lower center", fontsize=8, ncol=ncol)
    drawn = {param for series in panels.values() for param, _ in series}
    fig.suptitle(f"{name}: learned {scales_title(sorted(drawn), scales)} scales per {'epoch' if per_epoch else 'step'} "
                 f"(α solid, β dashed, one colour per head)", fontsize=10)
    fig.tight_layout(rect=(0, 0.9 / fig.get_figheight(), 1, 1))
    with open_atomic(out, "wb") as f:
        fig.savefig(f, dpi=100, format="png")
    plt.close(fig)
    return True


def _legend_entries(axes) -> Tuple[List, List[str]]:
    seen: Dict[str, object] = {}
    for row in axes:
        for ax in row:
            for h, label in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(label, h)
    # Column-major legend with one column per head: alpha above beta.
    labels = sorted(seen, key=lambda s: (s.split(" ", 1)[1], s))
    return [seen[label] for label in labels], labels


def udps_outputs(name: str, scalars: Mapping[str, Series], plots_dir: Path, scales: Scales) -> List[Path]:
    """``udps_<name>_epochs.png`` and ``udps_<name>_steps.png`` where the run logged those scalars (any family's
    learned scales; ``scales``: :data:`Scales`)."""
    written: List[Path] = []
    for per_epoch, suffix in ((True, "epochs"), (False, "steps")):
        out = plots_dir / f"udps_{name}_{suffix}.png"
        if plot_udps(name, scalars, out, per_epoch, scales):
            written.append(out)
    return written
