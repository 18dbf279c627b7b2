"""tools/compute-wer.py: hand-counted alignments, the WeNet rules that matter, and our own policies."""
import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "compute-wer.py"
OVERALL = re.compile(r"^Overall -> ([0-9.]+) % N=(\d+) C=(\d+) S=(\d+) D=(\d+) I=(\d+)$", re.M)
CLUSTER = re.compile(r"^(\w+) -> ([0-9.]+) % N=(\d+) C=(\d+) S=(\d+) D=(\d+) I=(\d+)$", re.M)


def run(tmp_path, ref_lines, hyp_lines, *opts, expect_rc=0, bom=False):
    ref = tmp_path / "ref"
    hyp = tmp_path / "hyp"
    ref.write_text(("\ufeff" if bom else "") + "".join(line + "\n" for line in ref_lines), encoding="utf-8")
    hyp.write_text("".join(line + "\n" for line in hyp_lines), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(SCRIPT), *opts, str(ref), str(hyp)],
                          capture_output=True, text=True, encoding="utf-8")
    assert proc.returncode == expect_rc, proc.stderr
    return proc


def counts(groups):
    return dict(zip("NCSDI", map(int, groups)))


def overall(proc):
    found = OVERALL.findall(proc.stdout)
    assert len(found) == 1, proc.stdout
    return float(found[0][0]), counts(found[0][1:])


def clusters(proc):
    return {m[0]: counts(m[2:]) for m in CLUSTER.findall(proc.stdout) if m[0] != "Overall"}


def blocks(proc):
    """utt key -> (WER line, lab line, rec line)."""
    lines = proc.stdout.splitlines()
    return {line[5:]: tuple(lines[k + 1:k + 4]) for k, line in enumerate(lines) if line.startswith("utt: ")}


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
    assert clusters(proc) == {"English": c}


def test_aligned_lines_line_up(tmp_path):
    proc = run(tmp_path, ["u1 a bb c", "u2 a c"], ["u1 a c", "u2 a dddd c"])
    b = blocks(proc)
    # Each column is padded to the wider token, and every token is followed by one space (WeNet's layout).
    assert b["u1"][1:] == ("lab: A BB C ", "rec: A    C ")
    assert b["u2"][1:] == ("lab: A      C ", "rec: A DDDD C ")


def test_alignment_tie_order_prefers_deletion(tmp_path):
    # "A B" vs "B C": two deletions-and-insertions or one match; with equal cost WeNet's table prefers a deletion,
    # then an insertion, over the diagonal.
    b = blocks(run(tmp_path, ["u1 a b"], ["u1 b c"]))
    assert b["u1"] == ("WER: 100.00 % N=2 C=1 S=0 D=1 I=1", "lab: A B   ", "rec:   B C ")


def test_char_mode_splits_cjk_and_ignores_spaces(tmp_path):
    proc = run(tmp_path, ["u1 甚至 出现 交易"], ["u1 甚 至出线交易 了"], "--char=1")
    _, c = overall(proc)
    assert c == dict(N=6, C=5, S=1, D=0, I=1)
    _, lab, rec = blocks(proc)["u1"]
    assert lab.split()[1:] == list("甚至出现交易")
    assert rec.split()[1:] == list("甚至出线交易了")
    assert clusters(proc) == {"Mandarin": c}


def test_char_mode_keeps_english_words_and_ascii_punctuation_whole(tmp_path):
    # WeNet's character mode splits CJK only, drops the listed punctuation (，。！...) and <tags>, and keeps an
    # ASCII run whole: "wenet," stays one token, "it's", "e-mail" and "3.5" too.
    proc = run(tmp_path, ["u1 我们用 wenet, 训练 <unk>model 2。", "u2 it's an e-mail at 3.5"],
               ["u1 我们用 wenet 训 <unk> modem 2", "u2 its an e mail at 3.5"], "--char=1")
    b = blocks(proc)
    assert b["u1"][0] == "WER: 37.50 % N=8 C=5 S=2 D=1 I=0"
    assert b["u1"][1].split()[1:] == ["我", "们", "用", "WENET,", "训", "练", "MODEL", "2"]
    assert b["u2"][1].split()[1:] == ["IT'S", "AN", "E-MAIL", "AT", "3.5"]
    assert clusters(proc)["Number"] == dict(N=2, C=2, S=0, D=0, I=0)  # "2" and "3.5"


