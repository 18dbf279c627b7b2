"""tools/compute-wer.py against hand-counted alignments."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "compute-wer.py"
OVERALL = re.compile(r"^Overall -> ([0-9.]+) % N=(\d+) C=(\d+) S=(\d+) D=(\d+) I=(\d+)$")


def run(tmp_path, ref_lines, hyp_lines, *opts, expect_rc=0):
    ref = tmp_path / "ref"
    hyp = tmp_path / "hyp"
    ref.write_text("".join(line + "\n" for line in ref_lines), encoding="utf-8")
    hyp.write_text("".join(line + "\n" for line in hyp_lines), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(SCRIPT), *opts, str(ref), str(hyp)],
                          capture_output=True, text=True)
    assert proc.returncode == expect_rc, proc.stderr
    return proc


def overall(proc):
    last = proc.stdout.rstrip("\n").splitlines()[-1]
    m = OVERALL.match(last)
    assert m, f"last line is not the Overall line: {last!r}"
    wer, n, c, s, d, i = m.groups()
    return float(wer), dict(N=int(n), C=int(c), S=int(s), D=int(d), I=int(i))


def blocks(proc):
    """utt key -> (WER line, lab line, rec line)."""
    lines = proc.stdout.splitlines()
    out = {}
    for k, line in enumerate(lines):
        if line.startswith("utt: "):
            out[line[5:]] = (lines[k + 1], lines[k + 2], lines[k + 3])
    return out


def test_substitution_deletion_insertion_counts(tmp_path):
    proc = run(tmp_path,
               ["u1 the cat sat on the mat", "u2 a b c d", "u3 hello world"],
               ["u1 the cat sit on the mat", "u2 a c d", "u3 hello big world"])
    wer, c = overall(proc)
    assert c == dict(N=12, C=10, S=1, D=1, I=1)
    assert wer == pytest.approx(100 * 3 / 12, abs=0.005)
    b = blocks(proc)
    assert b["u1"][0] == "WER: 16.67 % N=6 C=5 S=1 D=0 I=0"
    assert b["u2"][0] == "WER: 25.00 % N=4 C=3 S=0 D=1 I=0"
    assert b["u3"][0] == "WER: 50.00 % N=2 C=2 S=0 D=0 I=1"


def test_aligned_lines_line_up(tmp_path):
    proc = run(tmp_path, ["u1 a bb c", "u2 a c"], ["u1 a c", "u2 a dddd c"])
    b = blocks(proc)
    # Each column is padded to the wider token; a deleted/inserted token faces blanks.
    assert b["u1"][1:] == ("lab: A BB C", "rec: A    C")
    assert b["u2"][1:] == ("lab: A      C", "rec: A DDDD C")


def test_char_mode_splits_cjk_and_ignores_spaces(tmp_path):
    proc = run(tmp_path, ["u1 甚至 出现 交易"], ["u1 甚 至出线交易 了"], "--char=1")
    _, c = overall(proc)
    assert c == dict(N=6, C=5, S=1, D=0, I=1)
    _, lab, rec = blocks(proc)["u1"]
    assert lab.split()[1:] == list("甚至出现交易")
    assert rec.split()[1:] == list("甚至出线交易了")


def test_char_mode_keeps_english_words_whole_like_wenet(tmp_path):
    # WeNet's character mode splits CJK only: a mixed Mandarin/English line keeps its English words whole.
    proc = run(tmp_path, ["u1 我们用 wenet, 训练 <unk>model 2"], ["u1 我们用 wenet 训 <unk> modem 2"], "--char=1")
    _, c = overall(proc)
    # ref: 我 们 用 WENET 训 练 <UNK> MODEL 2 (comma dropped); hyp: 我 们 用 WENET 训 <UNK> MODEM 2
    assert c == dict(N=9, C=7, S=1, D=1, I=0)


def test_word_mode_keeps_words_whole(tmp_path):
    _, c = overall(run(tmp_path, ["u1 甚至 出现"], ["u1 甚至 出线"]))
    assert c == dict(N=2, C=1, S=1, D=0, I=0)


def test_case_insensitive_by_default(tmp_path):
    _, c = overall(run(tmp_path, ["u1 Hello World"], ["u1 hello WORLD"]))
    assert c["C"] == 2 and c["S"] == 0
    _, c = overall(run(tmp_path, ["u1 Hello World"], ["u1 hello WORLD"], "--case_sensitive=1"))
    assert c["S"] == 2


def test_ignore_words(tmp_path):
    ignore = tmp_path / "ignore.txt"
    ignore.write_text("uh\n<noise>\n", encoding="utf-8")
    _, c = overall(run(tmp_path, ["u1 i UH like it"], ["u1 i like <noise> it uh"], f"--ignore_words={ignore}"))
    assert c == dict(N=3, C=3, S=0, D=0, I=0)


def test_missing_hypothesis_counts_as_deletions(tmp_path):
    proc = run(tmp_path, ["u1 a b", "u2 c d e", "u3 f"], ["u1 a b", "u9 z"])
    wer, c = overall(proc)
    assert c == dict(N=6, C=2, S=0, D=4, I=0)
    assert wer == pytest.approx(100 * 4 / 6, abs=0.005)
    assert "Missing hypotheses: 2 of 3" in proc.stdout
    assert "Hypotheses without reference: 1" in proc.stdout
    assert "Missing hypotheses: 2" in proc.stderr


def test_quiet_mode_prints_only_summary(tmp_path):
    proc = run(tmp_path, ["u1 a b"], ["u1 a c"], "--v=0")
    assert "utt:" not in proc.stdout
    assert overall(proc)[1]["S"] == 1


def test_empty_reference_and_hypothesis(tmp_path):
    _, c = overall(run(tmp_path, ["u1", "u2 a"], ["u1 x y", "u2"]))
    assert c == dict(N=1, C=0, S=0, D=1, I=2)


def test_duplicate_key_is_an_error(tmp_path):
    proc = run(tmp_path, ["u1 a", "u1 b"], ["u1 a"], expect_rc=1)
    assert "ref:2: duplicate utterance key 'u1'" in proc.stderr
