"""Results over training seeds: mean ± std per mode, and the paired significance of UDPS - scaled-dot.

Experiments trained by ``run.sh --seeds "1 2 3"`` live in ``<exp>_seed<N>``; ``<exp>`` ends with the attention
label (``..._scaled_dot``, ``..._udps``). tools/collect_results.py renders these sections into RESULTS.md.
"""
import re
from pathlib import Path
from typing import Dict, List, Mapping, Sequence, Tuple

from wenet_udps.scoring.significance import compare_files, over_seeds
from wenet_udps.utils.source_info import read_source, stale_reason

SEED_RE = re.compile(r"^(.*)_seed(\d+)$")
BASELINE_SUFFIX = "_scaled_dot"
Rates = Mapping[Tuple[str, str], float]  # (set, mode) -> %


def group_by_seed(names: Sequence[str]) -> Dict[str, Dict[int, str]]:
    """``{base name: {seed: experiment name}}`` of the ``<base>_seed<N>`` experiments."""
    groups: Dict[str, Dict[int, str]] = {}
    for name in names:
        m = SEED_RE.match(name)
        if m:
            groups.setdefault(m.group(1), {})[int(m.group(2))] = name
    return groups


def seeds_table(groups: Mapping[str, Mapping[int, str]], rates: Mapping[str, Rates], sets: Sequence[str],
                modes: Sequence[str], metric: str) -> str:
    """Markdown: one row per base experiment and set, each cell ``mean ± std (seeds ...)``."""
    header = ["exp", "set"] + [f"{m} {metric}" for m in modes]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for base, members in sorted(groups.items()):
        for s in sets:
            cells = []
            for m in modes:
                per_seed = {seed: rates[name][(s, m)] for seed, name in members.items() if (s, m) in rates[name]}
                cells.append(over_seeds(per_seed) if per_seed else "-")
            if any(c != "-" for c in cells):
                lines.append("| " + " | ".join([base, s] + cells) + " |")
    return "\n".join(lines) + "\n"


def comparisons(groups: Mapping[str, Mapping[int, str]], exp_dir: Path, data_dir: Path, sets: Sequence[str],
                modes: Sequence[str], *, char: bool) -> List[str]:
    """One sentence per (UDPS group, set, mode): the difference to the scaled-dot group of the same prefix, its 95 %
    CI (paired bootstrap over utterances pooled over the seeds both groups have) and the permutation p-value."""
    lines = []
    sums: Dict[str, str] = {}
    for base, members in sorted(groups.items()):
        if not base.endswith(BASELINE_SUFFIX):
            continue
        prefix = base[:-len(BASELINE_SUFFIX)]
        for other, other_members in sorted(groups.items()):
            if other == base or not other.startswith(prefix + "_"):
                continue
            seeds = sorted(set(members) & set(other_members))
            for s in sets:
                ref = data_dir / s / "text"
                for m in modes:
                    hyps = [[exp_dir / g[seed] / s / m / "text" for seed in seeds] for g in (members, other_members)]
                    if not seeds or not ref.is_file() or not all(p.is_file() for h in hyps for p in h):
                        continue
                    # no test over a hypothesis of a replaced or removed checkpoint (left out of the table too)
                    if any(stale_reason(read_source(str(p.parent / "decode.info")), sums) for h in hyps for p in h):
                        continue
                    result = compare_files(str(ref), [str(p) for p in hyps[0]], [str(p) for p in hyps[1]], char=char)
                    lines.append(f"- {s}, {m}: " + result.describe(base, other))
    return lines
