"""Leave-one-speaker-out (LOSO) results: each fold's model never heard the speaker it is scored on.

    python -m wenet_udps.results.loso --exp_root exp/fsdd_loso/train_conformer --data_root data/fsdd_loso \\
        --out exp/fsdd_loso/train_conformer/RESULTS.md --plot exp/fsdd_loso/train_conformer/loso.png

Layout (``run.sh --loso true`` makes it): fold ``<speaker>`` has its data in ``<data_root>/<speaker>/test_unseen``
and its models in ``<exp_root>/<speaker>_<variant>_seed<N>``, each decoded into ``test_unseen/<mode>/text``.
The report gives, per mode, each fold's unseen-speaker WER (mean ± std over seeds) and the pooled WER over all
folds, and the paired tests of every family against scaled-dot and of UDPS against cosine
(wenet_udps.results.seeds.CONTRASTS), pooled over folds and seeds
(:mod:`wenet_udps.scoring.significance`: an utterance is one unit, its errors summed over seeds; utterance keys
are unique across folds because they start with the speaker). ``--compare_root`` adds the same test between two
LOSO runs over the same folds (an old conf against a new one), per variant and mode.
"""
import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from wenet_udps.results.seeds import BASELINE_SUFFIX, CONTRASTS, group_by_seed
from wenet_udps.scoring.significance import Comparison, compare, mean_std, rate, sign_count, utterance_errors
from wenet_udps.scoring.references import read_hypotheses
from wenet_udps.scoring.tokens import read_text
from wenet_udps.scoring.wer import confusions, score
from wenet_udps.utils.atomic import open_atomic, write_text
from wenet_udps.utils.source_info import read_record, stale_reason

TEST_SET = "test_unseen"
BASELINE = BASELINE_SUFFIX[1:]  # the scaled-dot variant's label
MODES = ("ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring")
Errors = Dict[str, Tuple[int, int]]  # utterance -> (errors, reference tokens)
TOP_ERRORS = 3  # the most frequent errors listed per fold and variant


@dataclass
class LosoRun:
    """Per-utterance errors of one LOSO experiment: ``errors[variant][seed][mode][fold]``."""
    errors: Dict[str, Dict[int, Dict[str, Dict[str, Errors]]]]
    folds: List[str]
    confusions: Dict[str, Dict[str, Dict[str, Counter]]] = field(default_factory=dict)  # [variant][mode][fold]

    def variants(self) -> List[str]:
        """Variant labels, the scaled-dot baseline first."""
        return sorted(self.errors, key=lambda v: (v != BASELINE, v))

    def seeds(self, variant: str) -> List[int]:
        return sorted(self.errors[variant])

    def pooled(self, variant: str, mode: str) -> List[Errors]:
        """One run per seed, each the union of the folds' utterances."""
        return [{k: v for fold in self.folds for k, v in self.errors[variant][s][mode][fold].items()}
                for s in self.seeds(variant)]


def load(exp_root: Path, data_root: Path, modes: Sequence[str] = MODES) -> LosoRun:
    """Score every fold, variant, seed and mode found under ``exp_root``; every one must be complete.

    Raises ValueError naming what is missing (a fold without models, a model without a mode's hypotheses, a
    variant and seed that some fold lacks) or stale (decoded with a checkpoint replaced or removed since,
    wenet_udps.utils.source_info), so a partial or mixed run never reports as a whole one."""
    folds = sorted(d.name for d in data_root.iterdir() if (d / TEST_SET / "text").is_file()) \
        if data_root.is_dir() else []
    if not folds:
        raise ValueError(f"no LOSO folds in {data_root}: expected <speaker>/{TEST_SET}/text")
    groups = group_by_seed([d.name for d in exp_root.iterdir() if d.is_dir()]) if exp_root.is_dir() else {}
    errors: Dict[str, Dict[int, Dict[str, Dict[str, Errors]]]] = {}
    confused: Dict[str, Dict[str, Dict[str, Counter]]] = {}
    sums: Dict[str, str] = {}
    for fold in folds:
        ref = data_root / fold / TEST_SET / "text"
        refs = read_text(str(ref))
        mine = {base[len(fold) + 1:]: members for base, members in groups.items() if base.startswith(fold + "_")}
        if not mine:
            raise ValueError(f"fold {fold}: no {fold}_<variant>_seed<N> models in {exp_root}")
        for variant, members in mine.items():
            for seed, name in members.items():
                for mode in modes:
                    hyp = exp_root / name / TEST_SET / mode / "text"
                    if not hyp.is_file():
                        raise ValueError(f"missing {hyp}: decode the fold (run.sh --loso true --stage 5)")
                    stale = stale_reason(read_record(str(hyp.parent / "decode.info"), sums), sums)
                    if stale:
                        raise ValueError(f"{hyp} is stale, {stale}: decode the fold again (run.sh --loso true "
                                         f"--stage 5)")
                    report = score(refs, read_hypotheses(str(hyp), refs, str(ref)), char=False)
                    errors.setdefault(variant, {}).setdefault(seed, {}).setdefault(mode, {})[fold] = \
                        utterance_errors(report)
                    confused.setdefault(variant, {}).setdefault(mode, {}).setdefault(fold, Counter()).update(
                        confusions(report))
    run = LosoRun(errors, folds, confused)
    for variant in run.variants():
        for seed in run.seeds(variant):
            for mode in modes:
                missing = sorted(set(folds) - set(errors[variant][seed][mode]))
                if missing:
                    raise ValueError(f"{variant} seed {seed}: fold(s) {', '.join(missing)} have no model: train "
                                     "them (run.sh --loso true)")
    return run


