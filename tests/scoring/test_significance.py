"""Paired bootstrap CI and permutation p-value of an error-rate difference (wenet_udps.scoring.significance)."""
import numpy as np
import pytest

from wenet_udps.scoring import significance
from wenet_udps.scoring.significance import compare, compare_files, utterance_errors
from wenet_udps.scoring.tokens import read_text
from wenet_udps.scoring.wer import score


def _runs(errors_per_seed, tokens=10):
    return [{f"u{i}": (int(e), tokens) for i, e in enumerate(errs)} for errs in errors_per_seed]


def test_clearly_better_system_is_significant_and_the_difference_is_pooled_over_seeds():
    rng = np.random.default_rng(1)
    base = [rng.integers(2, 5, size=60) for _ in range(3)]
    better = [np.maximum(b - 2, 0) for b in base]
    result = compare(_runs(base), _runs(better), n_resamples=2000)
    total = 60 * 10 * 3
    assert result.baseline == pytest.approx(100 * sum(b.sum() for b in base) / total)
    assert result.difference == pytest.approx(100 * (sum(x.sum() for x in better) - sum(b.sum() for b in base)) / total)
    assert result.ci_low <= result.difference <= result.ci_high < 0
    assert result.significant() and result.p_value < 0.001
    assert (result.num_utts, result.num_seeds) == (60, 3)
    assert "significantly lower" in result.describe("scaled-dot", "UDPS")


def test_identical_systems_and_noise_are_not_significant():
    rng = np.random.default_rng(2)
    base = [rng.integers(0, 4, size=50) for _ in range(2)]
    same = compare(_runs(base), _runs(base), n_resamples=500)
    assert same.difference == 0 and same.p_value == 1.0 and not same.significant()
    # Another draw from the same error distribution: no real difference.
    other = [rng.integers(0, 4, size=50) for _ in range(2)]
    noise = compare(_runs(base), _runs(other), n_resamples=2000)
    assert noise.ci_low < 0 < noise.ci_high and not noise.significant()
    assert "not significantly different" in noise.describe()


def test_same_inputs_give_the_same_interval_and_p_value():
    rng = np.random.default_rng(3)
    a, b = [rng.integers(0, 5, size=40)], [rng.integers(0, 4, size=40)]
    assert compare(_runs(a), _runs(b), n_resamples=999) == compare(_runs(a), _runs(b), n_resamples=999)


def test_mismatched_runs_are_rejected_with_the_reason():
    with pytest.raises(ValueError, match="2 baseline runs but 1 system runs"):
        compare(_runs([[1, 2], [1, 2]]), _runs([[1, 2]]))
    other_keys = [{"u0": (1, 10), "x9": (0, 10)}]
    with pytest.raises(ValueError, match="other utterances.*x9"):
        compare(_runs([[1, 2]]), other_keys)


def test_files_are_scored_per_utterance(tmp_path):
    ref = tmp_path / "text"
    ref.write_text("a ONE TWO THREE\nb FOUR FIVE\nc SIX\n", encoding="utf-8")
    hyp_a = tmp_path / "a"
    hyp_a.write_text("a ONE TWO\nb FOUR FIVE\nc SEVEN\n", encoding="utf-8")
    hyp_b = tmp_path / "b"
    hyp_b.write_text("a ONE TWO THREE\nb FOUR FIVE\nc SIX\n", encoding="utf-8")
    errors = utterance_errors(score(read_text(str(ref)), read_text(str(hyp_a)), char=False))
    assert errors == {"a": (1, 3), "b": (0, 2), "c": (1, 1)}
    result = compare_files(str(ref), [str(hyp_a)], [str(hyp_b)], char=False, n_resamples=200)
    assert result.baseline == pytest.approx(100 * 2 / 6) and result.system == 0.0
    assert result.difference == pytest.approx(-100 * 2 / 6)


def test_command_line_prints_the_verdict(tmp_path, capsys):
    ref = tmp_path / "text"
    ref.write_text("a ONE\nb TWO\n", encoding="utf-8")
    assert significance.main(["--ref", str(ref), "--baseline", str(ref), "--system", str(ref),
                              "--n_resamples", "100"]) == 0
    assert "not significantly different" in capsys.readouterr().out
    assert significance.main(["--ref", str(ref), "--baseline", str(tmp_path / "missing"), "--system",
                              str(ref)]) == 1
    assert "missing" in capsys.readouterr().err


def test_over_seeds_gives_mean_sample_std_and_every_seed():
    assert significance.over_seeds({2: 3.0, 1: 1.0, 3: 2.0}) == "2.00 ± 1.00 (seeds 1: 1.00, 2: 3.00, 3: 2.00)"
    assert significance.over_seeds({7: 1.234}) == "1.23 (one seed: 7: 1.23)"
    with pytest.raises(ValueError, match="no seeds"):
        significance.over_seeds({})


def test_t_interval_is_the_mean_with_its_t_distribution_half_width():
    assert significance.t_interval([1.0]) == "+1.000"
    assert significance.t_interval([0.5, 1.5], digits=2).startswith("+1.00 [")
    low, high = significance.t_interval([0.0, 1.0, 2.0, 3.0]).split("[")[1].rstrip("]").split(", ")
    assert float(low) == pytest.approx(1.5 - 3.182446 * 1.290994 / 2, abs=1e-3)
    assert float(high) == pytest.approx(1.5 + 3.182446 * 1.290994 / 2, abs=1e-3)


def test_command_line_counts_each_seed_once_beside_the_pooled_test(tmp_path, capsys):
    ref = tmp_path / "text"
    ref.write_text("a ONE TWO\nb THREE FOUR\n", encoding="utf-8")
    hyps = {}
    for name, text in {"b1": "a ONE\nb THREE FOUR\n", "b2": "a ONE TWO\nb FOUR\n",  # 1 of 4 words wrong each
                       "s1": "a ONE TWO\nb THREE FOUR\n", "s2": "a ONE X\nb X FOUR\n"}.items():  # 0 and 2 wrong
        hyps[name] = tmp_path / name
        hyps[name].write_text(text, encoding="utf-8")
    argv = ["--ref", str(ref), "--n_resamples", "100"]
    assert significance.main(argv + ["--baseline", str(hyps["b1"]), str(hyps["b2"]),
                                     "--system", str(hyps["s1"]), str(hyps["s2"])]) == 0
    pooled, seeds = capsys.readouterr().out.splitlines()
    assert "system 25.00 % vs baseline 25.00 %" in pooled and "x 2 seeds" in pooled
    # per seed: system - baseline = 0 - 25 and 50 - 25 points; their mean 0 with a t-interval of half-width
    # t(0.975, 1) * 35.36 / sqrt(2) = 12.7062 * 25 = 317.66
    assert seeds.startswith("over the 2 seeds: system 25.00 ± 35.36 % vs baseline 25.00 ± 0.00 % (mean ± std)")
    assert "per-seed mean +0.00 [-317.66, +317.66] (t-interval over seeds)" in seeds
    assert seeds.endswith("lower in 1 of 2 seeds, sign test p = 1")
    assert significance.main(argv + ["--baseline", str(hyps["b1"]), "--system", str(hyps["s1"])]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1  # one seed: no spread over seeds to report
