"""Attention weights as the model computes them, recorded while it runs (teacher forcing over a data list), their
row entropy, and the figures of bin/plot_attention: one heat-map per site with its colour bar, entropy bars per head.

The weights are recomputed from each site's q, k (and positions) by the plain formulas (softmax of q.k/sqrt(d) with
the position terms for scaled-dot, of the UDPS scores for UDPS, of unit q and scaled unit keys for cosine), so they
are what the kernels compute. Each call is recorded as an :class:`AttentionCall`: the weights, the keep-mask and, for
UDPS, the two norms of its denominator (wenet_udps.decode.norm_ratio reads them).
"""
import contextlib
import logging
import math
import os
import threading
from typing import Dict, List, NamedTuple, Optional

import torch

from wenet_udps.dataset.dataset import DataTally
from wenet_udps.decode.data_list import eval_dataset, load_experiment
from wenet_udps.kernels.reference import udps_scores, upcast
from wenet_udps.text import init_tokenizer
from wenet_udps.kernels.cosine import unit_rows
from wenet_udps.transformer import attention as attention_module, cosine_attention as cosine_module, \
    udps_attention as udps_module
from wenet_udps.utils.atomic import open_atomic
from wenet_udps.utils.cli import UserError


class AttentionCall(NamedTuple):
    """One attention call as recorded: ``weights`` (B, H, T1, T2), masked keys at 0; ``mask`` the keep-mask
    (B, 1|T1, T2), None for none; for UDPS the norms of its denominator (|q| + n)^2 in float32 or wider, ``q_norm``
    (B, H, T1) and ``k_norm`` (B|1, H, T2) (None for the other families)."""
    weights: torch.Tensor
    mask: Optional[torch.Tensor]
    q_norm: Optional[torch.Tensor] = None
    k_norm: Optional[torch.Tensor] = None


