"""Where UDPS and cosine attention differ (issue 81): the distribution of r = |q| / |k| per UDPS site, layer and head,
recorded while the model runs with teacher forcing over a data list (the reference transcript feeds the decoder).

Per head, UDPS = 4 alpha q.k / (|q| + |k|)^2 = alpha cos(q, k) g(r), g(r) = 4 r / (1 + r)^2 (docs/udps.md); cosine
attention is the same without g. g is 1 only at r = 1; g < 0.9 when r is outside [0.520, 1.925], g < 0.5 outside
[0.172, 5.83]. If g is near 1 on the pairs the model attends to, UDPS is cosine attention in practice.

**Which norms.** r is the ratio of the two norms of the score's denominator as the kernel receives them (recorded by
:func:`wenet_udps.decode.attention_maps.recording`, the one recording mechanism; nothing is recomputed from the
projections): the query's |q| and the key norm n of ``scores = q.k~ / max((|q| + n)^2, eps)`` (kernels/reference.py).

- ``udps_selfattn``, ``udps_crossattn``: n = |k|, k the key's head of linear_k.
- ``rel_udps_selfattn``, ``pos_norm: qk`` (the default, the paper author's variant): the numerator is
  q.(4 alpha k + 4 beta p), p = linear_pos(pos_emb), but the denominator is (|q| + |k|)^2 with the content key k alone
  (p is not in it; |k~| is not used). So r = |q| / |k|, and g(r) scales the position term too:
  4 beta q.p / (|q| + |k|)^2 = beta cos(q, p) (|p| / |k|) g(r).
- ``rel_udps_selfattn``, ``pos_norm: qp``: two denominators; r is the content term's |q| / |k|. The position term's
  own ratio |q| / |p| (of (|q| + |p|)^2) reaches the kernel inside a precomputed score term and is not measured.

g is computed as 4 |q| |k| / (|q| + |k|)^2 (the eps floor of the denominator, 1e-6, is ignored).

**Pairs.** A valid (query, key) pair is one the attention mask keeps, with a query that is not padding: in the
encoder (self-attention) the queries are the keys, valid where some row keeps the key; in the decoder the first L + 1
positions (sos and the L tokens of the transcript, ASRModel's ``ys_in_lens``). Two weightings: ``uniform``, each
valid pair counts 1; ``attention``, each counts the weight the model puts on it (each valid query row's weights sum
to 1, so the total is the number of rows: ``attention_mass_per_row`` is 1), the distribution that reaches the output.

**Statistics** per head and weighting: the mean of g and the fractions of pairs with g < 0.9 and g < 0.5 (exact sums
in float64); the quantiles of r, read off a histogram of log10 r with ``BINS_PER_DECADE`` bins per decade over
10^-6..10^6 (linear inside a bin, so within a factor 10^(1/BINS_PER_DECADE) of the exact inverse-CDF quantile; a
quantile beyond the range is reported as its edge, and ``below``/``above`` say how much lies there); and that
histogram merged to ``HIST_BINS_PER_DECADE`` bins per decade.
"""
import logging
import os
import re
import statistics
from typing import Any, Dict, List, Optional, Tuple

import torch

from wenet_udps.config import load_config
from wenet_udps.dataset.dataset import DataTally
from wenet_udps.decode.attention_maps import AttentionCall, recording
from wenet_udps.decode.data_list import eval_dataset, model_from_checkpoint
from wenet_udps.model_builder import build_model
from wenet_udps.text import init_tokenizer
from wenet_udps.transformer.attention import MultiHeadedAttention
from wenet_udps.transformer.udps_attention import UDPS
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.source_info import file_sha256

QUANTILES = (1, 5, 25, 50, 75, 95, 99)      # percent
G_BELOW = (0.9, 0.5)
LOG10_LOW, LOG10_HIGH = -6, 6               # the histogram's range of log10 r
BINS_PER_DECADE = 1000                      # the quantiles' resolution: 0.23 % of r
HIST_BINS_PER_DECADE = 10                   # the histogram written out
N_BINS = (LOG10_HIGH - LOG10_LOW) * BINS_PER_DECADE
WEIGHTINGS = ("uniform", "attention")


def udps_sites(model: torch.nn.Module) -> Dict[str, Tuple[str, int, MultiHeadedAttention]]:
    """Module path -> (site: enc_self / dec_self / dec_cross, layer index, module) of every UDPS attention."""
    in_encoder = {id(m) for m in model.encoder.modules()}
    sites = {}
    for path, module in model.named_modules():
        if isinstance(module, MultiHeadedAttention) and module.family == UDPS:
            site = "enc_self" if id(module) in in_encoder else "dec_cross" if module.kind == "cross" else "dec_self"
            layer = re.search(r"\.(\d+)\.", path)
            sites[path] = (site, int(layer.group(1)) if layer else 0, module)
    return sites


