"""Issue 81's three-way AN4 verdict (docs/an4.md, "Does UDPS beat cosine attention?"), read from the kept decodes.

    python recipes/an4/issue81_verdict.py [--hyps recipes/an4/hypotheses/issue81] [--out FILE.md]

It reads only what recipes/an4/issue81_seed.sh keeps: ``<family>_seed<N>/<set>/<mode>[_lambda<λ>]/{text,wer}`` and
the references ``refs/<set>/text``; no model is needed. The rule is the hypothesis's, as committed before any
cosine decode:
- per family, the joint modes' CTC weight λ is the one of the grid whose dev WER pooled over the family's seeds is
  lowest (a tie goes to the λ nearest 0.3, then to the smaller); test never chooses anything;
- per mode, the paired difference of test WER pooled over the 130 utterances and the seeds
  (wenet_udps.scoring.significance.compare: 95 % bootstrap interval, two-sided permutation p) decides: the
  hypothesis holds if the interval lies below 0, is refuted if it lies above 0 or contains 0 with the point estimate
  at or above 0, and is "not shown" otherwise;
- the verdict needs all ten seeds: with fewer, only dev (the λ choice so far) is printed, and test is not read.
Each ``wer`` file must have scored the kept ``text`` against the kept references (the SHA-256 of both that it
records) with the counts this script recounts; anything else is refused naming the file (the kept decodes are what was
scored).
"""
import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from wenet_udps.scoring.bound import read_score
from wenet_udps.scoring.significance import compare, mean_std, rate, score_files, seed_spread
from wenet_udps.utils.atomic import write_text
from wenet_udps.utils.source_info import file_sha256

HERE = Path(__file__).resolve().parent
FAMILIES = ("scaled_dot", "udps", "cosine")
SEEDS = tuple(range(1, 11))
GRID = (0.1, 0.2, 0.3, 0.5, 0.7)
STAGE5_LAMBDA = 0.3                       # stage 5 decodes the joint modes at ESPnet's λ, in the folder without suffix
JOINT = ("joint_ctc_attention", "joint_ctc_attention_lm")
DECIDED = ("attention", "joint_ctc_attention")          # the primary and secondary hypotheses' modes
BESIDE = ("ctc_greedy_search", "ctc_prefix_beam_search", "attention_rescoring", "ctc_prefix_beam_search_lm",
          "attention_rescoring_lm")
PAIRS = (("udps", "cosine", "primary: UDPS - cosine"), ("cosine", "scaled_dot", "secondary: cosine - scaled-dot"),
         ("udps", "scaled_dot", "beside: UDPS - scaled-dot"))
ESPNET = {False: 7.6, True: 7.4}          # ESPnet's AN4 test WER without / with its LM (recipes/an4/peer_results.tsv)

Runs = List[Dict[str, Tuple[int, int]]]


def mode_dir(mode: str, lam: float) -> str:
    """The folder of a decode: the joint modes at a λ other than stage 5's carry ``_lambda<λ>``."""
    return mode if mode not in JOINT or lam == STAGE5_LAMBDA else f"{mode}_lambda{lam:g}"


def complete_seeds(hyps: Path) -> List[int]:
    """The seeds kept for all three families."""
    return [s for s in SEEDS if all((hyps / f"{f}_seed{s}").is_dir() for f in FAMILIES)]


def runs(hyps: Path, family: str, seeds: Sequence[int], split: str, folder: str) -> Runs:
    """Per seed, ``{utterance: (errors, words)}`` of ``<family>_seed<N>/<split>/<folder>/text``, each checked against
    its ``wer`` file (the module docstring)."""
    ref = str(hyps / "refs" / split / "text")
    texts = [hyps / f"{family}_seed{s}" / split / folder / "text" for s in seeds]
    missing = [str(t) for t in texts if not t.is_file()]
    if missing:
        raise SystemExit(f"issue81_verdict: {missing[0]}: not kept ({len(missing)} of {len(texts)} missing)")
    scored = score_files(ref, [str(t) for t in texts], char=False)
    ref_sha = file_sha256(ref)
    for text, errors in zip(texts, scored):
        wer = read_score(str(text.parent / "wer"))
        recount = (sum(e for e, _ in errors.values()), sum(n for _, n in errors.values()))
        stated = (wer.counts["S"] + wer.counts["D"] + wer.counts["I"], wer.counts["N"])
        problem = ("scored another text than the kept one" if wer.hyp_sha256 != file_sha256(str(text)) else
                   f"scored other references than {ref}" if wer.ref_sha256 != ref_sha else
                   f"states {stated[0]} errors of {stated[1]} words, its text has {recount[0]} of {recount[1]}"
                   if stated != recount else None)
        if problem:
            raise SystemExit(f"issue81_verdict: {text.parent / 'wer'}: {problem}")
    return scored


def pooled(per_seed: Runs) -> float:
    """The WER (%) pooled over seeds and utterances."""
    words = sum(n for run in per_seed for _, n in run.values())
    return 100.0 * sum(e for run in per_seed for e, _ in run.values()) / words


def choose_lambda(dev_wer: Mapping[float, float]) -> float:
    """The λ of lowest dev WER; ties to the λ nearest 0.3, then to the smaller (the hypothesis's rule)."""
    return min(dev_wer, key=lambda lam: (round(dev_wer[lam], 10), abs(lam - STAGE5_LAMBDA), lam))