def test_tags_are_removed_in_both_modes(tmp_path):
    for char in ("0", "1"):
        _, c = overall(run(tmp_path, ["u1 <noise> hello <unk>world"], ["u1 hello <sil> world"], f"--char={char}"))
        assert c == dict(N=2, C=2, S=0, D=0, I=0)
    # --rt=0 keeps them (as WeNet's --rt=0).
    _, c = overall(run(tmp_path, ["u1 <noise> hello"], ["u1 hello"], "--rt=0"))
    assert c == dict(N=2, C=1, S=0, D=1, I=0)


def test_word_mode_keeps_words_whole(tmp_path):
    _, c = overall(run(tmp_path, ["u1 甚至 出现"], ["u1 甚至 出线"]))
    assert c == dict(N=2, C=1, S=1, D=0, I=0)


def test_case_insensitive_by_default(tmp_path):
    _, c = overall(run(tmp_path, ["u1 Hello World"], ["u1 hello WORLD"]))
    assert c["C"] == 2 and c["S"] == 0
    _, c = overall(run(tmp_path, ["u1 Hello World"], ["u1 hello WORLD"], "--cs=1"))
    assert c["S"] == 2


def test_ignore_words(tmp_path):
    ignore = tmp_path / "ignore.txt"
    ignore.write_text("uh\n<noise>\n", encoding="utf-8")
    _, c = overall(run(tmp_path, ["u1 i UH like it"], ["u1 i like <noise> it uh"], f"--ig={ignore}"))
    assert c == dict(N=3, C=3, S=0, D=0, I=0)
    ignore.write_text("uh\nyou know\n", encoding="utf-8")
    proc = run(tmp_path, ["u1 a"], ["u1 a"], f"--ig={ignore}", expect_rc=1)
    assert "ignore.txt:2: one word per line" in proc.stderr


def test_missing_hypothesis_counts_as_deletions_by_default(tmp_path):
    proc = run(tmp_path, ["u1 a b", "u2 c d e", "u3 f"], ["u1 a b", "u9 z"])
    wer, c = overall(proc)
    assert c == dict(N=6, C=2, S=0, D=4, I=0)
    assert wer == pytest.approx(100 * 4 / 6, abs=0.005)
    assert "Missing hypotheses: 2 of 3 reference utterances (scored as all deletions" in proc.stdout
    assert "Hypotheses without reference: 1" in proc.stdout
    assert "Missing hypotheses: 2" in proc.stderr
    assert set(blocks(proc)) == {"u1", "u2", "u3"}


def test_missing_hypothesis_skipped_with_flag(tmp_path):
    proc = run(tmp_path, ["u1 a b", "u2 c d e", "u3 f"], ["u1 a x", "u9 z"], "--missing=skip")
    wer, c = overall(proc)
    assert c == dict(N=2, C=1, S=1, D=0, I=0)
    assert "Missing hypotheses: 2 of 3 reference utterances (skipped, as WeNet does)" in proc.stdout
    assert set(blocks(proc)) == {"u1"}


def test_byte_order_mark_is_dropped(tmp_path):
    proc = run(tmp_path, ["u1 a b", "u2 c"], ["u1 a b", "u2 c"], bom=True)
    assert overall(proc)[1] == dict(N=3, C=3, S=0, D=0, I=0)
    assert set(blocks(proc)) == {"u1", "u2"} and "Missing" not in proc.stdout


def test_quiet_mode_prints_only_summary(tmp_path):
    proc = run(tmp_path, ["u1 a b"], ["u1 a c"], "--v=0")
    assert proc.stdout.split("\n", 3)[3] == "Overall -> 50.00 % N=2 C=1 S=1 D=0 I=0\n\n"