def valid_pairs(mask: Optional[torch.Tensor], query_valid: torch.Tensor, keys: int) -> torch.Tensor:
    """Keep-mask (B, 1|T1, T2) or None, valid queries (B, T1) -> the valid pairs (B, 1, T1, T2)."""
    keep = torch.ones(query_valid.size(0), 1, keys, dtype=torch.bool) if mask is None else mask.bool()
    return keep.unsqueeze(1) & query_valid[:, None, :, None]


class RatioTally:
    """Sums over the valid pairs of one attention, per head and weighting: a histogram of log10 r (bin 0 below
    10^LOG10_LOW, the last above 10^LOG10_HIGH), the sums of g and of the indicators g < t."""

    def __init__(self, n_head: int):
        self.n_head = n_head
        self.hist = torch.zeros(len(WEIGHTINGS), n_head, N_BINS + 2, dtype=torch.float64)
        self.g_sum = torch.zeros(len(WEIGHTINGS), n_head, dtype=torch.float64)
        self.g_below = torch.zeros(len(WEIGHTINGS), len(G_BELOW), n_head, dtype=torch.float64)
        self.rows = 0

    def add(self, call: AttentionCall, query_valid: torch.Tensor) -> None:
        """One recorded call (its UDPS norms and weights) with its valid queries (B, T1)."""
        q = call.q_norm.double().unsqueeze(-1)   # (B, H, T1, 1)
        k = call.k_norm.double().unsqueeze(-2)   # (B|1, H, 1, T2)
        keep = valid_pairs(call.mask, query_valid, k.size(-1)).double()
        weights = (torch.broadcast_to(keep, call.weights.shape), call.weights.double() * keep)
        denom = (q + k).square()
        g = torch.where(denom > 0, 4.0 * q * k / denom.clamp_min(1e-300), 0.0)
        # r = 0/0 (both norms 0) counts below the range, r = x/0 above it.
        log_r = torch.log10(q / k).nan_to_num(nan=-torch.inf)
        index = ((log_r - LOG10_LOW) * BINS_PER_DECADE).floor().clamp(-1, N_BINS).long() + 1
        index = index + torch.arange(self.n_head).view(1, -1, 1, 1) * (N_BINS + 2)
        for i, w in enumerate(weights):
            self.hist[i] += torch.bincount(index.flatten(), w.flatten(), self.n_head * (N_BINS + 2)).view(
                self.n_head, -1)
            self.g_sum[i] += (w * g).sum((0, 2, 3))
            for j, t in enumerate(G_BELOW):
                self.g_below[i, j] += (w * (g < t)).sum((0, 2, 3))
        self.rows += int(query_valid.sum())

    def summary(self, head: int) -> Dict[str, Any]:
        """The JSON record of one head: pair and row counts, then per weighting its statistics (None without
        pairs)."""
        out: Dict[str, Any] = {"pairs": int(self.hist[0, head].sum()), "rows": self.rows}
        for i, name in enumerate(WEIGHTINGS):
            mass = self.hist[i, head]
            total = float(mass.sum())
            out[name] = None if total == 0 else {
                "r_quantiles": {f"{p:g}": quantile(mass, p / 100) for p in QUANTILES},
                "mean_g": float(self.g_sum[i, head]) / total,
                **{f"frac_g_below_{t:g}": float(self.g_below[i, j, head]) / total for j, t in enumerate(G_BELOW)},
                "histogram": coarse_histogram(mass)}
        if self.rows and out["attention"] is not None:
            out["attention_mass_per_row"] = float(self.hist[1, head].sum()) / self.rows
        return out


def quantile(mass: torch.Tensor, p: float) -> float:
    """The ``p`` quantile of r from its fine histogram (N_BINS + 2,): the bin where the cumulative mass reaches p,
    linear in log10 r inside it; the range's edge when it lies beyond."""
    cum = mass.cumsum(0)
    target = p * float(cum[-1])
    i = int(torch.searchsorted(cum, torch.tensor([target], dtype=cum.dtype))[0])
    if i == 0:
        return 10.0 ** LOG10_LOW
    if i > N_BINS:
        return 10.0 ** LOG10_HIGH
    inside = (target - float(cum[i - 1])) / float(mass[i]) if mass[i] > 0 else 1.0
    return 10.0 ** (LOG10_LOW + (i - 1 + min(max(inside, 0.0), 1.0)) / BINS_PER_DECADE)


def coarse_histogram(mass: torch.Tensor) -> Dict[str, Any]:
    """The fine histogram as fractions in HIST_BINS_PER_DECADE bins per decade, over the bins that hold any."""
    total = float(mass.sum())
    merge = BINS_PER_DECADE // HIST_BINS_PER_DECADE
    coarse = mass[1:-1].view(-1, merge).sum(1) / total
    held = torch.nonzero(coarse).flatten()
    first, last = (int(held[0]), int(held[-1]) + 1) if held.numel() else (0, 0)
    return {"log10_r_edges": [round(LOG10_LOW + b / HIST_BINS_PER_DECADE, 6) for b in range(first, last + 1)],
            "fraction": [round(float(x), 6) for x in coarse[first:last]],
            "below": float(mass[0]) / total, "above": float(mass[-1]) / total}