def decide(low: float, high: float, difference: float) -> str:
    """The hypothesis's decision rule on a system - baseline interval (< 0: the system is better)."""
    if high < 0:
        return "holds"
    if low > 0 or difference >= 0:
        return "refuted"
    return "not shown"


def lambdas(hyps: Path, seeds: Sequence[int]) -> Tuple[Dict[str, float], List[str]]:
    """Each family's chosen λ, and the dev table's lines."""
    chosen, lines = {}, ["| family | " + " | ".join(f"λ {lam:g}" for lam in GRID) + " | chosen |", "|---" * 7 + "|"]
    for family in FAMILIES:
        dev = {lam: pooled(runs(hyps, family, seeds, "dev", mode_dir("joint_ctc_attention", lam))) for lam in GRID}
        chosen[family] = choose_lambda(dev)
        lines.append(f"| {family} | " + " | ".join(f"{dev[lam]:.2f}" for lam in GRID) + f" | {chosen[family]:g} |")
    return chosen, lines


def verdict_lines(hyps: Path, seeds: Sequence[int], chosen: Mapping[str, float]) -> List[str]:
    lines = []
    for mode in DECIDED + ("joint_ctc_attention_lm",) + BESIDE + ("joint_ctc_attention@0.3",
                                                                  "joint_ctc_attention_lm@0.3"):
        name, _, at = mode.partition("@")
        test = {f: runs(hyps, f, seeds, "test", mode_dir(name, float(at) if at else chosen[f])) for f in FAMILIES}
        ruled = not at and (name in DECIDED or name == "joint_ctc_attention_lm")   # λ 0.3: reported beside
        means = ", ".join(f"{f} {_mean(test[f])}" for f in FAMILIES)
        espnet = ESPNET[name.endswith("_lm")]
        lines.append(f"\n### test `{mode}`{' (each family at its chosen λ)' if name in JOINT and not at else ''}")
        lines.append(f"- per-seed mean ± std: {means} (ESPnet {espnet} %)")
        for system, baseline, label in PAIRS:
            c = compare(test[baseline], test[system])
            rule = decide(c.ci_low, c.ci_high, c.difference) if ruled and not label.startswith("beside") else "-"
            lines.append(f"- {label}: {c.difference:+.2f} points, 95 % CI [{c.ci_low:+.2f}, {c.ci_high:+.2f}], "
                         f"p = {c.p_value:.3g}; {seed_spread(test[baseline], test[system])}; **{rule}**")
    return lines


def r_lines(hyps: Path, seeds: Sequence[int]) -> List[str]:
    """Per UDPS site and layer, over the seeds' norm_ratio.json (the test set, attention-weighted): the mean over
    seeds and heads of mean g and of the fraction of attention on pairs with g < 0.9 (g near 1 everywhere: UDPS is
    cosine attention in practice there)."""
    found = [hyps / f"udps_seed{s}" / "norm_ratio.json" for s in seeds]
    found = [p for p in found if p.is_file()]
    if not found:
        return ["", "No norm_ratio.json kept: no r statistics."]
    cells: Dict[Tuple[str, int], List[Tuple[float, float]]] = {}
    for path in found:
        for record in json.loads(path.read_text(encoding="utf-8"))["sites"]:
            for head in record["heads"]:
                if head["attention"] is not None:
                    cells.setdefault((record["site"], record["layer"]), []).append(
                        (head["attention"]["mean_g"], head["attention"]["frac_g_below_0.9"]))
    lines = ["", f"## r = ‖q‖/‖k‖ of the UDPS models ({len(found)} seeds' norm_ratio.json, test, attention-weighted)",
             "", "| site | layer | mean g | attention on g < 0.9 |", "|---|---|---|---|"]
    for (site, layer), values in sorted(cells.items()):
        lines.append(f"| {site} | {layer} | {statistics.fmean(v[0] for v in values):.3f} | "
                     f"{statistics.fmean(v[1] for v in values):.3f} |")
    return lines


def _mean(per_seed: Runs) -> str:
    mean, std = mean_std([rate(run) for run in per_seed])
    return f"{mean:.2f} ± {std:.2f}"


def report(hyps: Path) -> str:
    seeds = complete_seeds(hyps)
    if not seeds:
        raise SystemExit(f"issue81_verdict: {hyps}: no seed kept for all of {', '.join(FAMILIES)}")
    chosen, lines = lambdas(hyps, seeds)
    head = [f"# Issue 81: UDPS, cosine and scaled-dot on AN4 ({len(seeds)} of {len(SEEDS)} seeds: "
            f"{' '.join(map(str, seeds))})", "", "## dev: the joint modes' CTC weight λ per family (WER %, pooled)",
            "", *lines]
    if len(seeds) < len(SEEDS):
        return "\n".join(head + ["", f"Test not read: the verdict needs all {len(SEEDS)} seeds (the rule chooses λ "
                                     f"on all ten seeds' dev)."]) + "\n"
    return "\n".join(head + ["", "## test: the verdicts (system - baseline, points)"]
                     + verdict_lines(hyps, seeds, chosen) + r_lines(hyps, seeds)) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hyps", type=Path, default=HERE / "hypotheses" / "issue81",
                        help="the kept decodes (recipes/an4/issue81_seed.sh's --out)")
    parser.add_argument("--out", help="also write the report here (Markdown)")
    args = parser.parse_args(argv)
    text = report(args.hyps)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        write_text(args.out, text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
