"""wenet_udps.results.loso: per-fold and pooled unseen-speaker WER, and the paired tests pooled over folds and seeds."""
import pytest

from wenet_udps.results import loso

REFS = {"ann": ["ONE TWO", "THREE FOUR"], "bob": ["FIVE SIX", "SEVEN EIGHT"]}


def write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k} {t}\n" for k, t in lines), encoding="utf-8")


def make(tmp_path, hyps, modes=("attention",)):
    """hyps[(fold, variant, seed)] = list of transcripts, in REFS order."""
    data, exp = tmp_path / "data", tmp_path / "exp"
    for fold, texts in REFS.items():
        write(data / fold / "test_unseen" / "text", [(f"{fold}_u{i}", t) for i, t in enumerate(texts)])
    for (fold, variant, seed), texts in hyps.items():
        for mode in modes:
            write(exp / f"{fold}_{variant}_seed{seed}" / "test_unseen" / mode / "text",
                  [(f"{fold}_u{i}", t) for i, t in enumerate(texts)])
    return exp, data


def perfect(fold):
    return REFS[fold]


def test_rates_per_fold_pooled_and_paired(tmp_path):
    hyps = {}
    for seed in (1, 2):
        for fold in REFS:
            hyps[(fold, "scaled_dot", seed)] = perfect(fold)
        # UDPS: one word wrong on ann in seed 1, both ann utterances wrong by a word in seed 2; bob perfect.
        hyps[("ann", "udps", seed)] = ["ONE TOO", "THREE FOUR"] if seed == 1 else ["ONE TOO", "THREE FOR"]
        hyps[("bob", "udps", seed)] = perfect("bob")
    exp, data = make(tmp_path, hyps)
    run = loso.load(exp, data, ["attention"])
    assert run.folds == ["ann", "bob"] and run.variants() == ["scaled_dot", "udps"]
    assert loso.rate(run.errors["udps"][1]["attention"]["ann"]) == 25.0
    assert [loso.rate(r) for r in run.pooled("udps", "attention")] == [12.5, 25.0]
    text = loso.report(run, ["attention"])
    assert "| attention | udps | 37.50 ± 17.68 | 0.00 ± 0.00 | 18.75 ± 8.84 |" in text
    assert "| attention | scaled_dot | 0.00 ± 0.00 | 0.00 ± 0.00 | 0.00 ± 0.00 |" in text
    assert "per fold ann +37.50, bob +0.00; udps lower in 0 of 2 folds; lower in 0 of 4 fold-seed pairs (2 tied), " \
        "sign test p = 0.5" in text
    assert "| ann | none | TWO→TOO 2, FOUR→FOR 1 (of 3) |" in text
    assert "| bob | none | none |" in text
    cmp = loso.paired(run, "scaled_dot", run, "udps", "attention")
    assert cmp.num_utts == 4 and cmp.num_seeds == 2 and cmp.difference == pytest.approx(18.75)
    plot = tmp_path / "loso.png"
    loso.plot(run, ["attention"], plot)
    assert plot.stat().st_size > 0


def test_against_an_older_run(tmp_path):
    new = {(f, v, 1): perfect(f) for f in REFS for v in ("scaled_dot", "udps")}
    old = dict(new)
    old[("ann", "udps", 1)] = ["ONE", "THREE"]
    exp, data = make(tmp_path / "new", new)
    old_exp, _ = make(tmp_path / "old", old)
    text = loso.report(loso.load(exp, data, ["attention"]), ["attention"], loso.load(old_exp, data, ["attention"]),
                       "old conf")
    assert "udps attention: this run 0.00 % vs old conf 25.00 %" in text
    assert "udps - scaled_dot attention: old conf +25.00 points" in text


def test_a_fold_missing_a_model_is_an_error(tmp_path):
    hyps = {(f, v, 1): perfect(f) for f in REFS for v in ("scaled_dot", "udps")}
    del hyps[("bob", "udps", 1)]
    exp, data = make(tmp_path, hyps)
    with pytest.raises(ValueError, match="udps seed 1: fold\\(s\\) bob have no model"):
        loso.load(exp, data, ["attention"])


def test_a_missing_mode_names_the_file(tmp_path):
    exp, data = make(tmp_path, {(f, "scaled_dot", 1): perfect(f) for f in REFS})
    with pytest.raises(ValueError, match="missing .*ann_scaled_dot_seed1/test_unseen/attention_rescoring/text"):
        loso.load(exp, data, ["attention_rescoring"])


