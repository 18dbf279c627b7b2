"""Results over training seeds: mean ± std per mode, one column per attention family, and the paired significance
of every family against scaled-dot and of UDPS against cosine.

Experiments trained by ``run.sh --seeds "1 2 3"`` live in ``<exp>_seed<N>``; ``<exp>`` ends with the attention
label (``..._scaled_dot``, ``..._udps``, ``..._cosine``: a family's name, wenet_udps.model_info).
tools/collect_results.py renders these sections into RESULTS.md.
"""
import re
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from wenet_udps.scoring.significance import compare, mean_std, over_seeds, rate, seed_spread, sign_count, \
    utterance_errors
from wenet_udps.scoring.references import read_hypotheses
from wenet_udps.scoring.tokens import read_text
from wenet_udps.scoring.wer import score
from wenet_udps.utils.source_info import read_record, stale_reason

SEED_RE = re.compile(r"^(.*)_seed(\d+)$")
BASELINE_SUFFIX = "_scaled_dot"
# Besides every model against the scaled-dot one of its prefix: (baseline, system) labels also tested against each
# other where both exist (issue 81's primary hypothesis: UDPS - cosine, the length factor g alone).
CONTRASTS = (("cosine", "udps"),)
Rates = Mapping[Tuple[str, str], float]  # (set, mode) -> %
Errors = Mapping[str, Tuple[int, int]]  # utterance -> (errors, reference tokens), of one seed's decoding


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


def families_table(groups: Mapping[str, Mapping[int, str]], rates: Mapping[str, Rates], sets: Sequence[str],
                   modes: Sequence[str], families: Sequence[str], metric: str) -> str:
    """Markdown: per prefix with two or more ``<prefix>_<family>`` seed groups (``families``: the family names, in
    order, passed in: this layer does not import the model), a row per set and mode, a column group per family
    (mean ± std over its seeds, n), then the mean per-seed difference of each :func:`paired_groups` pair over the seeds
    both have. "" when no prefix has two families."""
    by_prefix: Dict[str, Dict[str, Mapping[int, str]]] = {}
    for base, members in groups.items():
        for family in families:
            if base.endswith("_" + family):
                by_prefix.setdefault(base[:-len(family) - 1], {})[family] = members
    text = ""
    for prefix, found in sorted(by_prefix.items()):
        if len(found) < 2:
            continue
        shown = [f for f in families if f in found]
        pairs = [(a[len(prefix) + 1:], b[len(prefix) + 1:]) for a, b in paired_groups({f"{prefix}_{f}": 1
                                                                                          for f in shown})]
        header = ["set", "mode"] + [f"{f} {metric}" for f in shown] + [f"{b} - {a}" for a, b in pairs]
        lines = [f"\n`{prefix}_<family>`, mean ± std over seeds (n seeds); differences: mean over the seeds both "
                 f"have (the paired tests below give their intervals).\n",
                 "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        for s in sets:
            for m in modes:
                def per_seed(family: str) -> Dict[int, float]:
                    return {seed: rates[name][(s, m)] for seed, name in found[family].items()
                            if (s, m) in rates.get(name, {})}
                cells = []
                for f in shown:
                    values = per_seed(f)
                    mean, std = mean_std(list(values.values())) if values else (None, None)
                    cells.append(f"{mean:.2f} ± {std:.2f} ({len(values)})" if values else "-")
                for a, b in pairs:
                    va, vb = per_seed(a), per_seed(b)
                    common = sorted(set(va) & set(vb))
                    cells.append(f"{mean_std([vb[x] - va[x] for x in common])[0]:+.2f}" if common else "-")
                if any(c != "-" for c in cells):
                    lines.append("| " + " | ".join([s, m] + cells) + " |")
        text += "\n".join(lines) + "\n"
    return text


def sign_counts(baseline: Sequence[Errors], system: Sequence[Errors],
                utt2spk: Optional[Mapping[str, str]] = None) -> str:
    """:func:`seed_spread` (the per-seed differences' mean with its 95 % t-interval, and in how many seeds the system
    is lower); with ``utt2spk``, in how many speaker-seed pairs. The utterance-level test pools the seeds and voices
    and holds the seeds fixed; these show whether one seed or one voice carries a difference, and how sure the mean
    over training seeds is (loso.py's fold-seed count, for a fixed test set)."""
    text = seed_spread(baseline, system)
    speakers = sorted({utt2spk.get(key, "?") for key in baseline[0]}) if utt2spk and baseline else []
    if len(speakers) > 1:
        def of(errors: Errors, spk: str) -> Dict[str, Tuple[int, int]]:
            return {key: v for key, v in errors.items() if utt2spk.get(key, "?") == spk}

        diffs = [rate(of(s, spk)) - rate(of(b, spk)) for b, s in zip(baseline, system) for spk in speakers]
        text += "; " + sign_count(diffs, "speaker-seed pairs")
    return text


def paired_groups(groups: Mapping[str, object]) -> List[Tuple[str, str]]:
    """(baseline, system) group names to test: each ``<prefix>_<label>`` against ``<prefix>_scaled_dot``, then the
    :data:`CONTRASTS` of each prefix that has both."""
    pairs = []
    for base in sorted(groups):
        if base.endswith(BASELINE_SUFFIX):
            prefix = base[:-len(BASELINE_SUFFIX)]
            pairs += [(base, other) for other in sorted(groups) if other != base and other.startswith(prefix + "_")]
    for a, b in CONTRASTS:
        pairs += [(name, f"{name[:-len(a)]}{b}") for name in sorted(groups)
                  if name.endswith("_" + a) and f"{name[:-len(a)]}{b}" in groups]
    return pairs


def comparisons(groups: Mapping[str, Mapping[int, str]], exp_dir: Path, data_dir: Path, sets: Sequence[str],
                modes: Sequence[str], *, char: bool, as_text: Callable[[Dict[str, str]], Dict[str, str]] = dict,
                utt2spk: Optional[Mapping[str, Mapping[str, str]]] = None) -> List[str]:
    """One sentence per pair of :func:`paired_groups`, set and mode: the system's difference to the baseline, its 95 %
    CI (paired bootstrap over utterances pooled over the seeds both groups have), the permutation p-value and
    :func:`sign_counts` (``utt2spk``: ``{set: {utterance: speaker}}``). ``as_text`` maps the reference and the
    hypotheses before scoring (speakers.letters: the letter CER of a word-scored corpus)."""
    lines = []
    sums: Dict[str, str] = {}
    for base, other in paired_groups(groups):
        members, other_members = groups[base], groups[other]
        seeds = sorted(set(members) & set(other_members))
        for s in sets:
            ref = data_dir / s / "text"
            for m in modes:
                hyps = [[exp_dir / g[seed] / s / m / "text" for seed in seeds] for g in (members, other_members)]
                if not seeds or not ref.is_file() or not all(p.is_file() for h in hyps for p in h):
                    continue
                # no test over a hypothesis of a replaced or removed checkpoint (left out of the table too)
                if any(stale_reason(read_record(str(p.parent / "decode.info"), sums), sums)
                       for h in hyps for p in h):
                    continue
                written = read_text(str(ref))
                refs = as_text(written)
                runs = [[utterance_errors(score(refs, as_text(read_hypotheses(str(p), written, str(ref))),
                                                char=char)) for p in h] for h in hyps]
                counts = sign_counts(runs[0], runs[1], (utt2spk or {}).get(s))
                lines.append(f"- {s}, {m}: {compare(runs[0], runs[1]).describe(base, other)}; {other} {counts}")
    return lines
