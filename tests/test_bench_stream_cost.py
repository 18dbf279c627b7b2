"""bench/stream_cost.py runs a short stream of a conf's random model, as docs/benchmarks.md runs a 10-minute one:
a row per left-context setting and mark, each run's real-time factor, and one-line errors for bad marks."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_bench(*args):
    return subprocess.run([sys.executable, "-m", "bench.stream_cost", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_stream_cost_gives_the_cost_per_chunk_at_each_mark(tmp_path, fsdd_dir):
    wav = sorted(Path(fsdd_dir).glob("*.wav"))[0]  # a real recording, repeated (FSDD is 8 kHz: resampled to 16)
    out = tmp_path / "table.md"
    proc = run_bench("--conf", "conf/tiny_zh/train_u2pp_conformer.yaml", "--override", "encoder_conf.num_blocks=1",
                     "--units", "20", "--seconds", "3", "--marks", "1", "3", "--left_chunks", "2", "-1",
                     "--repeats", "2", "--wav", str(wav), "--input_rate", "8000", "--mode", "attention_rescoring",
                     "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = re.findall(r"^\| (-?\d+) \| (\d+) \| ([\d.]+) \| ([\d.]+)-([\d.]+) \| ([\d.]+) \|$", proc.stdout, re.M)
    assert [(r[0], r[1]) for r in rows] == [("2", "1"), ("2", "3"), ("-1", "1"), ("-1", "3")], proc.stdout
    for _, mark, ms, low, high, ratio in rows:
        assert float(low) <= float(ms) <= float(high) and float(ms) > 0
        assert float(ratio) == 1.0 if mark == "1" else float(ratio) > 0
    assert out.read_text().strip() in proc.stdout
    runs = re.findall(r"left_chunks (-?\d+), run (\d): 3 s of audio, RTF ([\d.]+) \(cpu\) ([\d.]+) \(wall\), finish "
                      r"[\d.]+ s, (\d+) chunks", proc.stdout)
    assert len(runs) == 4 and all(r[4] == runs[0][4] and int(r[4]) > 10 for r in runs), proc.stdout


def test_stream_cost_refuses_marks_outside_the_stream():
    proc = run_bench("--seconds", "2", "--marks", "1", "5")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("stream_cost.py: error: --marks must lie in (0, --seconds 2]"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
