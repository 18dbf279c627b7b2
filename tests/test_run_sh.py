"""run.sh end to end on a few synthesised utterances (every stage but the download), and its input checks."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.bare_path import bare_bin

ROOT = Path(__file__).resolve().parents[1]
TINY_MODEL = ("max_epoch=1 encoder_conf.num_blocks=1 decoder_conf.num_blocks=1 encoder_conf.linear_units=64 "
              "decoder_conf.linear_units=64 encoder_conf.output_size=32 dataset_conf.batch_conf.batch_size=4")
MODES = ["ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring"]


def run_sh(*args, env=None, timeout=900):
    return subprocess.run(["bash", str(ROOT / "run.sh"), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.slow
def test_all_stages_on_a_tiny_corpus(tmp_path):
    if shutil.which("espeak-ng") is None:
        pytest.fail("espeak-ng is required (bash tools/install.sh installs it)")
    data, exp = tmp_path / "data", tmp_path / "exp" / "tiny"
    proc = run_sh("--stage", "0", "--stop_stage", "7", "--data", str(data), "--dir", str(exp),
                  "--prepare_opts", "--num_train 12 --num_dev 4 --num_test 4",
                  "--train_override", TINY_MODEL, "--average_num", "1", "--beam_size", "2",
                  "--num_workers", "1", "--decode_batch_size", "4")
    assert proc.returncode == 0, proc.stderr[-4000:]
    for stage in range(0, 8):
        assert re.search(rf"\) stage {stage}: ", proc.stderr), f"stage {stage} did not log"
    for variant, udps in (("scaled_dot", "false"), ("udps", "true")):
        d = Path(f"{exp}_{variant}")
        assert re.search(rf"^att_udps: {udps}$", (d / "train.yaml").read_text(), re.M)
        assert (d / "final.pt").is_file() and (d / "avg_1.pt").is_file()
        for mode in MODES:
            hyp = (d / "test" / mode / "text").read_text().splitlines()
            assert len(hyp) == 4
            # WeNet's layout: the Overall line, the per-cluster lines, a blank line and a rule of "=".
            wer_lines = (d / "test" / mode / "wer").read_text(encoding="utf-8").splitlines()
            assert sum(line.startswith("Overall -> ") for line in wer_lines) == 1 and wer_lines[-1] == "=" * 75
        assert list((d / "export").glob("*.onnx")), "stage 6 exported nothing"
    results = (tmp_path / "exp" / "RESULTS.md").read_text()
    assert "udps" in results.lower() and "attention_rescoring" in results
    assert list((tmp_path / "exp" / "plots").glob("*.png"))
    # Rerunning skips what is done: no training, no decoding list rebuilt.
    again = run_sh("--stage", "1", "--stop_stage", "4", "--data", str(data), "--dir", str(exp),
                   "--train_override", TINY_MODEL)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "exists, skipping" in again.stderr and "stage 4: train" not in again.stderr


def _one_error_line(proc):
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines, "no message"
    return lines[-1]


def test_unknown_corpus_lists_valid_ones():
    line = _one_error_line(run_sh("--corpus", "timit"))
    assert "unknown corpus 'timit'" in line and "aishell" in line and "tiny_zh" in line


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
