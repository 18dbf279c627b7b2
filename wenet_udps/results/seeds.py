"""Results over training seeds: mean ± std per mode, one column per attention family, and the paired significance
of every family against scaled-dot and of UDPS against cosine.

Experiments trained by ``run.sh --seeds "1 2 3"`` live in ``<exp>_seed<N>``; ``<exp>`` is ``<prefix>_<label>``,
the prefix the conf's name and the label the run label of the built model (``scaled_dot``, ``udps``, ``cosine``,
or a site set such as ``udps_enc_self``: wenet_udps.model_info). Two groups are compared only when their prefixes
are equal and each rest is exactly a run label (read by the ``label_parts`` passed in, model_info.label_parts: this
layer does not import the model), so ``train_conformer_short_cosine`` is never paired with
``train_conformer_scaled_dot`` (another conf). tools/collect_results.py renders these sections into RESULTS.md.
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
# Besides every model against the scaled-dot one of its prefix: (baseline, system) families also tested against
# each other where both exist at the same sites (issue 81's primary hypothesis: UDPS - cosine, the length factor g
# alone; ``cosine_enc_self`` against ``udps_enc_self`` too, the paper author's configuration).
CONTRASTS = (("cosine", "udps"),)
# A run label -> its (family, sites) pairs; ValueError for a string that is no run label (model_info.label_parts).
LabelParts = Callable[[str], Sequence[Tuple[str, Sequence[str]]]]
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


def run_labels(base: str, label_parts: LabelParts) -> List[Tuple[str, str]]:
    """Every (prefix, label) with ``base == f"{prefix}_{label}"`` and ``label`` a run label (``label_parts``)."""
    found = []
    for i in range(1, len(base)):
        if base[i] == "_":
            try:
                label_parts(base[i + 1:])
            except ValueError:
                continue
            found.append((base[:i], base[i + 1:]))
    return found


def families_table(groups: Mapping[str, Mapping[int, str]], rates: Mapping[str, Rates], sets: Sequence[str],
                   modes: Sequence[str], families: Sequence[str], metric: str, label_parts: LabelParts) -> str:
    """Markdown: per prefix with two or more ``<prefix>_<label>`` seed groups (a label: a run label, ``label_parts``,
    of the ``families`` passed in: this layer does not import the model), a row per set and mode, a column group per
    label (a family, or a family at a site set: ``udps_enc_self``; mean ± std over its seeds, n), then the mean
    per-seed difference of each :func:`paired_groups` pair over the seeds both have. "" when no prefix has two."""
    by_prefix: Dict[str, Dict[str, Mapping[int, str]]] = {}
    for base, members in groups.items():
        for prefix, label in run_labels(base, label_parts):
            if all(family in families for family, _ in label_parts(label)):
                by_prefix.setdefault(prefix, {})[label] = members

    def order(label: str) -> Tuple[int, int, str]:
        first = label_parts(label)[0][0]
        return families.index(first), label not in families, label
    text = ""
    for prefix, found in sorted(by_prefix.items()):
        if len(found) < 2:
            continue
        shown = sorted(found, key=order)
        pairs = [(a[len(prefix) + 1:], b[len(prefix) + 1:])
                 for a, b in paired_groups({f"{prefix}_{f}": 1 for f in shown}, label_parts)]
        header = ["set", "mode"] + [f"{f} {metric}" for f in shown] + [f"{b} - {a}" for a, b in pairs]
        lines = [f"\n`{prefix}_<label>`, mean ± std over seeds (n seeds); differences: mean over the seeds both "
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


def paired_groups(groups: Mapping[str, object], label_parts: LabelParts) -> List[Tuple[str, str]]:
    """(baseline, system) group names to test: each ``<prefix>_<label>`` (``label`` exactly a run label,
    ``label_parts``) against ``<prefix>_scaled_dot``, then the :data:`CONTRASTS` of each prefix that has both at the
    same sites (``<prefix>_cosine`` against ``<prefix>_udps``, ``<prefix>_cosine_enc_self`` against
    ``<prefix>_udps_enc_self``)."""
    pairs = []
    for base in sorted(groups):
        if base.endswith(BASELINE_SUFFIX):
            prefix = base[:-len(BASELINE_SUFFIX)]
            pairs += [(base, other) for other in sorted(groups) if other != base
                      and (prefix, other[len(prefix) + 1:]) in run_labels(other, label_parts)]
    for a, b in CONTRASTS:
        for name in sorted(groups):
            for prefix, label in run_labels(name, label_parts):
                parts = label_parts(label)
                partner = f"{prefix}_{b}{label[len(a):]}"
                if len(parts) == 1 and parts[0][0] == a and partner in groups and (name, partner) not in pairs:
                    pairs.append((name, partner))
    return pairs


def comparisons(groups: Mapping[str, Mapping[int, str]], exp_dir: Path, data_dir: Path, sets: Sequence[str],
                modes: Sequence[str], *, char: bool, label_parts: LabelParts,
                as_text: Callable[[Dict[str, str]], Dict[str, str]] = dict,
                utt2spk: Optional[Mapping[str, Mapping[str, str]]] = None) -> List[str]:
    """One sentence per pair of :func:`paired_groups`, set and mode: the system's difference to the baseline, its 95 %
    CI (paired bootstrap over utterances pooled over the seeds both groups have), the permutation p-value and
    :func:`sign_counts` (``utt2spk``: ``{set: {utterance: speaker}}``). ``as_text`` maps the reference and the
    hypotheses before scoring (speakers.letters: the letter CER of a word-scored corpus)."""
    lines = []
    sums: Dict[str, str] = {}
    for base, other in paired_groups(groups, label_parts):
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