def test_cli_exit_2_without_folds(tmp_path, capsys):
    assert loso.main(["--exp_root", str(tmp_path), "--data_root", str(tmp_path / "none"),
                      "--out", str(tmp_path / "R.md")]) == 2
    assert "no LOSO folds" in capsys.readouterr().err


def test_sign_test_counts_each_fold_and_seed(tmp_path):
    hyps = {}
    for seed in (1, 2):
        for fold, texts in REFS.items():
            hyps[(fold, "udps", seed)] = perfect(fold)
            hyps[(fold, "scaled_dot", seed)] = [texts[0].split()[0], texts[1]]  # one deletion per fold and seed
    exp, data = make(tmp_path, hyps)
    run = loso.load(exp, data, ["attention"])
    assert loso.per_pair(run, "scaled_dot", "udps", "attention") == \
        "lower in 4 of 4 fold-seed pairs, sign test p = 0.125"


def test_a_mode_decoded_with_a_replaced_checkpoint_is_an_error(tmp_path):
    """The rule of issue 36 item 10 in the LOSO report: no fold's hypotheses from a model that no longer exists."""
    from wenet_udps.scoring.references import reference_record
    from wenet_udps.utils.cli import UserError
    from wenet_udps.utils.source_info import model_source, write_source
    exp, data = make(tmp_path, {(f, "scaled_dot", 1): perfect(f) for f in REFS})
    ckpt = exp / "bob_scaled_dot_seed1" / "avg_2.pt"
    ckpt.write_bytes(b"first model")
    ref = data / "bob" / "test_unseen" / "text"
    write_source(str(exp / "bob_scaled_dot_seed1" / "test_unseen" / "attention" / "decode.info"),
                 {**model_source(str(ckpt), str(ckpt)),
                  **reference_record(str(ref), {f"bob_u{i}": t for i, t in enumerate(REFS["bob"])}, 0)})
    assert loso.load(exp, data, ["attention"]).folds == ["ann", "bob"]
    # issue 57, S15: a fold's text other than the one its hypotheses were decoded with is refused
    original = ref.read_text()
    ref.write_text(original.replace(REFS["bob"][0], "NINE"))
    with pytest.raises(UserError, match=rf"{ref} are not the references of {ref}, which .*bob_scaled_dot_seed1"):
        loso.load(exp, data, ["attention"])
    ref.write_text(original)
    ckpt.write_bytes(b"retrained")
    with pytest.raises(ValueError, match=r"bob_scaled_dot_seed1/test_unseen/attention/text is stale, its checkpoint "
                                         r".*avg_2.pt has been replaced since"):
        loso.load(exp, data, ["attention"])


def test_three_families_each_against_scaled_dot_and_udps_against_cosine(tmp_path):
    """Issue 81 item 5: with cosine beside the two, the report pairs cosine and UDPS with scaled-dot, and UDPS with
    cosine (the length factor alone), each under its own name."""
    hyps = {}
    for fold in REFS:
        hyps[(fold, "scaled_dot", 1)] = ["ONE", "THREE"] if fold == "ann" else perfect(fold)   # 2 errors of 8
        hyps[(fold, "cosine", 1)] = ["ONE TOO", "THREE FOUR"] if fold == "ann" else perfect(fold)  # 1 of 8
        hyps[(fold, "udps", 1)] = perfect(fold)
    exp, data = make(tmp_path, hyps)
    run = loso.load(exp, data, ["attention"])
    assert run.variants() == ["scaled_dot", "cosine", "udps"]
    text = loso.report(run, ["attention"])
    assert "- cosine - scaled_dot, attention: cosine 12.50 % vs scaled_dot 25.00 %" in text
    assert "- udps - scaled_dot, attention: udps 0.00 % vs scaled_dot 25.00 %" in text
    assert "- udps - cosine, attention: udps 0.00 % vs cosine 12.50 %" in text
    assert "scaled_dot - cosine" not in text and "cosine - udps" not in text


def test_udps_against_cosine_without_a_scaled_dot_model(tmp_path):
    exp, data = make(tmp_path, {(f, v, 1): perfect(f) for f in REFS for v in ("cosine", "udps")})
    text = loso.report(loso.load(exp, data, ["attention"]), ["attention"])
    assert "- udps - cosine, attention: udps 0.00 % vs cosine 0.00 %" in text
