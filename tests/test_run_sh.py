"""run.sh end to end on a few synthesised utterances (every stage but the download), and its input checks."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.bare_path import bare_bin
from tests.run_sh_helpers import ROOT, TINY_MODEL, one_error_line as _one_error_line, run_sh
from wenet_udps.utils.cli import CPU_CEILING

MODES = ["ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring"]


@pytest.mark.slow
@pytest.mark.xdist_group("tiny_run")
def test_all_stages_on_a_tiny_corpus(tiny_run):
    """Stages 0-7 (tests/run_sh_helpers.py run_tiny_corpus, run once per session) and a rerun that skips them."""
    proc, data, exp = tiny_run.proc, tiny_run.data, tiny_run.exp
    for stage in range(0, 8):
        assert re.search(rf"\) stage {stage}: ", proc.stderr), f"stage {stage} did not log"
    # Stage 4's two background trainings: each one's progress line on the terminal, and the seed that ran (issue 57)
    for variant in ("scaled_dot", "udps"):
        assert re.search(rf"stage 4 progress, tiny_{variant}: epoch 0 of 0\.\.0 done; train loss .*; cv loss .*, "
                         rf"last epoch", proc.stderr), proc.stderr[-4000:]
        assert f"stage 4: {exp}_{variant} trained with seed 777 ({exp}_{variant}/train.yaml)" in proc.stderr
        # issue 68: one epoch of 3 batches is far short of the conf's 2,000-step warm-up, said before it trains on
        assert re.search(rf"stage 4 progress, tiny_{variant}: warning: scheduler_conf.warmup_steps 2000 is more "
                         r"than the 3 optimizer steps this run takes at most", proc.stderr), proc.stderr[-4000:]
    for variant in ("scaled_dot", "udps"):
        d = Path(f"{exp}_{variant}")
        assert re.search(rf"^att_family: {variant}$", (d / "train.yaml").read_text(), re.M)
        assert (d / "final.pt").is_file() and (d / "avg_1.pt").is_file()
        for mode in MODES:
            hyp = (d / "test" / mode / "text").read_text().splitlines()
            assert len(hyp) == 4
            # WeNet's layout: the Overall line, the per-cluster lines, a blank line and a rule of "=".
            wer_lines = (d / "test" / mode / "wer").read_text(encoding="utf-8").splitlines()
            assert sum(line.startswith("Overall -> ") for line in wer_lines) == 1 and wer_lines[-1] == "=" * 75
        assert list((d / "export").glob("*.onnx")), "stage 6 exported nothing"
        assert {"model.onnx", "model.int8.onnx", "tokens.txt"} <= {p.name for p in (d / "sherpa").iterdir()}
        for name in ("sherpa_fp32", "sherpa_int8"):
            assert len((d / "test" / name / "text").read_text().splitlines()) == 4
            assert (d / "test" / name / "rtf").read_text().startswith("RTF ")
        assert re.search(rf"stage 7: {d} test sherpa_int8: Overall -> .*, RTF ", proc.stderr)
    results = (tiny_run.results / "RESULTS.md").read_text()
    assert "udps" in results.lower() and "attention_rescoring" in results and "sherpa_int8" in results
    plots = tiny_run.results / "plots"
    assert list(plots.glob("*.png"))
    # Stage 7 looks inside both variants: attention weights per layer and the entropy per head.
    assert {p.name for p in plots.glob("attention_*.png")} == {"attention_tiny_scaled_dot.png",
                                                               "attention_tiny_udps.png", "attention_entropy.png"}
    # Rerunning skips what is done: no training, no decoding list rebuilt.
    again = run_sh("--stage", "1", "--stop_stage", "4", "--data", str(data), "--dir", str(exp),
                   "--train_override", TINY_MODEL)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "exists, skipping" in again.stderr and "stage 4: train" not in again.stderr


def test_unknown_corpus_lists_only_real_corpora():
    line = _one_error_line(run_sh("--corpus", "timit"))
    assert "unknown corpus 'timit'" in line
    listed = line.split("valid: ", 1)[1].split()
    assert listed == sorted(p.parent.name for p in (ROOT / "recipes").glob("*/settings.sh"))
    assert "aishell" in listed and "common.sh" not in line and "tiny_prepare.sh" not in line


@pytest.mark.parametrize("args, message", [
    (["--stage", "abc"], "--stage takes an integer, got 'abc'"),
    (["--stop_stage", "1.5"], "--stop_stage takes an integer"),
    (["--stage"], "option --stage needs a value"),
    (["--average_mode", "best"], "--average_mode takes one of: val_best latest; got 'best'"),
    (["--families", "scaled_dot cosin"], "--families: 'cosin': unknown family 'cosin'; valid: a family of"),
    (["--families", "udps udps:enc_self+dec_self+dec_cross"], "udps and udps:enc_self+dec_self+dec_cross are one"),
    # issue 81 F6: an empty site set after the colon trained every site cosine, as 'cosine' does
    (["--families", "cosine:"], "--families: 'cosine:': no site after ':'; valid: a family of"),
    (["--att_udps", "true"], "unknown option --att_udps"),
    (["--data_type", "tar"], "--data_type takes one of: raw shard"),
    (["--skip_gpu_check", "yes"], "option --skip_gpu_check takes true or false, got 'yes'"),
    (["--gpus", "first"], "--gpus takes comma-separated GPU ids"),
    (["--cpu_jobs", "0"], "--cpu_jobs must be >= 1, got 0"),
    (["--cpu_jobs", "two"], "--cpu_jobs takes an integer"),
    (["--corpus", "librispeech", "--nbpe", "many"], "--nbpe takes an integer"),
    (["--corpus", "aishell", "--token_type", "word"], "--token_type takes one of: char bpe"),
    (["--ctc_weight", "high"], "--ctc_weight takes a number"),
    (["--seeds", "1 x"], "--seeds takes non-negative integers, got 'x'"),
    # issue 47, case 12: two identical models counted as two seeds
    (["--seeds", "1 01"], "--seeds lists seed 1 more than once ('01' is 1)"),
    (["--seeds", "3 2 3"], "--seeds lists seed 3 more than once ('3' is 3)"),
    (["--corpus", "fsdd", "--loso", "true", "--seeds", "2 002"], "--seeds lists seed 2 more than once"),
    (["stage4"], "unexpected argument 'stage4'"),
    (["--stage", "9"], "--stage must be in -1..7, got 9"),
    (["--stop_stage", "8"], "--stop_stage must be in -1..7, got 8"),
    (["--stage", "5", "--stop_stage", "2"], "--stage 5 is after --stop_stage 2: no stage would run"),
    # -5 wrote 0 shards and up-to-date stamps, 0 was a traceback (issue 36)
    (["--data_type", "shard", "--num_utts_per_shard", "-5"], "--num_utts_per_shard must be >= 1, got -5"),
    (["--num_utts_per_shard", "0"], "--num_utts_per_shard must be >= 1, got 0"),
    (["--beam_size", "0"], "--beam_size 0: must be in 1..1000, got 0"),
    (["--beam_size", "1000000000"], "--beam_size 1000000000: must be in 1..1000, got 1000000000 (hypotheses kept"),
    (["--decode_batch_size", "5000"], "--decode_batch_size 5000: must be in 1..1024, got 5000 (a batch's padded"),
    (["--num_workers", "-1"], "--num_workers must be >= 0, got -1"),
    # issue 80 round 7, F8: no ceiling (100000 workers were started, or trainings side by side); the programs' own
    (["--num_workers", "100000"], f"--num_workers 100000: must be in 0..{CPU_CEILING}, got 100000 (each is a process"),
    (["--num_workers", "99999999999999999999"], "--num_workers 99999999999999999999: must be in 0.."),
    (["--cpu_jobs", "100000"], f"--cpu_jobs 100000 is more than this machine's {len(os.sched_getaffinity(0))} CPUs"),
    (["--cpu_jobs", "99999999999"], "--cpu_jobs 99999999999 is more than this machine's"),
    (["--node_rank", "1"], "--node_rank must be in 0..0 (--num_nodes 1), got 1"),
    (["--decoding_chunk_size", "0"], "--decoding_chunk_size 0: must be in 1..10000 or -1, got 0"),
    (["--num_decoding_left_chunks", "4"], "--num_decoding_left_chunks 4 limits the left context of chunked"),
    # issue 67: the decoding modes and their options, checked as stage 5's recognize checks them, before any stage
    (["--decode_modes", "attention beam"], "--decode_modes 'attention beam': 'beam' is not a mode; valid: "),
    (["--decode_modes", "joint_ctc_attention_lm"], "(the *_lm modes come with --lm true)"),
    (["--decode_modes", "joint_ctc_attention", "--decoding_chunk_size", "4"],
     "--decoding_chunk_size 4: joint_ctc_attention cannot stream"),
    (["--joint_ctc_weight", "2"], "--joint_ctc_weight '2': must be in [0, 1], got 2"),
])
def test_malformed_options_are_usage_errors(args, message):
    proc = run_sh(*args)
    line = _one_error_line(proc)
    assert message in line
    assert "unbound variable" not in proc.stderr and "Traceback" not in proc.stderr


def test_relative_paths_are_read_from_the_callers_directory(tmp_path):
    """From another directory, a relative --config named the repo's file of that name (issue 36): an edited copy in
    the caller's directory was ignored. Now it is the caller's: here a broken copy, refused naming its path."""
    conf = tmp_path / "conf" / "tiny_zh" / "train_conformer.yaml"
    conf.parent.mkdir(parents=True)
    conf.write_text((ROOT / "conf/tiny_zh/train_conformer.yaml").read_text() + "max_epochs: 3\n")
    common = ["bash", str(ROOT / "run.sh"), "--stage", "5", "--stop_stage", "5", "--families", "scaled_dot",
              "--dir", "exp/x"]
    proc = subprocess.run([*common, "--config", "conf/tiny_zh/train_conformer.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    line = _one_error_line(proc)
    assert str(conf) in line and "max_epochs: unknown key" in line
    proc = subprocess.run([*common, "--config", "conf/tiny_zh/missing.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert f"config {tmp_path}/conf/tiny_zh/missing.yaml not found" in _one_error_line(proc)
    # --dir too (and the others): the exp dir is the caller's exp/x_scaled_dot, not the repo's.
    proc = subprocess.run([*common], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert f"missing {tmp_path}/exp/x_scaled_dot/final.pt (made by stage 4)" in _one_error_line(proc)


def test_dir_with_a_trailing_slash_is_the_same_prefix(tmp_path):
    """``--dir DIR/`` put the exp dir at DIR/_scaled_dot and RESULTS.md in DIR's parent (issue 36)."""
    proc = run_sh("--stage", "5", "--stop_stage", "5", "--families", "scaled_dot", "--dir", f"{tmp_path}/exp/x//")
    assert f"missing {tmp_path}/exp/x_scaled_dot/final.pt (made by stage 4)" in _one_error_line(proc)


