"""bench/prefix_search_cost.py times the prefix search (and with --rescore_conf the rescoring after it) at each
length, as docs/benchmarks.md runs it at 20-320 s, and refuses bad lengths in one line."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_bench(*args):
    return subprocess.run([sys.executable, "-m", "bench.prefix_search_cost", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_a_row_per_length_with_the_search_and_the_rescoring(tmp_path):
    out = tmp_path / "table.md"
    proc = run_bench("--seconds", "2", "4", "--repeats", "2", "--units", "20", "--beam_size", "4", "--hotwords", "3",
                     "--rescore_conf", "conf/tiny_zh/train_u2pp_conformer.yaml", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = re.findall(r"^\| (\d+) \| (\d+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$",
                      proc.stdout, re.M)
    assert [(r[0], r[1]) for r in rows] == [("2", "50"), ("4", "100")], proc.stdout
    for seconds, frames, tokens, spent, rate, ratio, rescored, share in rows:
        assert 0 < int(tokens) <= int(frames) and float(spent) > 0 and 0 < float(share) < 1
        assert abs(float(rate) * int(seconds) - float(spent)) < 1e-3 + 1e-4 * int(seconds)
    assert float(rows[0][5]) == 1.0
    assert out.read_text().strip() in proc.stdout


def test_bad_lengths_are_refused_in_one_line():
    proc = run_bench("--seconds", "0", "5")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("prefix_search_cost.py: error: --seconds must be > 0"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
