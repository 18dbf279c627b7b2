"""bench/gpu_report.sh (issue 56's one GPU command) dry-run on the CPU at toy sizes, as a GPU machine runs it: the
five parts through their real programs, AN4 read from a FLAC copy made by tools/an4_to_flac.py, and the report
(report.md, report.json, logs.tar.gz and nothing else in OUT). A part that overruns its time box is killed and
reported as such, and the parts after it still run and are reported."""
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.recipe_trees import make_an4

ROOT = Path(__file__).resolve().parents[1]
MODES = ["ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring"]


@pytest.fixture(scope="module")
def flac_an4(tmp_path_factory):
    """A tiny AN4 (8 training speakers of 4 utterances, 3 test ones) as SPHERE, copied to FLAC by the tool."""
    root = tmp_path_factory.mktemp("an4")
    train = [(f"{g}{s:03d}", [f"an{100 + 10 * s + u}" for u in range(4)]) for s in range(4) for g in "fm"]
    make_an4(root / "sph", train=train, test=(("fcaw", ("an409", "cen3", "cen4")),))
    proc = subprocess.run([sys.executable, "tools/an4_to_flac.py", root / "sph", root / "flac"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return root / "flac"


def gpu_report(tmp_path, an4, *options):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(["bash", "bench/gpu_report.sh", "--dry_run", "true", "--an4", an4, "--work",
                           tmp_path / "work", *options, tmp_path / "out"], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((tmp_path / "out" / "report.json").read_text()), (tmp_path / "out" / "report.md").read_text()


@pytest.mark.slow
def test_dry_run_runs_every_part_and_writes_one_report(tmp_path, flac_an4):
    report, md = gpu_report(tmp_path, flac_an4)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["logs.tar.gz", "report.json", "report.md"]
    assert {k: v["status"] for k, v in report["parts"].items()} == dict.fromkeys("abcde", "ok")
    assert report["dry_run"] and report["env"]["torch"] and "DRY RUN" in md
    # a: the gpu-marked tests were collected (and skipped: no CUDA)
    assert report["a"]["tests"] > 0 and report["a"]["failures"] == report["a"]["errors"] == 0
    # b: both attentions trained (2 epochs each) from the FLAC copy and decoded test in every mode
    wav_scp = (tmp_path / "work" / "an4" / "data" / "test" / "wav.scp").read_text().split()
    assert wav_scp[1].endswith(".flac")
    b = report["b"]
    assert set(b["models"]) == {"scaled_dot", "udps"}
    for model in b["models"].values():
        assert model["epochs"] == 2 and model["median_epoch_s"] > 0
        assert all(model["test_wer"][m] is not None for m in MODES)
    assert b["espnet_test_wer"] == 7.6 and b["train_audio_s"] > 0
    assert {"data", "4", "5"} <= set(b["stages_s"])
    # c, d: the benchmarks' tables, parsed
    assert {r["implementation"] for r in report["c"]["rows"]} >= {"sdpa flash (no mask)", "udps triton"}
    whats = [r["what"] for r in report["d"]["rows"]]
    assert whats[:2] == ["train step (median)", "train step (fastest)"]
    # then one profiled step of each attention: wall and busy time, ops run, the ops that differ most
    assert whats[2:5] == ["profile: step wall ms", "profile: busy ms, CPU ops", "profile: CPU ops run"]
    assert len(whats) == 11 and all(w.startswith("profile: ") and w.endswith(" ms") for w in whats[5:])
    # e: per-worker throughput of the FLAC recordings, and what (b) and (d) consume beside it
    assert report["e"]["rows"][0]["input"].endswith(".flac") and report["e"]["rows"][0]["audio_s_per_s_per_worker"] > 0
    assert len(report["consumes"]) == 4
    with tarfile.open(tmp_path / "out" / "logs.tar.gz") as tar:
        names = tar.getnames()
    assert {"logs/a.log", "logs/b.log", "logs/e.log", "env.json"} <= set(names)


def test_a_part_over_its_box_is_killed_and_the_next_part_still_runs(tmp_path, flac_an4):
    report, md = gpu_report(tmp_path, flac_an4, "--parts", "c e", "--boxes", "c:1")
    assert report["parts"]["c"]["status"] == "timed out" and report["parts"]["c"]["seconds"] < 15
    assert report["parts"]["e"]["status"] == "ok" and report["e"]["rows"]
    assert "| a | native kernel tests (pytest -m gpu) | not run | - |" in md
    assert "| c | attention vs flash SDPA (bench/attention_gpu.py) | timed out |" in md


def test_a_benchmark_cut_short_still_reports_the_rows_it_printed(tmp_path):
    """attention_gpu.py and train_step.py print their header first and each row as measured: when the box kills
    one before it writes its --out table, the report takes the rows from its log."""
    work, out = tmp_path / "work", tmp_path / "out"
    (work / "logs").mkdir(parents=True)
    (work / "parts.tsv").write_text("c\t124\t45.2\t45\n")
    (work / "logs" / "c.log").write_text(
        "Device: H100; torch 2.11\n\n| dtype | T | implementation | fwd ms | fwd ratio |\n|---|---|---|---|---|\n"
        "| bfloat16 | 256 | sdpa flash (no mask) | 0.010 | 1.00 |\n| bfloat16 | 256 | udps triton | 0.030 | 3.00 |\n"
        "Traceback (most recent call last):\n")
    proc = subprocess.run([sys.executable, "-m", "bench.gpu_report", "write", "--work", work, "--out", out], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["parts"]["c"] == {"status": "timed out", "exit": 124, "seconds": 45.2, "box": 45}
    assert [r["implementation"] for r in report["c"]["rows"]] == ["sdpa flash (no mask)", "udps triton"]
    md = (out / "report.md").read_text()
    assert "(cut short: the rows measured)" in md and "| bfloat16 | 256 | udps triton | 0.030 | 3.00 |" in md
    assert "| b | AN4 on the GPU, both attentions (run.sh stages -1..5) | not run | - |" in md


def test_part_f_runs_only_when_named_and_reports_the_checked_configurations(tmp_path, flac_an4):
    report, md = gpu_report(tmp_path, flac_an4, "--parts", "f")
    assert report["parts"]["f"]["status"] == "ok"
    rows = report["f"]["rows"]
    assert rows[0]["config"] == "flash SDPA" and {"default", "dkv 32x64 w4"} <= {r["config"] for r in rows}
    assert all("WRONG" not in r["largest error"] for r in rows)
    assert "## f. The kernel's block configurations, checked then timed" in md
    assert "Fastest right configuration: T=16: " in md
    report, md = gpu_report(tmp_path, flac_an4, "--parts", "e")
    assert "f" not in report["parts"] and "## f." not in md
