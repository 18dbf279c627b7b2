"""The attention-site ablation (run.sh --udps_sites): one row per site set, each tested against all-scaled-dot.

run.sh names each model's exp dir ``<prefix>_<label>[_seed<N>]`` after what the built model has (``scaled_dot``,
``udps``, ``udps_enc_self``, ``udps_dec_self_dec_cross``, ...; wenet_udps.bin.describe). Models sharing a prefix
with a ``<prefix>_scaled_dot`` model and two or more UDPS site sets form an ablation; tools/collect_results.py
renders it as one table per scored set: a row per site set, a column per decoding mode, each cell the error rate
pooled over the seeds that every site set has and the paired test against the scaled-dot row (wenet_udps.scoring
.significance: bootstrap 95 % CI and permutation p over utterances). Every row is on the same seeds, so that rows
compare with each other too: an ablation of seeds 1-3 beside ten seeds of scaled-dot and UDPS compares seeds 1-3
(the ten are in RESULTS.md's significance section). Unseeded models count as one seed.
"""
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence

from wenet_udps.results.seeds import BASELINE_SUFFIX, SEED_RE
from wenet_udps.scoring.significance import compare_files

# The paper author's fork has UDPS in the encoder self-attention only: its row says so.
FORK_LABEL = "udps_enc_self"
Runs = Dict[Optional[int], str]   # seed (None: the config's own) -> experiment name


def site_set(label: str, sites: Sequence[str]) -> str:
    """A run label as the --udps_sites value that trains it: ``scaled_dot`` -> ``none``, ``udps`` -> ``all``,
    ``udps_dec_self_dec_cross`` -> ``dec_self+dec_cross``. ``sites``: the site names in order
    (wenet_udps.transformer.site_families.SITES, passed in: this layer does not import the model)."""
    if label == "scaled_dot":
        return "none"
    if label == "udps":
        return "all"
    return "+".join(s for s in sites if s in label[len("udps_"):])


def ablations(names: Sequence[str]) -> Dict[str, Dict[str, Runs]]:
    """``{prefix: {label: runs}}`` for every prefix with a scaled-dot model and at least two UDPS site sets."""
    by_base: Dict[str, Runs] = {}
    for name in names:
        m = SEED_RE.match(name)
        base, seed = (m.group(1), int(m.group(2))) if m else (name, None)
        by_base.setdefault(base, {})[seed] = name
    found = {}
    for base in by_base:
        if not base.endswith(BASELINE_SUFFIX):
            continue
        prefix = base[:-len(BASELINE_SUFFIX)]
        rows = {"scaled_dot": by_base[base]}
        for other, runs in by_base.items():
            label = other[len(prefix) + 1:]
            if other.startswith(prefix + "_") and (label == "udps" or label.startswith("udps_")):
                rows[label] = runs
        if len(rows) >= 3:
            found[prefix] = rows
    return found


def sites_tables(names: Sequence[str], exp_dir: Path, data_dir: Path, sets: Sequence[str], modes: Sequence[str],
                 metric: str, sites: Sequence[str], *, char: bool) -> str:
    """Markdown: per ablation and scored set, a row per site set with each mode's rate and its paired test."""
    text = ""
    for prefix, rows in sorted(ablations(names).items()):
        baseline = rows["scaled_dot"]
        shared = sorted(set.intersection(*(set(runs) for runs in rows.values())), key=lambda x: -1 if x is None else x)
        for s in sets:
            ref = data_dir / s / "text"
            header = ["--udps_sites", "UDPS at"] + [f"{m} {metric}" for m in modes]
            lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
            order = sorted(rows, key=lambda x: (x != "scaled_dot", x == "udps", site_set(x, sites).count("+"),
                                                site_set(x, sites)))
            for label in order:
                cells = [_cell(exp_dir, ref, s, m, shared, baseline, rows[label], label == "scaled_dot", char)
                         for m in modes]
                where = {"scaled_dot": "no site (scaled-dot everywhere)", "udps": "every site"}.get(
                    label, ", ".join(site_set(label, sites).split("+")))
                if label == FORK_LABEL:
                    where += " (the paper author's fork)"
                lines.append("| " + " | ".join([site_set(label, sites), where] + cells) + " |")
            text += (f"\n### {Path(prefix).name}, {s}\n\n{metric} % pooled over {_seeds_text(shared)}; "
                     f"against the `none` row: difference in points, 95 % CI, permutation p.\n\n"
                     + "\n".join(lines) + "\n")
    return text


def _seeds_text(seeds: Sequence[Optional[int]]) -> str:
    if not seeds:
        return "no seed that every site set has (nothing to compare)"
    if seeds == [None]:
        return "the config's seed, which every site set has"
    named = ", ".join("the config's" if x is None else str(x) for x in seeds)
    plural = "s" if len(seeds) > 1 else ""
    return f"seed{plural} {named}, the seed{plural} that every site set has"


def _cell(exp_dir: Path, ref: Path, s: str, mode: str, seeds: Sequence[Optional[int]], baseline: Mapping,
          runs: Mapping, is_baseline: bool, char: bool) -> str:
    hyps = [[exp_dir / group[seed] / s / mode / "text" for seed in seeds] for group in (baseline, runs)]
    if not seeds or not ref.is_file() or not all(p.is_file() for h in hyps for p in h):
        return "-"
    r = compare_files(str(ref), [str(p) for p in hyps[0]], [str(p) for p in hyps[1]], char=char)
    if is_baseline:
        return f"{r.baseline:.2f}"
    return f"{r.system:.2f} ({r.difference:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}], p = {r.p_value:.2g})"


def section(names: Sequence[str], exp_dir: Path, data_dir: Optional[Path], sets: Sequence[str],
            modes: Sequence[str], metric: str, sites: Sequence[str], *, char: bool) -> str:
    """The RESULTS.md section of the site ablations under ``exp_dir`` ("" when there is none)."""
    if data_dir is None or not ablations(names):
        return ""
    return ("\n## Attention-site ablation (run.sh --udps_sites)\n\nOne model per site set; each row's paired test "
            "is against the all-scaled-dot row (no correction for testing every mode and set).\n"
            + sites_tables(names, exp_dir, data_dir, sets, modes, metric, sites, char=char))


__all__ = ["ablations", "section", "site_set", "sites_tables", "FORK_LABEL"]