def _keep(mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """A kernel's mask argument (B, 1|T1, T2), empty or None -> the keep-mask, or None for none."""
    return None if mask is None or mask.numel() == 0 else mask


def _call(scores: torch.Tensor, mask: Optional[torch.Tensor], q_norm: Optional[torch.Tensor] = None,
          k_norm: Optional[torch.Tensor] = None) -> AttentionCall:
    """The record of a call: softmax of ``scores`` (B, H, T1, T2) over the kept keys, masked keys at 0."""
    keep = _keep(mask)
    if keep is not None:
        scores = scores.masked_fill(~keep.unsqueeze(1), -math.inf)
    return AttentionCall(torch.softmax(scores, dim=-1).nan_to_num(0.0), keep, q_norm, k_norm)


# The kernel entries are replaced while any thread records (_PATCH); what a call records goes to the recording of
# the thread that makes it (_OWN), so a thread decoding meanwhile, this model or another, computes as ever and
# records nothing, and two threads' recordings stay apart.
_PATCH = {"lock": threading.Lock(), "open": 0, "originals": []}
_OWN = threading.local()


def _recorded(entry, record):
    """``entry`` (a kernel function) that first adds ``record(*args, **kwargs)`` (an :class:`AttentionCall`) to the
    calling thread's recording, if it has one, under the attention site running in that thread."""
    def recorder(*args, **kwargs):
        stack = getattr(_OWN, "stack", None)
        if stack and stack[-1][1]:
            records, current = stack[-1]
            records.setdefault(current[-1], []).append(record(*args, **kwargs))
        return entry(*args, **kwargs)
    return recorder


@contextlib.contextmanager
def recording(model: torch.nn.Module):
    """Yield ``{site name: [AttentionCall per call]}`` filled while the model runs in this thread."""
    records: Dict[str, List[AttentionCall]] = {}
    current: List[str] = []
    me = threading.get_ident()

    def enter(_module, _args, name):
        if threading.get_ident() == me:
            current.append(name)

    def leave(*_):
        if threading.get_ident() == me:
            current.pop()
        # (None: the output is kept)

    hooks = []
    for name, module in model.named_modules():
        if isinstance(module, attention_module.MultiHeadedAttention):
            hooks.append(module.register_forward_pre_hook(lambda m, a, n=name: enter(m, a, n)))
            hooks.append(module.register_forward_hook(leave))
    stack = _OWN.__dict__.setdefault("stack", [])
    stack.append((records, current))
    _open()
    try:
        yield records
    finally:
        _close()
        del stack[next(i for i, (r, _) in enumerate(stack) if r is records)]
        for h in hooks:
            h.remove()


def _open() -> None:
    """One more recording open; the first replaces the kernel entries (:func:`_recorders`)."""
    with _PATCH["lock"]:
        if _PATCH["open"] == 0:
            _PATCH["originals"] = _recorders()
        _PATCH["open"] += 1


def _close() -> None:
    """One recording fewer; the last puts the kernel entries back."""
    with _PATCH["lock"]:
        _PATCH["open"] -= 1
        if _PATCH["open"] == 0:
            for owner, entry, original in _PATCH["originals"]:
                setattr(owner, entry, original)
            _PATCH["originals"] = []


def _recorders() -> List[tuple]:
    """Replace every kernel entry the attention modules call, in the module whose classes call it (plain UDPS layers
    form their keys' terms in the kernel), by one that also records; returns (module, name, original) of each."""
    sdpa = attention_module.scaled_dot_attention
    udps, udps_keys = udps_module.udps_attention, udps_module.udps_attention_from_keys

    def scaled_dot(q, k, v, mask, dropout_p, scale=None):
        s = torch.matmul(q, k.transpose(-2, -1)) * (scale if scale is not None else q.size(-1) ** -0.5)
        return _call(s, mask)

    # UDPS: the denominator's norms are |q| and the key norms the entry is given (|k|, never |k~|; see
    # kernels/reference.py), computed as udps_scores computes them.
    def udps_fn(q, k_num, k_norm, v, mask=None, bias=None, eps=1e-6, **kwargs):
        s = udps_scores(q, k_num, k_norm, eps) + (0.0 if bias is None else bias)
        return _call(s, mask, torch.linalg.vector_norm(upcast(q), dim=-1), upcast(k_norm))

    def udps_keys_fn(q, k, scale, v, mask=None, eps=1e-6, **kwargs):
        k_norm = torch.linalg.vector_norm(upcast(k), dim=-1)
        return _call(udps_scores(q, scale * k, k_norm, eps), mask, torch.linalg.vector_norm(upcast(q), dim=-1),
                     k_norm)

    cosine = cosine_module.cosine_attention

    def cosine_fn(q, k_tilde, v, mask, dropout_p=0.0, eps=1e-6):
        s = torch.matmul(upcast(unit_rows(q, eps)), upcast(k_tilde).transpose(-2, -1))
        return _call(s, mask)

    replaced = [(attention_module, "scaled_dot_attention", sdpa, scaled_dot),
                (udps_module, "udps_attention", udps, udps_fn),
                (udps_module, "udps_attention_from_keys", udps_keys, udps_keys_fn),
                (cosine_module, "cosine_attention", cosine, cosine_fn)]
    for owner, entry, original, record in replaced:
        setattr(owner, entry, _recorded(original, record))
    return [(owner, entry, original) for owner, entry, original, _ in replaced]


def row_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of each query row: (B, H, T1, T2) -> (B, H, T1)."""
    return -(weights * weights.clamp_min(1e-30).log()).sum(-1)


def collect(exp_dir: str, checkpoint: str, test_data: str, utt: Optional[str], data_type: str = "raw"):
    """(per-site head-mean weights of the chosen utterance (T1, T2), per-site mean entropy per head (H,))."""
    config, model = load_experiment(exp_dir, checkpoint)
    tokenizer = init_tokenizer(config)
    dataset = eval_dataset(config, tokenizer, test_data, 1, data_type)
    key: Optional[str] = None
    maps: Dict[str, torch.Tensor] = {}
    sums: Dict[str, torch.Tensor] = {}
    rows: Dict[str, int] = {}
    tally = DataTally()
    with torch.inference_mode(), recording(model) as records:
        for batch in tally.batches(dataset):
            records.clear()
            model(batch["feats"], batch["feats_lengths"], batch["target"], batch["target_lengths"])
            take = key is None and (utt is None or batch["keys"][0] == utt)
            key = batch["keys"][0] if take else key
            for site, calls in records.items():
                w = calls[0].weights[0]  # batch size 1: (H, T1, T2)
                sums[site] = sums.get(site, 0) + row_entropy(w).sum(-1)
                rows[site] = rows.get(site, 0) + w.size(1)
                if take:
                    maps[site] = w.mean(0)
    logging.info("%s", dataset.check_tally(tally, "plot_attention"))  # an empty list: exit 1 with the counts
    if key is None:
        raise UserError(f"--utt {utt}: no such utterance among the {tally.counts['used']} used of {test_data}")
    return key, maps, {site: sums[site] / rows[site] for site in sums}


def weight_grid(label: str, key: str, maps: Dict[str, torch.Tensor]):
    """One figure of ``maps`` (site -> (T_q, T_k) weights, mean over heads), each heat-map with its colour bar."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(maps)
    cols = min(4, n)
    fig, axes = plt.subplots(math.ceil(n / cols), cols, figsize=(3.6 * cols, 2.8 * math.ceil(n / cols)),
                             squeeze=False)
    for ax, (site, w) in zip(axes.flat, maps.items()):
        image = ax.imshow(w.numpy(), aspect="auto", origin="lower", cmap="viridis", vmin=0.0)
        bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
        bar.set_label("weight", fontsize=6)
        bar.ax.tick_params(labelsize=6)
        ax.set_title(site.replace("encoders.", "enc").replace("decoders.", "dec"), fontsize=7)
        ax.set_xlabel("key", fontsize=7)
        ax.set_ylabel("query", fontsize=7)
        ax.tick_params(labelsize=6)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(f"{label}: attention weights (mean over heads), {key}", fontsize=9)
    fig.tight_layout()
    return fig


def plot(results: Dict[str, tuple], out_dir: str) -> List[str]:
    """Write the per-experiment weight grids and the entropy bar chart; returns the paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for label, (key, maps, _) in results.items():
        fig = weight_grid(label, key, maps)
        path = os.path.join(out_dir, f"attention_{label}.png")
        with open_atomic(path, "wb") as f:
            fig.savefig(f, dpi=110, format="png")
        plt.close(fig)
        paths.append(path)
    sites = list(next(iter(results.values()))[2])
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(sites)), 3.6))
    width = 0.8 / len(results)
    for i, (label, (_, _, entropy)) in enumerate(results.items()):
        for j, site in enumerate(sites):
            heads = entropy[site].numpy()
            xs = [j + (i - (len(results) - 1) / 2) * width + (h - (len(heads) - 1) / 2) * width / len(heads)
                  for h in range(len(heads))]
            ax.bar(xs, heads, width=width / len(heads), color=f"C{i}", label=label if j == 0 else None)
    ax.set_xticks(range(len(sites)))
    ax.set_xticklabels([s.replace("encoder.encoders.", "enc").replace("decoder.decoders.", "dec")
                        for s in sites], rotation=60, ha="right", fontsize=6)
    ax.set_ylabel("mean row entropy (nats), one bar per head")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(out_dir, "attention_entropy.png")
    with open_atomic(path, "wb") as f:
        fig.savefig(f, dpi=110, format="png")
    plt.close(fig)
    return paths + [path]
