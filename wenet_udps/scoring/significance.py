"""Is one system's error rate really different from another's? Paired tests over utterances, pooled over seeds.

    python -m wenet_udps.scoring.significance --char 1 --ref data/test/text \\
        --baseline exp/a_seed1/test/attention/text exp/a_seed2/test/attention/text \\
        --system exp/b_seed1/test/attention/text exp/b_seed2/test/attention/text

Both systems decode the same utterances, once per training seed. Per utterance u the errors are summed over the
seeds (e_u for the baseline, f_u for the system; n_u reference tokens times the number of seeds), so an utterance
is one unit however many seeds there are: the seeds' spread enters through the errors, and utterances are not
counted as more independent than they are. The difference is the pooled error rate of the system minus the
baseline's, in percentage points: 100 (sum f - sum e) / sum n (< 0: the system is better).

- 95 % confidence interval: paired bootstrap over utterances (``scipy.stats.bootstrap``, percentile method, as
  Bisani and Ney's ASR bootstrap), each resample drawing utterances with their (e_u, f_u, n_u) together.
- p-value: paired permutation test (``scipy.stats.permutation_test``, ``permutation_type="samples"``): under the
  null hypothesis the two systems' errors on an utterance are exchangeable, so each utterance's pair is swapped
  at random; two-sided.

Both use a fixed random seed, so the same inputs give the same interval and p-value.

With two or more seeds a second line counts each training once (:func:`seed_spread`): the per-seed error rates'
mean ± std of each system, the mean of the per-seed differences with its t-interval over the seeds, and the sign
test. The utterance-level test holds the trainings fixed; this line says how sure the difference is over other
trainings.
"""
import argparse
import sys
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from scipy import stats

from wenet_udps.scoring.references import read_hypotheses
from wenet_udps.scoring.tokens import read_text
from wenet_udps.scoring.wer import Report, score

DEFAULT_RESAMPLES = 9999


@dataclass(frozen=True)
class Comparison:
    """System minus baseline, pooled over seeds; rates and differences in percent (points)."""

    baseline: float
    system: float
    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    confidence: float
    num_utts: int
    num_seeds: int

    def significant(self, alpha: float = 0.05) -> bool:
        """p < alpha (the permutation test decides; the interval shows the size)."""
        return self.p_value < alpha

    def describe(self, baseline: str = "baseline", system: str = "system", alpha: float = 0.05) -> str:
        """One sentence in words, e.g. for RESULTS.md."""
        direction = "lower" if self.difference < 0 else "higher"
        verdict = (f"significantly {direction} (p = {self.p_value:.3g} < {alpha})" if self.significant(alpha)
                   else f"not significantly different (p = {self.p_value:.3g})")
        return (f"{system} {self.system:.2f} % vs {baseline} {self.baseline:.2f} %: {verdict}; difference "
                f"{self.difference:+.2f} points, {100 * self.confidence:.0f} % CI [{self.ci_low:+.2f}, "
                f"{self.ci_high:+.2f}] over {self.num_utts} utterances x {self.num_seeds} seeds")


def mean_std(values: Sequence[float]) -> Tuple[float, float]:
    """Mean and std (ddof=1; 0 for one value) of the per-seed error rates."""
    if not values:
        raise ValueError("no seeds to summarise")
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()), float(arr.std(ddof=1)) if len(arr) > 1 else 0.0


def over_seeds(rates: Mapping[int, float]) -> str:
    """``{seed: error rate}`` as ``mean ± std (seed s: rate, ...)``, std with ddof=1; one seed says so."""
    mean, std = mean_std([rates[s] for s in sorted(rates)])
    per_seed = ", ".join(f"{s}: {rates[s]:.2f}" for s in sorted(rates))
    if len(rates) == 1:
        return f"{mean:.2f} (one seed: {per_seed})"
    return f"{mean:.2f} ± {std:.2f} (seeds {per_seed})"


def t_interval(values: Sequence[float], confidence: float = 0.95, digits: int = 3) -> str:
    """``mean [low, high]`` of ``values`` (one per training) by the t-distribution (one value: the mean alone). Over
    per-seed differences: the confidence interval of the mean difference over training seeds, on this test set (the
    seeds are the sample; the utterance bootstrap of :func:`compare` holds them fixed and samples utterances)."""
    mean, std = mean_std(values)
    if len(values) < 2:
        return f"{mean:+.{digits}f}"
    half = float(stats.t.ppf(0.5 + confidence / 2, len(values) - 1) * std / np.sqrt(len(values)))
    return f"{mean:+.{digits}f} [{mean - half:+.{digits}f}, {mean + half:+.{digits}f}]"


def sign_count(diffs: Sequence[float], unit: str) -> str:
    """In how many trainings a system is lower (``diffs``: system - baseline, one per training) and the two-sided
    sign test (ties left out). Unlike the utterance-level test this counts each training once, so seed-to-seed
    spread is not hidden."""
    lower, higher = sum(d < 0 for d in diffs), sum(d > 0 for d in diffs)
    ties = len(diffs) - lower - higher
    p = stats.binomtest(lower, lower + higher).pvalue if lower + higher else 1.0
    tied = f" ({ties} tied)" if ties else ""
    return f"lower in {lower} of {len(diffs)} {unit}{tied}, sign test p = {p:.3g}"


def seed_spread(baseline_runs: Sequence[Mapping[str, Tuple[int, int]]],
                system_runs: Sequence[Mapping[str, Tuple[int, int]]], confidence: float = 0.95) -> str:
    """The per-seed differences of the pooled error rate (system - baseline, runs paired in order): their mean with
    its t-interval over the seeds and in how many the system is lower (sign test); ``runs`` as :func:`compare`'s."""
    per_seed = [rate(s) - rate(b) for b, s in zip(baseline_runs, system_runs)]
    text = sign_count(per_seed, "seeds")
    if len(per_seed) > 1:
        text = f"per-seed mean {t_interval(per_seed, confidence, digits=2)} (t-interval over seeds); {text}"
    return text


