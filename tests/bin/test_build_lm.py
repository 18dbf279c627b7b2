"""build_lm refuses a held-out sentence in one line; check warns when the dev text's
words are mostly unknown to the LM (an LM built for another corpus)."""
import os
import subprocess
import sys
from pathlib import Path

from tests.lm.lm_helpers import need_lmplz
from wenet_udps.bin import build_lm, check_lm

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


def test_build_then_check_warns_on_another_corpus(tmp_path, capsys):
    need_lmplz()
    (tmp_path / "train").write_text("a1 the cat sat\na2 a dog ran\na3 the dog sat\n")
    (tmp_path / "dev_same").write_text("d1 the cat ran\n")
    (tmp_path / "dev_other").write_text("d1 completely different words here\n")
    assert build_lm.main(["--text", str(tmp_path / "train"), "--order", "2",
                        "--out", str(tmp_path / "lm.arpa")]) == 0
    assert "2-gram" in capsys.readouterr().out
    assert check_lm.main(["--lm", str(tmp_path / "lm.arpa"), "--text", str(tmp_path / "dev_same")]) == 0.0
    same = capsys.readouterr()
    assert "0.0 % of 3 words" in same.out and "another corpus" not in same.err
    assert check_lm.main(["--lm", str(tmp_path / "lm.arpa"), "--text", str(tmp_path / "dev_other")]) == 1.0
    other = capsys.readouterr()
    assert "100.0 % of 4 words" in other.out and "another corpus" in other.err