def test_download_opts_reach_the_download_script(tmp_path):
    line = _one_error_line(run_sh("--corpus", "librispeech", "--stage", "-1", "--stop_stage", "-1",
                                  "--download_dir", str(tmp_path / "dl"), "--download_opts", "--subset 7"))
    assert "--subset must be 960 or 100, got '7'" in line
    assert not (tmp_path / "dl").exists()


def test_gpus_without_cuda_is_one_line_up_front(tmp_path):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    proc = run_sh("--stage", "4", "--stop_stage", "4", "--gpus", "0", "--data", str(tmp_path / "d"))
    line = _one_error_line(proc)
    assert "--gpus 0" in line and "omit --gpus" in line and "Traceback" not in proc.stderr


def test_chunked_decoding_needs_a_streaming_conf(tmp_path):
    common = ["--stage", "5", "--stop_stage", "5", "--dir", str(tmp_path / "exp"), "--families", "scaled_dot",
              "--decoding_chunk_size", "16", "--data", str(tmp_path / "data")]
    line = _one_error_line(run_sh(*common))
    assert "--decoding_chunk_size 16" in line and "non-streaming" in line and "u2pp" in line
    # A streaming conf passes the check (and stops at the next missing input).
    line = _one_error_line(run_sh(*common, "--config", "conf/tiny_zh/train_u2pp_conformer.yaml"))
    assert "final.pt (made by stage 4)" in line


