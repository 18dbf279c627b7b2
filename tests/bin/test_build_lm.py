"""build_lm refuses a held-out sentence in extra LM text in one line; the transcripts may hold one (counted)."""
import os
import subprocess
import sys
from pathlib import Path

from tests.lm.lm_helpers import need_lmplz


ROOT = Path(__file__).resolve().parents[2]


def run_lm(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "wenet_udps.bin.build_lm", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_build_refuses_a_dev_sentence_in_lm_text_in_one_line(tmp_path):
    (tmp_path / "train").write_text("a1 the cat sat\n")
    (tmp_path / "books").write_text("the cat sat\na dog ran\n")
    (tmp_path / "dev").write_text("d1 A DOG RAN\n")
    proc = run_lm("--text", str(tmp_path / "train"), "--lm_text", str(tmp_path / "books"),
                  "--held_out", str(tmp_path / "dev"), "--out", str(tmp_path / "lm.arpa"))
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert f"{tmp_path / 'books'}:2" in lines[0] and f"{tmp_path / 'dev'}:1" in lines[0]
    assert not (tmp_path / "lm.arpa").exists()


def test_transcripts_holding_a_dev_sentence_build_and_say_how_many(tmp_path):
    # A corpus whose speakers read the same prompts (AN4) has dev sentences among its training transcripts.
    need_lmplz()
    (tmp_path / "train").write_text("a1 the cat sat\na2 a dog ran\na3 yes\na4 a dog ran\n")
    (tmp_path / "dev").write_text("d1 A DOG RAN\nd2 NO\n")
    proc = run_lm("--text", str(tmp_path / "train"), "--held_out", str(tmp_path / "dev"),
                  "--out", str(tmp_path / "lm.arpa"))
    assert proc.returncode == 0, proc.stderr
    assert "note: 2 transcript line(s) are also dev/test sentences" in proc.stdout
    assert f"{tmp_path / 'train'}:2 = {tmp_path / 'dev'}:1" in proc.stdout
    assert "\\1-grams:" in (tmp_path / "lm.arpa").read_text()
