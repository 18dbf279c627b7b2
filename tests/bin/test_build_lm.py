"""build_lm refuses a held-out sentence in one line."""
import os
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]


def run_lm(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "wenet_udps.bin.build_lm", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_build_refuses_a_dev_sentence_in_one_line(tmp_path):
    (tmp_path / "train").write_text("a1 the cat sat\na2 a dog ran\n")
    (tmp_path / "dev").write_text("d1 A DOG RAN\n")
    proc = run_lm("--text", str(tmp_path / "train"), "--held_out", str(tmp_path / "dev"),
                  "--out", str(tmp_path / "lm.arpa"))
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert f"{tmp_path / 'train'}:2" in lines[0] and f"{tmp_path / 'dev'}:1" in lines[0]
    assert not (tmp_path / "lm.arpa").exists()