def test_unknown_train_override_is_one_line(tmp_path):
    proc = run_sh("--stage", "4", "--stop_stage", "4", "--train_override", "max_epochs=3", own=tmp_path)
    line = _one_error_line(proc)
    assert "max_epochs: unknown key (did you mean 'max_epoch'" in line and "Traceback" not in proc.stderr


def test_checkpoint_needs_one_model_and_the_right_attention(tmp_path):
    (tmp_path / "x.pt").write_bytes(b"")  # a missing one is refused before, by the argument checks
    line = _one_error_line(run_sh("--stage", "4", "--stop_stage", "4", "--checkpoint", str(tmp_path / "x.pt"),
                                  own=tmp_path))
    assert "belongs to one model" in line and "--families <family>" in line
    # A scaled-dot checkpoint given to the UDPS model is refused before training, naming what it holds.
    import torch
    import yaml
    from wenet_udps.model_builder import build_model
    config = yaml.safe_load((ROOT / "conf/tiny_zh/train_conformer.yaml").read_text())
    config.update(input_dim=40, output_dim=8, cmvn=None, att_udps=False)
    torch.save({"model": build_model(config).state_dict()}, tmp_path / "sdp.pt")
    proc = run_sh("--stage", "4", "--stop_stage", "4", "--families", "udps", "--checkpoint", str(tmp_path / "sdp.pt"),
                  own=tmp_path)
    line = _one_error_line(proc)
    assert "does not fit the udps model" in line and "looks like a scaled-dot model" in line
    # --checkpoint with --seeds: each seed's model continues from its own, named with {seed} (issue 57, M10)
    seeds = ("--stage", "4", "--stop_stage", "4", "--families", "scaled_dot", "--seeds", "1 2")
    line = _one_error_line(run_sh(*seeds, "--checkpoint", str(tmp_path / "sdp.pt"), own=tmp_path))
    assert "--checkpoint continues one model, and --seeds trains one per seed: write {seed}" in line
    line = _one_error_line(run_sh(*seeds, "--checkpoint", str(tmp_path / "x_seed{seed}" / "final.pt"), own=tmp_path))
    assert f"--checkpoint: {tmp_path}/x_seed1/final.pt (seed 1) is not a file" in line