def collect(model: torch.nn.Module, batches, max_utts: Optional[int] = None) -> Tuple[Dict[str, RatioTally], int]:
    """Run ``model`` with teacher forcing over ``batches`` (dicts with feats, feats_lengths, target,
    target_lengths), at most ``max_utts`` utterances; (module path -> its tally, utterances used)."""
    sites = udps_sites(model)
    tallies = {path: RatioTally(module.h) for path, (_, _, module) in sites.items()}
    used = 0
    with torch.inference_mode(), recording(model) as records:
        for batch in batches:
            n = batch["feats"].size(0) if max_utts is None else min(batch["feats"].size(0), max_utts - used)
            feats, feats_lengths = batch["feats"][:n], batch["feats_lengths"][:n]
            target, target_lengths = batch["target"][:n], batch["target_lengths"][:n]
            records.clear()
            model(feats, feats_lengths, target, target_lengths)
            for path, calls in records.items():
                if path not in tallies:
                    continue
                for call in calls:
                    t1 = call.weights.size(2)
                    if sites[path][0] == "enc_self":   # self-attention: the queries are the keys
                        valid = (torch.ones(n, t1, dtype=torch.bool) if call.mask is None
                                 else call.mask.bool().any(1))
                    else:                              # sos + the transcript's tokens
                        valid = torch.arange(t1).unsqueeze(0) < (target_lengths + 1).unsqueeze(1)
                    tallies[path].add(call, valid)
            used += n
            if max_utts is not None and used >= max_utts:
                break
    return tallies, used


def measure(config_path: str, checkpoint: str, test_data: str, *, data_type: str = "raw", batch_size: int = 8,
            max_utts: Optional[int] = None) -> Dict[str, Any]:
    """The JSON record of the bin: the model's source, the definitions, and per UDPS site, layer and head its
    statistics (the module docstring). UserError when the model has no UDPS site."""
    config = load_config(config_path)
    # The sites are known from the conf alone: refuse before the weights are read (and warned about).
    if not udps_sites(build_model(config)):
        raise UserError(f"{config_path}: the model has no UDPS attention site (r = |q|/|k| is UDPS's length "
                        f"factor's argument): give a UDPS model's train.yaml")
    model = model_from_checkpoint(config, checkpoint)
    sites = udps_sites(model)
    dataset = eval_dataset(config, init_tokenizer(config), test_data, batch_size, data_type)
    tally = DataTally()
    tallies, used = collect(model, tally.batches(dataset), max_utts)
    logging.info("%s", dataset.check_tally(tally, "norm_ratio"))  # an empty list: exit 1 with the counts
    records = []
    for path, (site, layer, module) in sites.items():
        scales = {name: value.flatten().tolist() for name, value in module.effective_scales().items()}
        heads = [{"head": h, **{name: v[h if len(v) > 1 else 0] for name, v in scales.items()},
                  **tallies[path].summary(h)} for h in range(module.h)]
        records.append({"path": path, "site": site, "layer": layer, "type": module.name,
                        "pos_norm": getattr(module, "pos_norm", None), "heads": heads})
    return {"config": os.path.abspath(config_path), "checkpoint": os.path.abspath(checkpoint),
            "checkpoint_sha256": file_sha256(checkpoint), "test_data": os.path.abspath(test_data),
            "utterances": used, "r": "|q| / |k|, the norms of each head's denominator (wenet_udps.decode.norm_ratio)",
            "g": "4 r / (1 + r)^2", "quantile_resolution_log10": 1 / BINS_PER_DECADE,
            "weightings": list(WEIGHTINGS), "sites": records}


def table(result: Dict[str, Any]) -> str:
    """Per site and layer: the median over heads of each head's median r, the mean over heads of the mean g and of
    the fraction g < 0.9, uniform / attention-weighted."""
    lines = ["site      layer  heads  median r (unif/att)  mean g (unif/att)  g<0.9 (unif/att)  path"]
    columns = ((statistics.median, lambda s: s["r_quantiles"]["50"]), (statistics.fmean, lambda s: s["mean_g"]),
               (statistics.fmean, lambda s: s["frac_g_below_0.9"]))
    for record in result["sites"]:
        cells = []
        for over_heads, value in columns:
            cells.append(" / ".join(_over_heads(record["heads"], w, over_heads, value) for w in WEIGHTINGS))
        lines.append(f"{record['site']:<9} {record['layer']:>5}  {len(record['heads']):>5}  {cells[0]:>19}  "
                     f"{cells[1]:>17}  {cells[2]:>16}  {record['path']}")
    return "\n".join(lines) + "\n"


def _over_heads(heads: List[Dict[str, Any]], weighting: str, over_heads, value) -> str:
    values = [value(h[weighting]) for h in heads if h[weighting] is not None]
    return f"{over_heads(values):.3g}" if values else "-"