def test_the_report_records_what_it_scored(tmp_path):
    """Issue 66, C: the first two lines bind the report to the files it scored, by absolute path and SHA-256."""
    proc = run(tmp_path, ["u1 a b"], ["u1 a c"], "--v=0")
    digest = {name: hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() for name in ("hyp", "ref")}
    assert proc.stdout.splitlines()[:2] == [f"Scored hypotheses: {tmp_path / 'hyp'} (SHA-256 {digest['hyp']})",
                                            f"Scored references: {tmp_path / 'ref'} (SHA-256 {digest['ref']})"]
    # Issue 80, G: and the options that decide what a reference token is (scoring.bound.check_counts)
    assert proc.stdout.splitlines()[2] == ("Scored with: char=0 case_sensitive=0 remove_tag=1 missing=deletions "
                                           "case=keep punctuation=keep ignore_words=none")


def test_empty_reference_and_hypothesis(tmp_path):
    proc = run(tmp_path, ["u1", "u2 a", "u3"], ["u1 x y", "u2", "u3"])
    _, c = overall(proc)
    assert c == dict(N=1, C=0, S=0, D=1, I=2)
    b = blocks(proc)
    # No reference tokens: WeNet reports 0.00 % whatever the insertions; two empty sides print no lab/rec lines.
    assert b["u1"][0] == "WER: 0.00 % N=0 C=0 S=0 D=0 I=2"
    assert "utt: u3\nWER: 0.00 % N=0 C=0 S=0 D=0 I=0\n=" in proc.stdout


def test_all_empty_references_are_an_error_not_zero_percent(tmp_path):
    """Issue 29: all-empty references printed "0.00 % N=0 ... I=16"."""
    proc = run(tmp_path, ["u1", "u2"], ["u1 x y", "u2 z"], expect_rc=1)
    assert "every reference is empty" in proc.stderr and "3 inserted tokens" in proc.stderr
    assert not OVERALL.findall(proc.stdout)


def test_duplicate_key_is_an_error(tmp_path):
    proc = run(tmp_path, ["u1 a", "u1 b"], ["u1 a"], expect_rc=1)
    assert "ref:2: duplicate utterance key 'u1'" in proc.stderr


def test_invalid_utf8_names_the_line(tmp_path):
    ref = tmp_path / "ref"
    ref.write_bytes(b"u1 a\nu2 \xff\xfe\n")
    (tmp_path / "hyp").write_text("u1 a\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, str(SCRIPT), str(ref), str(tmp_path / "hyp")], capture_output=True,
                          text=True)
    assert proc.returncode == 1 and "ref:2: not UTF-8" in proc.stderr


def test_refs_and_hyps_are_read_by_the_one_reader(tmp_path):
    """Issue 47 case 17: with a BOM in both files the BOM travelled in a key (the first line of the ref, a later line
    of the hyp); the ref's was stripped, the hyp's was not, and the score was 120.59 %. Both files are read by the
    one reader (wenet_udps.utils.kaldi_files): a BOM at either file's start is dropped, and one inside a later key
    is an error naming the file and line rather than an utterance scored as all deletions."""
    proc = run(tmp_path, ["u1 a b", "u2 c"], ["u2 c", "u1 a b"], bom=True)
    assert overall(proc)[0] == 0.0
    (tmp_path / "hyp").write_bytes("\ufeffu2 c\nu1 a b\n".encode("utf-8"))
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "ref"), str(tmp_path / "hyp")],
                          capture_output=True, text=True, encoding="utf-8")
    assert proc.returncode == 0 and overall(proc)[0] == 0.0
    (tmp_path / "hyp").write_bytes("u2 c\n\ufeffu1 a b\n".encode("utf-8"))
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "ref"), str(tmp_path / "hyp")],
                          capture_output=True, text=True, encoding="utf-8")
    assert proc.returncode == 1 and "hyp:2: utterance key '\\ufeffu1' holds a byte-order mark" in proc.stderr