def test_stage0_redone_when_prepare_opts_change(tmp_path, fsdd_dir):
    common = ["--corpus", "fsdd", "--fsdd_dir", str(fsdd_dir), "--download_dir", str(tmp_path / "dl"),
              "--data", str(tmp_path / "data"), "--stage", "-1", "--stop_stage", "0"]
    small = run_sh(*common, "--prepare_opts", "--num_train 2 --num_dev 1 --num_test 1")
    assert small.returncode == 0, small.stderr[-2000:]
    same = run_sh(*common, "--prepare_opts", "--num_train 2 --num_dev 1 --num_test 1")
    assert "already prepared" in same.stderr
    # The same folders named another way (a symlink, a "..") are the same source: nothing is prepared again.
    (tmp_path / "link").symlink_to(tmp_path)
    other = [str(tmp_path / "link" / "sub" / ".." / "dl") if x == str(tmp_path / "dl") else
             str(tmp_path / "link" / fsdd_dir.name) if x == str(fsdd_dir) else x for x in common]
    (tmp_path / "sub").mkdir()
    (tmp_path / fsdd_dir.name).symlink_to(fsdd_dir)
    aliased = run_sh(*other, "--prepare_opts", "--num_train 2 --num_dev 1 --num_test 1")
    assert "already prepared" in aliased.stderr, aliased.stderr[-2000:]
    larger = run_sh(*common, "--prepare_opts", "--num_train 3 --num_dev 1 --num_test 1")
    assert larger.returncode == 0, larger.stderr[-2000:]
    assert "preparing" in larger.stderr and "--num_train 3" in larger.stderr
    assert len((tmp_path / "data" / "train" / "text").read_text().splitlines()) == 3


def test_unknown_option_is_rejected():
    line = _one_error_line(run_sh("--no_such_option", "1"))
    assert "unknown option --no_such_option" in line


def test_stage_range_that_skips_a_needed_output_says_which_stage(tmp_path):
    line = _one_error_line(run_sh("--stage", "4", "--stop_stage", "4", "--data", str(tmp_path / "nodata"),
                                  "--dir", str(tmp_path / "exp")))
    assert "missing" in line and "stage 3" in line


def test_missing_dataset_path_says_what_to_do(tmp_path):
    line = _one_error_line(run_sh("--corpus", "aishell", "--stage", "0", "--stop_stage", "0",
                                  "--download_dir", str(tmp_path / "nowhere"), "--data", str(tmp_path / "d")))
    assert str(tmp_path / "nowhere") in line or "download" in line.lower()


def test_missing_espeak_stops_before_work(tmp_path):
    env = bare_bin(tmp_path / "bin")  # python3 (the venv's too) and the core tools, no espeak-ng
    line = _one_error_line(run_sh("--stage", "0", "--stop_stage", "0", "--data", str(tmp_path / "d"), env=env))
    assert "espeak-ng" in line and "install" in line
    assert not (tmp_path / "d" / "train").exists()


