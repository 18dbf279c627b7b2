"""tools/collect_results.py on synthetic experiment folders."""
import subprocess
import sys
from pathlib import Path

import yaml

from tests.tools.load import load_tool
from tests.tools.results_helpers import build_exp_dir, decoded_record, make_exp, score_beside, write_wer

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "collect_results.py"


def test_describe_model(tmp_path):
    mod = load_tool("collect_results")
    y = tmp_path / "train.yaml"
    y.write_text(yaml.safe_dump({"encoder": "transformer", "att_udps": None,
                                 "decoder_conf": {"src_attention_layer_type": "udps_crossattn"}}))
    assert mod.describe_model(y) == ("transformer", "udps (dec-cross)")
    y.write_text(yaml.safe_dump({"encoder": "conformer", "att_udps": True}))
    assert mod.describe_model(y) == ("conformer", "udps")
    y.write_text(yaml.safe_dump({"encoder": "conformer",
                                 "encoder_conf": {"selfattention_layer_type": "rel_selfattn"}}))
    assert mod.describe_model(y) == ("conformer", "scaled-dot")
    # The label is the built model's: att_udps false is scaled-dot at every site, a site set only those sites.
    y.write_text(yaml.safe_dump({"encoder": "conformer", "att_udps": False,
                                 "encoder_conf": {"selfattention_layer_type": "rel_udps_selfattn"}}))
    assert mod.describe_model(y) == ("conformer", "scaled-dot")
    y.write_text(yaml.safe_dump({"encoder": "conformer", "att_udps": "enc_self"}))
    assert mod.describe_model(y) == ("conformer", "udps (enc-self)")


