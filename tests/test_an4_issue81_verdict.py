"""recipes/an4/issue81_verdict.py (issue 81's AN4 verdict from the kept decodes) on a made-up tree laid out as
issue81_seed.sh keeps it: λ chosen on dev by the committed rule (ties to the λ nearest 0.3, then the smaller), test
not read before all ten seeds are kept, the decision rule, and a `wer` that did not score its kept text refused."""
import importlib.util
import io
import json
from pathlib import Path

import pytest

from wenet_udps.scoring.bound import binding_lines, options_line
from wenet_udps.scoring.tokens import read_text
from wenet_udps.scoring.wer import score, write_report

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("issue81_verdict", ROOT / "recipes" / "an4" / "issue81_verdict.py")
verdict = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(verdict)

UTTS = {f"u{i}": "ONE TWO THREE FOUR" for i in range(8)}
# dev WER per family and λ, as the number of utterances with one word wrong (of 8 x 4 words per seed)
DEV_WRONG = {"scaled_dot": {0.1: 5, 0.2: 4, 0.3: 3, 0.5: 2, 0.7: 6},
             "udps": {0.1: 5, 0.2: 2, 0.3: 3, 0.5: 2, 0.7: 6},      # tie 0.2 / 0.5: nearer 0.3 wins
             "cosine": {0.1: 1, 0.2: 4, 0.3: 3, 0.5: 1, 0.7: 6}}    # tie 0.1 / 0.5, as near: the smaller
TEST_WRONG = {"scaled_dot": 6, "udps": 0, "cosine": 5}   # and in the joint modes at the family's chosen λ only:
CHOSEN = {"scaled_dot": 0.5, "udps": 0.2, "cosine": 0.1}  # every utterance wrong at the other λ
MODES = ("attention", "joint_ctc_attention", "joint_ctc_attention_lm", *verdict.BESIDE)


def _write(folder: Path, ref: Path, wrong: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    hyps = {k: ("ONE TWO THREE FIVE" if i < wrong else v) for i, (k, v) in enumerate(UTTS.items())}
    (folder / "text").write_text("".join(f"{k} {v}\n" for k, v in hyps.items()))
    out = io.StringIO()
    out.write("".join(line + "\n" for line in binding_lines(str(ref), str(folder / "text")) + [options_line(
        char=False, case_sensitive=False, remove_tag=True, missing="error", case="keep", punctuation="keep",
        ignore_words=None)]))
    write_report(score(read_text(str(ref)), hyps, char=False), out, verbose=False)
    (folder / "wer").write_text(out.getvalue())


def make_tree(root: Path, seeds) -> Path:
    for split in ("dev", "test"):
        (root / "refs" / split).mkdir(parents=True)
        (root / "refs" / split / "text").write_text("".join(f"{k} {v}\n" for k, v in UTTS.items()))
    for family in verdict.FAMILIES:
        for seed in seeds:
            base = root / f"{family}_seed{seed}"
            for lam in verdict.GRID:
                _write(base / "dev" / verdict.mode_dir("joint_ctc_attention", lam), root / "refs" / "dev" / "text",
                       DEV_WRONG[family][lam])
                for mode in ("joint_ctc_attention", "joint_ctc_attention_lm"):
                    _write(base / "test" / verdict.mode_dir(mode, lam), root / "refs" / "test" / "text",
                           TEST_WRONG[family] if lam == CHOSEN[family] else len(UTTS))
            if family == "udps":   # norm_ratio.json's shape, two heads of one site
                heads = [{"attention": {"mean_g": g, "frac_g_below_0.9": f}} for g, f in ((0.8, 0.5), (0.6, 0.7))]
                (base / "norm_ratio.json").write_text(json.dumps({"sites": [
                    {"site": "enc_self", "layer": 0, "heads": heads}]}))
            for mode in set(MODES) - {"joint_ctc_attention", "joint_ctc_attention_lm"}:
                _write(base / "test" / mode, root / "refs" / "test" / "text", TEST_WRONG[family])
    return root


def test_lambda_rule_and_the_verdict_with_ten_seeds(tmp_path):
    text = verdict.report(make_tree(tmp_path, verdict.SEEDS))
    assert "| scaled_dot | 15.62 | 12.50 | 9.38 | 6.25 | 18.75 | 0.5 |" in text
    assert "| udps | 15.62 | 6.25 | 9.38 | 6.25 | 18.75 | 0.2 |" in text
    assert "| cosine | 3.12 | 12.50 | 9.38 | 3.12 | 18.75 | 0.1 |" in text
    block = text.split("### test `attention`")[1].split("###")[0]
    assert "primary: UDPS - cosine: -15.62 points" in block and block.count("**holds**") == 1
    assert "secondary: cosine - scaled-dot: -3.12 points, 95 % CI [-9.38, +0.00]" in block   # 0 inside, estimate < 0
    assert block.count("**not shown**") == 1
    assert "beside: UDPS - scaled-dot" in block and block.rstrip().endswith("**-**")   # no rule for the third pair
    for mode in ("joint_ctc_attention", "joint_ctc_attention_lm"):   # each family read at its chosen λ
        block = text.split(f"### test `{mode}` (each family at its chosen λ)")[1].split("###")[0]
        assert "scaled_dot 18.75 ± 0.00, udps 0.00 ± 0.00, cosine 15.62 ± 0.00" in block
        block = text.split(f"### test `{mode}@0.3`")[1].split("###")[0]
        assert "scaled_dot 25.00 ± 0.00, udps 25.00 ± 0.00, cosine 25.00 ± 0.00" in block
        assert block.count("**-**") == 3   # λ 0.3 is reported beside, without the rule
    assert "### test `ctc_greedy_search`" in text
    assert "| enc_self | 0 | 0.700 | 0.600 |" in text and "(10 seeds' norm_ratio.json" in text


def test_test_is_not_read_before_the_tenth_seed(tmp_path):
    root = make_tree(tmp_path, range(1, 10))
    for seed in range(1, 10):   # no test decode at all: reading one would fail
        for family in verdict.FAMILIES:
            for f in (root / f"{family}_seed{seed}" / "test").rglob("text"):
                f.unlink()
    text = verdict.report(root)
    assert "9 of 10 seeds" in text and "Test not read" in text and "### test" not in text


def test_a_wer_that_did_not_score_the_kept_text_is_refused(tmp_path):
    root = make_tree(tmp_path, [1])
    text = root / "udps_seed1" / "dev" / "joint_ctc_attention_lambda0.2" / "text"
    text.write_text(text.read_text().replace("FIVE", "FOUR", 1))
    with pytest.raises(SystemExit, match=f"{text.parent / 'wer'}: scored another text than the kept one"):
        verdict.report(root)


@pytest.mark.parametrize("low, high, difference, expected", [
    (-2.0, -0.1, -1.0, "holds"), (0.1, 2.0, 1.0, "refuted"), (-1.0, 1.0, 0.0, "refuted"),
    (-1.0, 1.0, 0.2, "refuted"), (-1.0, 1.0, -0.2, "not shown")])
def test_decision_rule(low, high, difference, expected):
    assert verdict.decide(low, high, difference) == expected