def utterance_errors(report: Report) -> Dict[str, Tuple[int, int]]:
    """``{key: (errors S+D+I, reference tokens N)}`` of every scored utterance of a report."""
    return {key: (a.counts.S + a.counts.D + a.counts.I, a.counts.N) for key, a in report.utterances}


def rate(errors: Mapping[str, Tuple[int, int]]) -> float:
    """The pooled error rate (%) of :func:`utterance_errors` (or a subset of its keys); NaN without tokens."""
    tokens = sum(n for _, n in errors.values())
    return 100.0 * sum(e for e, _ in errors.values()) / tokens if tokens else float("nan")


def _pooled(runs: Sequence[Mapping[str, Tuple[int, int]]], what: str, keys: Optional[List[str]]
            ) -> Tuple[List[str], np.ndarray, np.ndarray]:
    """Errors and reference tokens per utterance, summed over runs; every run must score the same utterances."""
    if not runs:
        raise ValueError(f"no {what} runs")
    keys = keys if keys is not None else sorted(runs[0])
    errors, tokens = np.zeros(len(keys)), np.zeros(len(keys))
    for i, run in enumerate(runs):
        if set(run) != set(keys):
            diff = sorted(set(run) ^ set(keys))
            raise ValueError(f"{what} run {i + 1} scores other utterances than the first run: {len(diff)} keys "
                             f"differ, e.g. {', '.join(diff[:3])}")
        errors += [run[k][0] for k in keys]
        tokens += [run[k][1] for k in keys]
    return keys, errors, tokens


def compare(baseline_runs: Sequence[Mapping[str, Tuple[int, int]]],
            system_runs: Sequence[Mapping[str, Tuple[int, int]]], *, confidence: float = 0.95,
            n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Comparison:
    """Compare per-utterance errors (:func:`utterance_errors` of each seed's report) of two systems."""
    if len(baseline_runs) != len(system_runs):
        raise ValueError(f"{len(baseline_runs)} baseline runs but {len(system_runs)} system runs: pair one run "
                         "of each system per seed")
    keys, e, n = _pooled(baseline_runs, "baseline", None)
    _, f, n_sys = _pooled(system_runs, "system", keys)
    if not np.array_equal(n, n_sys):
        raise ValueError("the two systems' references differ in length: score both against the same text")
    if n.sum() == 0:
        raise ValueError("no reference tokens to compare on")
    rng = np.random.default_rng(seed)

    def difference(d, tokens, axis=-1):
        return 100.0 * d.sum(axis=axis) / tokens.sum(axis=axis)

    observed = float(difference(f - e, n))
    if len(keys) < 2 or np.all(f == e):
        low = high = observed
    else:
        ci = stats.bootstrap((f - e, n), difference, paired=True, vectorized=True, confidence_level=confidence,
                             n_resamples=n_resamples, method="percentile", rng=rng).confidence_interval
        low, high = float(ci.low), float(ci.high)
    total = n.sum()
    perm = stats.permutation_test((e, f), lambda x, y, axis=-1: 100.0 * (y.sum(axis=axis) - x.sum(axis=axis)) / total,
                                  permutation_type="samples", vectorized=True, n_resamples=n_resamples,
                                  alternative="two-sided", rng=rng)
    return Comparison(baseline=float(100.0 * e.sum() / total), system=float(100.0 * f.sum() / total),
                      difference=observed, ci_low=low, ci_high=high, p_value=float(perm.pvalue),
                      confidence=confidence, num_utts=len(keys), num_seeds=len(baseline_runs))


def score_files(ref: str, hypotheses: Sequence[str], *, char: bool) -> List[Dict[str, Tuple[int, int]]]:
    """:func:`utterance_errors` of each hypothesis file (one per seed) scored against one reference text."""
    refs = read_text(ref)
    return [utterance_errors(score(refs, read_hypotheses(p, refs, ref), char=char)) for p in hypotheses]


def compare_files(ref: str, baseline: Sequence[str], system: Sequence[str], *, char: bool,
                  **kwargs) -> Comparison:
    """:func:`compare` of hypothesis files (one per seed) scored against one reference text."""
    return compare(score_files(ref, baseline, char=char), score_files(ref, system, char=char), **kwargs)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", required=True, help="reference text (Kaldi: key transcript)")
    parser.add_argument("--baseline", required=True, nargs="+", help="baseline hypothesis texts, one per seed")
    parser.add_argument("--system", required=True, nargs="+", help="system hypothesis texts, same seed order")
    parser.add_argument("--char", type=int, choices=[0, 1], default=0, help="1: score characters (CER)")
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--n_resamples", type=int, default=DEFAULT_RESAMPLES)
    args = parser.parse_args(argv)
    try:
        baseline = score_files(args.ref, args.baseline, char=bool(args.char))
        system = score_files(args.ref, args.system, char=bool(args.char))
        result = compare(baseline, system, confidence=args.confidence, n_resamples=args.n_resamples)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(result.describe())
    if len(baseline) > 1:
        (b_mean, b_std), (s_mean, s_std) = mean_std([rate(r) for r in baseline]), mean_std([rate(r) for r in system])
        print(f"over the {len(baseline)} seeds: system {s_mean:.2f} ± {s_std:.2f} % vs baseline {b_mean:.2f} ± "
              f"{b_std:.2f} % (mean ± std); {seed_spread(baseline, system, args.confidence)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