@pytest.mark.parametrize("lock_file, holder", [(".lock", "a training run"), (".run.lock", "another run.sh")])
def test_a_run_refused_for_a_dir_in_use_changes_nothing(tmp_path, lock_file, holder):
    """Issue 36 item 12: a second run.sh with other settings, refused because the first still trains in the exp
    dir, rewrote .train.stamp; a rerun with its settings then skipped training and took the first run's model."""
    import fcntl
    data = tmp_path / "data"
    for part in ("train", "dev"):
        (data / part).mkdir(parents=True)
        (data / part / "data.list").write_text(json.dumps({"key": "a", "wav": "a.wav", "txt": "一"}) + "\n")
    (data / "dict").mkdir()
    (data / "dict" / "lang_char.txt").write_text("<blank> 0\n<unk> 1\n一 2\n<sos/eos> 3\n")
    (data / "train" / "global_cmvn").write_text(json.dumps({"mean_stat": [0.0] * 40, "var_stat": [1.0] * 40,
                                                            "frame_num": 10}))
    exp = tmp_path / "exp" / "x_scaled_dot"
    exp.mkdir(parents=True)
    (exp / ".train.stamp").write_text("the first run's settings\n")
    before = {p.name: p.read_bytes() for p in exp.iterdir()}
    with open(exp / lock_file, "a") as held:  # the first run, still in its first epoch (no checkpoint yet)
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("4242\n")
        held.flush()
        proc = run_sh("--stage", "4", "--stop_stage", "4", "--data", str(data), "--dir", str(tmp_path / "exp" / "x"),
                      "--families", "scaled_dot", "--train_override", "max_epoch=3")
    line = _one_error_line(proc)
    assert f"{exp} is in use by {holder} (pid 4242)" in line, proc.stderr[-2000:]
    assert (exp / ".train.stamp").read_bytes() == before[".train.stamp"]
    assert not {p.name for p in exp.iterdir()} - set(before) - {".lock", ".run.lock"}
    assert "stage 4: train" not in proc.stderr


def test_stage5_waits_for_no_training_it_would_average(tmp_path):
    """The same claim in stages 5 and 6: no averaging of checkpoints a training is still writing."""
    import fcntl
    exp = tmp_path / "exp" / "x_scaled_dot"
    exp.mkdir(parents=True)
    (exp / "final.pt").write_bytes(b"")
    with open(exp / ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("4343\n")
        held.flush()
        proc = run_sh("--stage", "5", "--stop_stage", "5", "--dir", str(tmp_path / "exp" / "x"),
                      "--families", "scaled_dot")
    assert f"{exp} is in use by a training run (pid 4343)" in _one_error_line(proc)
    assert {p.name for p in exp.iterdir()} == {"final.pt", ".lock", ".run.lock"}


@pytest.mark.slow
@pytest.mark.xdist_group("tiny_run")
def test_enc_init_starts_each_variant_from_its_own_donor(tmp_path, tiny_run):
    """--enc_init with {attention}: each model starts from the donor of its attention type (the session's two tiny
    models), the stamp records it, and a donor missing for one variant is refused before any training."""
    common = ["--data", str(tiny_run.data), "--stage", "4", "--stop_stage", "4", "--num_workers", "0",
              "--train_override", TINY_MODEL]
    donors = f"{tiny_run.exp}_{{attention}}/final.pt"
    tuned = run_sh(*common, "--dir", str(tmp_path / "tuned"), "--enc_init", donors)
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    for attention in ("scaled_dot", "udps"):
        log = (tmp_path / f"tuned_{attention}" / "train.log").read_text()
        assert f"from {tiny_run.exp}_{attention}/final.pt" in log and "under encoder." in log
        assert "enc_init=" in (tmp_path / f"tuned_{attention}" / ".train.stamp").read_text()
    half = tmp_path / "half_scaled_dot" / "final.pt"   # a donor for one variant only
    half.parent.mkdir()
    half.symlink_to(f"{tiny_run.exp}_scaled_dot/final.pt")
    line = _one_error_line(run_sh(*common, "--dir", str(tmp_path / "other"), "--enc_init",
                                  str(tmp_path / "half_{attention}" / "final.pt")))
    assert f"--enc_init: {tmp_path}/half_udps/final.pt (for udps) is not a file" in line
    assert not (tmp_path / "other_scaled_dot").exists()
