"""bench/hotword_list.py: the real-word hotword list of the speed and no-harm measurements: distinct words of the
given text, none in an excluded file, the same list for the same seed, a clear error when the text has too few."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args):
    return subprocess.run([sys.executable, "-m", "bench.hotword_list", *args], cwd=ROOT, capture_output=True,
                          text=True)


def test_words_of_the_text_none_excluded_fixed_by_the_seed(tmp_path):
    text = tmp_path / "a.trans.txt"
    text.write_text("1-1-0 APPLE BANANA CHERRY\n1-1-1 DATE ELDER FIG APPLE\n1-1-2 GRAPE O'NEIL 42\n")
    exclude = tmp_path / "text"
    exclude.write_text("u1 BANANA FIG\n")
    outs = []
    for seed in ("1", "1", "2"):
        out = tmp_path / f"hot{len(outs)}.txt"
        proc = run("--text", str(text), "--exclude", str(exclude), "--count", "3", "--seed", seed, "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        outs.append(out.read_text().split())
    assert outs[0] == outs[1] and outs[0] == sorted(outs[0]) and len(set(outs[0])) == 3
    assert set(outs[0]) <= {"APPLE", "CHERRY", "DATE", "ELDER", "GRAPE"}     # no BANANA, FIG, O'NEIL, 42
    few = run("--text", str(text), "--exclude", str(exclude), "--count", "6", "--out", str(tmp_path / "x.txt"))
    assert few.returncode == 2 and "only 5 words" in few.stderr and not (tmp_path / "x.txt").exists()