def test_table_and_plots(tmp_path):
    exp = build_exp_dir(tmp_path)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--exp_dir", str(exp), "--allow_unrecorded"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr

    md = (exp / "RESULTS.md").read_text()
    assert proc.stdout in md
    lines = [line for line in proc.stdout.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    # One row per experiment and set (dev before test), WeNet's mode order, then exp dir and checkpoint.
    assert header == ["model", "attention type", "set", "attention error rate", "ctc_greedy_search error rate",
                      "attention_rescoring error rate", "exp", "checkpoint"]
    rows = {tuple(c.strip() for c in line.strip("|").split("|"))[:3]: [c.strip() for c in line.strip("|").split("|")]
            for line in lines[2:]}
    assert list(rows)[:2] == [("conformer+bitransformer", "scaled-dot", "dev"),
                              ("conformer+bitransformer", "scaled-dot", "test")]
    assert len(rows) == 4
    sdp = rows[("conformer+bitransformer", "scaled-dot", "test")]
    assert sdp[3:6] == ["-", "6.25", "5.50"]
    assert sdp[6].endswith("conformer_sdp") and sdp[7] == "exp/conformer_sdp/avg_5.pt"
    assert rows[("conformer+bitransformer", "scaled-dot", "dev")][3:6] == ["-", "-", "8.00"]
    udps = rows[("conformer+bitransformer", "udps", "test")]
    assert udps[3:6] == ["-", "5.00", "4.75"]
    assert udps[7] == "unrecorded (no decode.info)"   # (--allow_unrecorded: a result no decode.info records)
    enc = rows[("transformer", "udps (enc-self)", "test")]
    assert enc[3:6] == ["7.50", "-", "-"]

    plots = exp / "plots"
    for name in ["loss.png", "error_rate.png", "udps_conformer_udps_steps.png",
                 "udps_transformer_enc_udps_steps.png"]:
        data = (plots / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", name
    assert not list(plots.glob("udps_conformer_sdp*"))


def test_metric_labels_table_and_bars(tmp_path):
    exp = build_exp_dir(tmp_path)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--exp_dir", str(exp), "--allow_unrecorded", "--metric", "CER"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "| attention_rescoring CER |" in proc.stdout
    assert (exp / "plots" / "cer.png").is_file() and not (exp / "plots" / "error_rate.png").exists()


def test_run_shorter_than_log_interval_still_plots(tmp_path):
    """Only per-epoch scalars (no train/* or udps/* step tags): loss and alpha/beta plots from them."""
    from torch.utils.tensorboard import SummaryWriter
    exp = tmp_path / "exp" / "short_udps"
    writer = SummaryWriter(str(exp / "tensorboard"))
    for epoch in range(2):
        writer.add_scalar("cv/loss", 5.0 - epoch, epoch)
        writer.add_scalar("train_epoch/loss", 6.0 - epoch, epoch)
        for h in range(4):
            writer.add_scalar(f"udps_epoch/encoder.encoders.1.self_attn.alpha/h{h}", 5.0 + h, epoch)
    writer.close()
    mod = load_tool("collect_results")
    written = mod.make_plots([], exp.parent, tmp_path / "plots", "WER")
    assert {p.name for p in written} == {"loss.png", "udps_short_udps_epochs.png"}


def test_udps_panels_one_per_site_and_layer_with_heads():
    mod = load_tool("collect_results")
    plots = mod.results_plots
    series = [(0, 1.0), (1, 2.0)]
    scalars = {f"udps/encoder.encoders.{layer}.self_attn.{p}/h{h}": series
               for layer in range(2) for p in ("alpha", "beta") for h in range(4)}
    scalars["udps/encoder.encoders.0.self_attn.alpha"] = series          # head mean: not drawn beside the heads
    scalars["udps/decoder.left_decoder.decoders.0.src_attn.alpha"] = series  # shared (one value)
    scalars["udps/decoder.right_decoder.decoders.0.self_attn.alpha/h0"] = series
    scalars["udps_epoch/encoder.encoders.0.self_attn.alpha/h0"] = series   # per-epoch: another figure
    panels = plots.udps_panels(scalars, per_epoch=False)
    assert set(panels) == {("encoder self-attention", 0), ("encoder self-attention", 1),
                           ("decoder cross-attention", 0), ("decoder self-attention (right-to-left)", 0)}
    assert sorted(panels[("encoder self-attention", 0)]) == [(p, h) for p in ("alpha", "beta") for h in range(4)]
    assert list(panels[("decoder cross-attention", 0)]) == [("alpha", -1)]
    assert set(plots.udps_panels(scalars, per_epoch=True)) == {("encoder self-attention", 0)}


def test_the_scale_plots_take_their_styles_and_title_from_the_families():
    """Issue 81 attack F5: a cosine model's plot was titled "learned UDPS scales" and drew cos_alpha and cos_beta
    alike (dotted: PARAM_STYLE knew alpha and beta only). Each class declares its scales (``scales``), so every
    registered family's α is solid and β dashed, and the title names the families drawn."""
    from wenet_udps.transformer.attention import ATTENTION_CLASSES, scale_symbols
    plots = load_tool("collect_results").results_plots
    scales = scale_symbols()
    assert plots.scale_style("cos_alpha", scales) == ("α", "-") == plots.scale_style("alpha", scales)
    assert plots.scale_style("cos_beta", scales) == ("β", "--") == plots.scale_style("beta", scales)
    assert plots.scales_title(["cos_alpha", "cos_beta"], scales) == "cosine"
    assert plots.scales_title(["alpha"], scales) == "UDPS"
    for name, cls in ATTENTION_CLASSES.items():   # every scale a class reports is declared
        module = cls(n_head=2, n_feat=8)
        assert set(module.effective_scales()) == set(cls.scales), name


def test_read_scalars_merges_event_files(tmp_path):
    mod = load_tool("collect_results")
    exp = build_exp_dir(tmp_path)
    s = mod.read_scalars(exp / "conformer_udps")
    assert [v for _, v in s["train/loss"]] == [10.0, 9.0, 8.0, 7.0, 6.0]
    assert [step for step, _ in s["cv/loss"]] == [0, 1]
    assert s["udps/encoder.encoders.0.self_attn.alpha"][-1] == (4, 14.0)
    assert mod.read_scalars(exp / "missing") == {}


def test_no_results_fails_in_one_line_and_keeps_the_old_table(tmp_path):
    exp = tmp_path / "exp"
    exp.mkdir()
    (tmp_path / "r.md").write_text("an older table\n")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--exp_dir", str(exp), "--allow_unrecorded", "--out", str(tmp_path / "r.md")],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"collect_results.py: no results: no {exp}/<name>/<set>/<mode>/wer files (run stage 5); {tmp_path / 'r.md'} "
        "not written"]
    assert (tmp_path / "r.md").read_text() == "an older table\n"


def test_seeded_runs_get_mean_std_and_a_significance_line(tmp_path):
    """Two seeds per variant: UDPS makes one error per utterance, scaled-dot three; the test is significant."""
    data = tmp_path / "data" / "test"
    data.mkdir(parents=True)
    refs = {f"u{i}": "ONE TWO THREE FOUR" for i in range(30)}
    (data / "text").write_text("".join(f"{k} {v}\n" for k, v in refs.items()), encoding="utf-8")
    (data / "utt2spk").write_text("".join(f"{k} spk{i % 2}\n" for i, k in enumerate(refs)), encoding="utf-8")
    exp = tmp_path / "exp"
    for name, hyp in (("c_scaled_dot", "ONE"), ("c_udps", "ONE TWO THREE")):
        for seed in (1, 2):
            mode_dir = exp / f"{name}_seed{seed}" / "test" / "attention"
            mode_dir.mkdir(parents=True)
            (mode_dir / "text").write_text("".join(f"{k} {hyp}\n" for k in refs), encoding="utf-8")
            write_wer(mode_dir / "wer", 75.0 if name == "c_scaled_dot" else 25.0 + seed)
            (mode_dir.parents[1] / "train.yaml").write_text(yaml.safe_dump({"encoder": "transformer", "seed": seed}),
                                                           encoding="utf-8")
    tool = load_tool("collect_results")
    assert tool.main(["--exp_dir", str(exp), "--allow_unrecorded", "--plots_dir", str(tmp_path / "plots"), "--data_dir",
                      str(tmp_path / "data")]) == 0
    text = (exp / "RESULTS.md").read_text(encoding="utf-8")
    assert "| c_udps | test | 26.50 ± 0.71 (seeds 1: 26.00, 2: 27.00) |" in text
    assert "| c_scaled_dot | test | 75.00 ± 0.00 (seeds 1: 75.00, 2: 75.00) |" in text
    # The significance line is computed from the hypothesis texts, not the wer files: 25 % vs 75 %.
    line = next(x for x in text.splitlines() if x.startswith("- test, attention:"))
    assert "c_udps 25.00 % vs c_scaled_dot 75.00 %: significantly lower" in line and "30 utterances x 2 seeds" in line
    # each training and each voice counted once: 2 seeds, 2 speakers x 2 seeds
    assert line.endswith("; c_udps per-seed mean -50.00 [-50.00, -50.00] (t-interval over seeds); lower in 2 of 2 "
                         "seeds, sign test p = 0.5; lower in 4 of 4 speaker-seed pairs, sign test p = 0.125")
    # a word-scored corpus: the same test on the letters, ONE (3 of 15 letters) against ONETWOTHREE (11)
    cer = text[text.index("The same on the letter CER"):].splitlines()
    line = next(x for x in cer if x.startswith("- test, attention:"))
    assert "c_udps 26.67 % vs c_scaled_dot 80.00 %: significantly lower" in line
    assert "- seeds: 1 2" in text and "- commit:" in text
    # Seed 2's attention decoded with a checkpoint since removed (its other mode current): left out of the table
    # and of the paired test, which has no second seed to pair then.
    (exp / "c_udps_seed2" / "test" / "attention" / "decode.info").write_text(
        f"checkpoint: {exp / 'c_udps_seed2' / 'avg_5.pt'}\nsha256: 0123\n", encoding="utf-8")
    write_wer(exp / "c_udps_seed2" / "test" / "ctc_greedy_search" / "wer", 30.0)
    assert tool.main(["--exp_dir", str(exp), "--allow_unrecorded", "--plots_dir", str(tmp_path / "plots"), "--data_dir",
                      str(tmp_path / "data")]) == 0
    text = (exp / "RESULTS.md").read_text(encoding="utf-8")
    assert "| c_udps | test | 26.00 (one seed: 1: 26.00) |" in text and "- test, attention:" not in text


def test_results_name_the_seed_that_ran(tmp_path):
    """Issue 57: a run without --seeds trains with its conf's seed (777 in train.yaml), but RESULTS.md said
    "seeds: n/a". The seeds recorded are those of the models' train.yaml, each once."""
    exp = tmp_path / "exp"
    for name in ("c_scaled_dot", "c_udps"):
        make_exp(exp, name, {"encoder": "transformer", "att_udps": name.endswith("udps"), "seed": 777},
                 {("test", "attention"): 5.0}, udps=False)
    tool = load_tool("collect_results")
    assert tool.main(["--exp_dir", str(exp), "--allow_unrecorded", "--plots_dir", str(tmp_path / "plots")]) == 0
    assert "\n- seeds: 777\n" in (exp / "RESULTS.md").read_text(encoding="utf-8")


def test_seed_groups_plot_as_one_bar_with_the_std_as_error(tmp_path):
    """The runs of one --seeds group become one bar (mean, std ddof 1); a run outside any group keeps its own."""
    tool = load_tool("collect_results")
    exps = [tool.Experiment(name=f"c_udps_seed{s}", path=tmp_path, attention="udps", wer={("test", "attention"): v})
            for s, v in ((1, 20.0), (2, 24.0), (3, 28.0))]
    exps.append(tool.Experiment(name="c_scaled_dot", path=tmp_path, attention="scaled-dot", wer={("test", "attention"): 30.0}))
    rows = {label: (values, errors) for label, values, errors in tool.bar_rows(exps)}
    assert rows["c_udps (udps, 3 seeds)"] == ({("test", "attention"): 24.0}, {("test", "attention"): 4.0})
    assert rows["c_scaled_dot (scaled-dot)"] == ({("test", "attention"): 30.0}, {})
    out = tmp_path / "cer.png"
    tool.results_plots.plot_error_bars(tool.bar_rows(exps), ["test"], ["attention"], "CER", out)
    assert out.stat().st_size > 0


def test_gpu_preflight_verdicts_in_made_with(tmp_path):
    import json
    exp = build_exp_dir(tmp_path)
    (exp / "conformer_udps" / "gpu_check.json").write_text(json.dumps(
        {"ok": False, "device": "NVIDIA H100", "date": "2026-11-24", "torch": "2.13.0", "triton": "3.9.0",
         "cuda": "12.8", "checks": []}))
    (exp / "conformer_sdp" / "gpu_check.json").write_text("{not json")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--exp_dir", str(exp), "--allow_unrecorded"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    made_with = (exp / "RESULTS.md").read_text().split("## Made with")[1]
    assert "- GPU preflight of conformer_udps: FAILED on NVIDIA H100 (2026-11-24, torch 2.13.0, triton 3.9.0, " \
           "CUDA 12.8)" in made_with
    assert "- GPU preflight of conformer_sdp: unreadable (JSONDecodeError" in made_with
    assert "transformer_enc_udps" not in made_with


def test_sherpa_rtf_is_a_column(tmp_path):
    exp = build_exp_dir(tmp_path)
    sherpa = exp / "conformer_udps" / "test" / "sherpa_int8"
    write_wer(sherpa / "wer", 4.5)
    (sherpa / "rtf").write_text("RTF 0.0031 (0.50 s for 161.3 s of audio, 1 thread(s))\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--exp_dir", str(exp), "--allow_unrecorded"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = (exp / "RESULTS.md").read_text(encoding="utf-8").splitlines()
    header = next(x for x in lines if x.startswith("| model |")).split(" | ")
    row = next(x for x in lines if "conformer_udps" in x and "| test |" in x).split(" | ")
    assert row[header.index("sherpa_int8 RTF")] == "0.0031" and row[header.index("sherpa_int8 error rate")] == "4.50"


def test_results_of_a_replaced_checkpoint_are_left_out(tmp_path, capsys):
    """Issue 36 item 10: decode 2 modes with avg_5.pt, retrain (--force) and decode 1 mode with avg_2.pt: the row
    of avg_2.pt must not show the other mode of the deleted model; nor a re-made file of the same name."""
    from wenet_udps.decode.data_list import write_results
    from wenet_udps.utils.source_info import model_source
    mod = load_tool("collect_results")
    exp = tmp_path / "exp" / "x"
    exp.mkdir(parents=True)
    (exp / "train.yaml").write_text(yaml.safe_dump({"encoder": "transformer"}), encoding="utf-8")
    old, new = exp / "avg_5.pt", exp / "avg_2.pt"
    old.write_bytes(b"old model")
    config = str(exp / "train.yaml")

    def decode(ckpt, modes, hyp):   # recognize's results (text, decode.info), scored as stage 5 scores
        source = {**model_source(str(ckpt), config), **decoded_record(exp / "test" / modes[0])}
        write_results({m: {"a": hyp} for m in modes}, str(exp / "test"), source)
        for m in modes:
            score_beside(exp / "test" / m)

    decode(old, ["attention", "ctc_greedy_search"], "A")
    [e] = mod.collect(tmp_path / "exp")
    assert e.wer == {("test", "attention"): 0.0, ("test", "ctc_greedy_search"): 0.0}
    old.unlink()                      # --force deleted the run; the new one has 2 epochs
    new.write_bytes(b"new model")
    decode(new, ["ctc_greedy_search"], "B")
    [e] = mod.collect(tmp_path / "exp")
    assert e.wer == {("test", "ctc_greedy_search"): 100.0}
    assert f"{exp / 'test' / 'attention'}: left out, its checkpoint {old} no longer exists" in capsys.readouterr().err
    table = mod.markdown_table([e], "CER")
    assert "attention CER" not in table and table.splitlines()[2].split(" | ")[3:] == ["100.00", str(exp), f"{new} |"]
    new.write_bytes(b"retrained under the same name")
    assert mod.collect(tmp_path / "exp") == []
    assert "has been replaced since" in capsys.readouterr().err


def test_a_bad_utt2spk_is_one_line_naming_the_file_and_line(tmp_path, capsys):
    """The seeds' speaker counts read <data>/<set>/utt2spk: a line without a speaker stops with file:line, no
    traceback, and no RESULTS.md half written."""
    data = tmp_path / "data" / "test"
    data.mkdir(parents=True)
    (data / "text").write_text("u0 ONE\n", encoding="utf-8")
    (data / "utt2spk").write_text("u0 spk0\nu1\n", encoding="utf-8")
    exp = tmp_path / "exp"
    for name in ("c_scaled_dot_seed1", "c_udps_seed1"):
        mode_dir = exp / name / "test" / "attention"
        mode_dir.mkdir(parents=True)
        (mode_dir / "text").write_text("u0 ONE\n", encoding="utf-8")
        write_wer(mode_dir / "wer", 0.0)
    tool = load_tool("collect_results")
    assert tool.main(["--exp_dir", str(exp), "--allow_unrecorded", "--data_dir", str(tmp_path / "data")]) == 1
    err = capsys.readouterr().err
    assert f"{data / 'utt2spk'}:2: expected '<key> <speaker>'" in err.strip().splitlines()[-1]
    assert "Traceback" not in err
    assert not (exp / "RESULTS.md").exists()


def test_attention_is_labelled_from_the_checkpoints_weights_not_train_yaml(tmp_path, capsys):
    """Issue 47, case 14: att_udps flipped in an editable train.yaml labelled a scaled-dot checkpoint "udps"."""
    import torch

    from tests.transformer.test_asr_model import tiny_config
    from wenet_udps.decode.data_list import write_results
    from wenet_udps.model_builder import build_model
    from wenet_udps.utils.source_info import model_source
    mod = load_tool("collect_results")
    exp = tmp_path / "exp" / "x"
    exp.mkdir(parents=True)
    ckpt = exp / "avg_2.pt"
    torch.save(build_model(tiny_config() | {"att_udps": False}).state_dict(), ckpt)
    (exp / "train.yaml").write_text(yaml.safe_dump({"encoder": "transformer", "att_udps": True}), encoding="utf-8")
    mode_dir = exp / "test" / "attention"
    source = {**model_source(str(ckpt), str(exp / "train.yaml")), **decoded_record(mode_dir)}
    write_results({"attention": {"a": "A"}}, str(exp / "test"), source)
    score_beside(mode_dir)
    [e] = mod.collect(tmp_path / "exp")
    assert e.attention == "scaled-dot"
    assert f"builds udps attention, but {ckpt} holds scaled-dot weights" in capsys.readouterr().err
    torch.save(build_model(tiny_config() | {"att_udps": True}).state_dict(), ckpt)  # a UDPS model decoded
    source = {**model_source(str(ckpt), str(exp / "train.yaml")), **decoded_record(mode_dir)}
    write_results({"attention": {"a": "A"}}, str(exp / "test"), source)
    [e] = mod.collect(tmp_path / "exp")
    assert e.attention == "udps" and "holds" not in capsys.readouterr().err


def test_results_name_the_word_lm_of_the_lm_columns(tmp_path):
    exp = tmp_path / "exp"
    make_exp(exp, "conformer_sdp", {"encoder": "conformer", "att_udps": False},
             {("test", "attention_rescoring"): 5.5, ("test", "attention_rescoring_lm"): 4.25}, udps=False)
    # the checkpoint is the experiment's (results.origin: a result is bound to its experiment's folder)
    ckpt, lm = exp / "conformer_sdp" / "avg.pt", tmp_path / "lm.arpa"
    ckpt.write_bytes(b"weights")
    lm.write_text("an LM")
    from wenet_udps.utils.source_info import file_sha256
    (exp / "conformer_sdp" / "test" / "attention_rescoring_lm" / "decode.info").write_text(
        f"checkpoint: {ckpt}\nsha256: {file_sha256(str(ckpt))}\nlm: {lm}\nlm_order: 3\nlm_size: 5\n"
        f"lm_sha256: {file_sha256(str(lm))}\nlm_weight: 0.6\nword_score: 1\n"
        f"config: {exp / 'conformer_sdp' / 'train.yaml'}\nmode: attention_rescoring_lm\n"   # a whole record
        f"text_sha256: {file_sha256(str(exp / 'conformer_sdp' / 'test' / 'attention_rescoring_lm' / 'text'))}\n"
        + "".join(f"{k}: {v}\n" for k, v in decoded_record(exp / "conformer_sdp" / "test" / "x").items()),
        encoding="utf-8")
    score_beside(exp / "conformer_sdp" / "test" / "attention_rescoring_lm")   # stage 5's score, beside its record
    mod = load_tool("collect_results")
    assert mod.main(["--exp_dir", str(exp), "--allow_unrecorded"]) == 0
    text = (exp / "RESULTS.md").read_text()
    assert "attention_rescoring error rate | attention_rescoring_lm error rate" in text  # the LM column last
    assert f"- word LM {lm} (3-gram, 5 bytes, SHA-256 {file_sha256(str(lm))[:12]}; lm_weight 0.6, word_score 1): " \
           "conformer_sdp test" in text
    lm.write_text("rebuilt")  # the LM result is stale now: left out, and so is its LM line
    assert mod.main(["--exp_dir", str(exp), "--allow_unrecorded"]) == 0
    text = (exp / "RESULTS.md").read_text()
    assert "attention_rescoring_lm" not in text and "word LM" not in text