def cell(values: Sequence[float]) -> str:
    mean, std = mean_std(values)
    return f"{mean:.2f} ± {std:.2f}" if len(values) > 1 else f"{mean:.2f}"


def table(run: LosoRun, modes: Sequence[str]) -> str:
    """Markdown: per mode and variant, each fold's WER and the pooled WER, mean ± std over seeds."""
    header = ["mode", "variant"] + [f"{f} (unseen)" for f in run.folds] + ["pooled"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for mode in modes:
        for variant in run.variants():
            seeds = run.seeds(variant)
            cells = [cell([rate(run.errors[variant][s][mode][f]) for s in seeds]) for f in run.folds]
            cells.append(cell([rate(r) for r in run.pooled(variant, mode)]))
            lines.append("| " + " | ".join([mode, variant] + cells) + " |")
    return "\n".join(lines) + "\n"


def paired(baseline: LosoRun, b_variant: str, system: LosoRun, s_variant: str, mode: str) -> Comparison:
    """System minus baseline over the same folds and utterances, seeds paired in order."""
    if baseline.folds != system.folds:
        raise ValueError(f"the two runs have other folds: {baseline.folds} vs {system.folds}")
    b, s = baseline.pooled(b_variant, mode), system.pooled(s_variant, mode)
    k = min(len(b), len(s))
    return compare(b[:k], s[:k])


def per_fold(run: LosoRun, b_variant: str, s_variant: str, mode: str) -> str:
    """Each fold's difference (system - baseline, each the mean over its seeds) and in how many folds it is < 0.

    The pooled test treats utterances as the units; with a handful of speakers this line shows whether a
    difference holds across speakers or comes from one of them."""
    diffs = []
    for fold in run.folds:
        rates = {v: mean_std([rate(run.errors[v][s][mode][fold]) for s in run.seeds(v)])[0]
                 for v in (b_variant, s_variant)}
        diffs.append(rates[s_variant] - rates[b_variant])
    listed = ", ".join(f"{f} {d:+.2f}" for f, d in zip(run.folds, diffs))
    lower = sum(d < 0 for d in diffs)
    pairs = per_pair(run, b_variant, s_variant, mode)
    return f"per fold {listed}; {s_variant} lower in {lower} of {len(diffs)} folds; {pairs}"


def per_pair(run: LosoRun, b_variant: str, s_variant: str, mode: str) -> str:
    """In how many (fold, seed) pairs the system is lower, the same seed paired, and the two-sided sign test."""
    seeds = sorted(set(run.seeds(b_variant)) & set(run.seeds(s_variant)))
    diffs = [rate(run.errors[s_variant][s][mode][f]) - rate(run.errors[b_variant][s][mode][f])
             for f in run.folds for s in seeds]
    return sign_count(diffs, "fold-seed pairs")


def top_errors(run: LosoRun, mode: str) -> str:
    """Markdown: per fold and variant the most frequent errors, summed over seeds (``REF→HYP count``; ``∅`` is an
    inserted or deleted word), and all errors: whether a new voice fails on a few words or on all of them."""
    variants = run.variants()
    lines = ["| fold | " + " | ".join(variants) + " |", "|---|" + "---|" * len(variants)]
    for fold in run.folds:
        cells = []
        for v in variants:
            counts = run.confusions[v][mode][fold]
            top = ", ".join(f"{r or '∅'}→{h or '∅'} {n}" for (r, h), n in counts.most_common(TOP_ERRORS))
            cells.append(f"{top} (of {sum(counts.values())})" if counts else "none")
        lines.append(f"| {fold} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def report(run: LosoRun, modes: Sequence[str], old: Optional[LosoRun] = None, old_name: str = "old") -> str:
    """RESULTS.md text: the table, then the paired tests in words."""
    variants = run.variants()
    seeds = {v: run.seeds(v) for v in variants}
    out = ["# Leave-one-speaker-out: WER on the speaker each model never heard\n",
           f"{len(run.folds)} folds ({', '.join(run.folds)}); seeds per variant: "
           + "; ".join(f"{v} {', '.join(map(str, s))}" for v, s in seeds.items())
           + ". Each cell: mean ± std over seeds (ddof 1); pooled: all folds' utterances scored together.\n",
           table(run, modes)]
    base = [v for v in variants if v == BASELINE]
    contrasts = [(a, b) for a, b in CONTRASTS if a in variants and b in variants]
    if (base and len(variants) > 1) or contrasts:
        out.append("## Each family - scaled-dot, and UDPS - cosine, paired over utterances, pooled over folds and "
                   "seeds\n")
        pairs = [(base[0], v) for v in variants if base and v != base[0]] + contrasts
        for a, b in pairs:
            for mode in modes:
                out.append(f"- {b} - {a}, {mode}: " + paired(run, a, run, b, mode).describe(a, b)
                           + f"; {per_fold(run, a, b, mode)}")
        out.append("")
    mode = "attention_rescoring" if "attention_rescoring" in modes else modes[-1]
    out += [f"## The most frequent errors on each held-out speaker ({mode}, summed over seeds)\n",
            top_errors(run, mode)]
    if old is not None:
        out.append(f"## This run against {old_name}, same folds, paired\n")
        for v in (v for v in variants if v in old.errors):
            for mode in modes:
                out.append(f"- {v} {mode}: " + paired(old, v, run, v, mode).describe(f"{old_name}", "this run"))
        if base and base[0] in old.errors:
            for v in (v for v in variants if v != base[0] and v in old.errors):
                for mode in modes:
                    before = paired(old, base[0], old, v, mode)
                    now = paired(run, base[0], run, v, mode)
                    out.append(f"- {v} - {base[0]} {mode}: {old_name} {before.difference:+.2f} points "
                               f"(p = {before.p_value:.3g}), this run {now.difference:+.2f} (p = {now.p_value:.3g})")
        out.append("")
    return "\n".join(out)


def plot(run: LosoRun, modes: Sequence[str], out: Path) -> None:
    """Per-speaker bars, one per variant, the seeds' std as error bars; one panel per decoding mode."""
    from wenet_udps.results.plots import _pyplot
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(modes), figsize=(4.2 * len(modes), 4.0), squeeze=False, sharey=True)
    variants = run.variants()
    width = 0.8 / len(variants)
    labels = run.folds + ["pooled"]
    for ax, mode in zip(axes[0], modes):
        for i, variant in enumerate(variants):
            seeds = run.seeds(variant)
            per_fold = [[rate(run.errors[variant][s][mode][f]) for s in seeds] for f in run.folds]
            per_fold.append([rate(r) for r in run.pooled(variant, mode)])
            stats = [mean_std(v) for v in per_fold]
            ax.bar([j + i * width for j in range(len(labels))], [m for m, _ in stats], width=width, label=variant,
                   yerr=[s for _, s in stats], capsize=3)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(labels))], labels, rotation=30, fontsize=8)
        ax.set_title(mode, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("WER on the unseen speaker (%)")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Leave-one-speaker-out (bars: mean over seeds; error bars: std)")
    fig.tight_layout()
    with open_atomic(out, "wb") as f:
        fig.savefig(f, dpi=100, format="png")
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exp_root", required=True, type=Path, help="<exp_root>/<speaker>/<exp>_seed<N>")
    parser.add_argument("--data_root", required=True, type=Path, help="<data_root>/<speaker>/test_unseen")
    parser.add_argument("--out", required=True, type=Path, help="RESULTS.md to write")
    parser.add_argument("--plot", type=Path, help="PNG of the per-speaker bars")
    parser.add_argument("--modes", nargs="+", default=list(MODES))
    parser.add_argument("--compare_root", type=Path, help="another LOSO exp_root over the same folds (old conf)")
    parser.add_argument("--compare_name", default="old conf", help="its name in the report")
    args = parser.parse_args(argv)
    try:
        run = load(args.exp_root, args.data_root, args.modes)
        old = load(args.compare_root, args.data_root, args.modes) if args.compare_root else None
        text = report(run, args.modes, old, args.compare_name)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write_text(args.out, text)
    if args.plot:
        plot(run, args.modes, args.plot)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
