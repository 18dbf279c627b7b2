"""The one text normaliser (wenet_udps/utils/text_norm.py) and the tools that apply it: units, BPE, scoring
(issue 57, S1-S2). The run.sh stages and the LM are tested in tests/test_run_sh_text_norm.py and tests/bin."""
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tools.load import load_tool
from wenet_udps.text.base_tokenizer import read_symbol_table
from wenet_udps.utils.text_norm import NormCounts, TextNorm, TextNormError, match_form

ROOT = Path(__file__).resolve().parents[2]
SPELLINGS = "u1 zero\nu2 Zero,\nu3 \"zero\".\nu4 ZERO\n"   # S2: four spellings of one word


def tool(name, *args):
    return subprocess.run([sys.executable, str(ROOT / "tools" / name), *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_keep_keep_and_the_recipes_declarations_leave_their_transcripts_as_they_are():
    rng = random.Random(0)
    alphabet = "abcXYZ 你好 ,.'\"-<>{}[]\t"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert TextNorm("keep", "keep")(text) == text
    # AN4, LibriSpeech (apostrophes at a word's edge too), FSDD, tiny_en under upper/refuse; Mandarin under keep/refuse
    for text in ("P I T T S B U R G H", "ENTER ONE FIVE", "I DON'T KNOW HONESTY' 'EM", "ZERO ONE TWO"):
        counts = NormCounts()
        assert TextNorm("upper", "refuse")(text, counts) == text and not counts.refused
    assert TextNorm("keep", "refuse")("我们今天一起看书") == "我们今天一起看书"


@pytest.mark.parametrize("text,expected", [
    ("Zero,", "ZERO"), ("\"zero\".", "ZERO"), ("well-known fellow", "WELL KNOWN FELLOW"),
    ("it's the boys' toys", "IT'S THE BOYS' TOYS"), ("a , b", "A B"), ("...", ""),
    ("<unk> hello, [noise] {NOISE}", "<unk> HELLO [noise] {NOISE}"),   # non-language symbols as they are
    ("你好，世界。", "你好世界"),                                        # no space put into CJK text
])
def test_upper_remove(text, expected):
    assert TextNorm("upper", "remove")(text) == expected


def test_counts_and_refusal_name_the_lines():
    rows, counts = TextNorm("lower", "remove").lines([(1, "Zero,"), (2, "one"), (3, "..."), (4, "TWO")], "f")
    assert [t for _, t in rows] == ["zero", "one", "", "two"]
    assert (counts.lines, counts.case_changed, counts.marks_removed, counts.lines_with_marks, counts.emptied) == \
        (4, 2, 4, 2, 1)
    with pytest.raises(TextNormError) as e:
        TextNorm().lines([(1, "fine"), (2, "Zero,"), (7, "\"zero\".")], "data/train/text")
    assert "data/train/text:2 ','" in str(e.value) and "data/train/text:7 '\"'" in str(e.value)
    assert "--text_punctuation remove|keep" in str(e.value)


def test_match_form_is_lower_case_without_punctuation():
    assert match_form("  The CAT, ran. ") == match_form("the cat ran") == "the cat ran"


def test_s2_spellings_of_a_word_are_one_unit_when_declared(tmp_path):
    (tmp_path / "text").write_text(SPELLINGS)
    proc = tool("make_char_units.py", "--case", "upper", "--punctuation", "remove", tmp_path / "text",
                tmp_path / "units.txt")
    assert proc.returncode == 0, proc.stderr
    assert set(read_symbol_table(str(tmp_path / "units.txt"))) == {"<blank>", "<unk>", "ZERO", "<sos/eos>"}
    assert "4 lines: case changed on 3, 4 punctuation marks removed from 2" in proc.stderr


def test_s2_undeclared_punctuation_is_refused_naming_the_lines(tmp_path):
    (tmp_path / "text").write_text(SPELLINGS)
    proc = tool("make_char_units.py", tmp_path / "text", tmp_path / "units.txt")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert f"{tmp_path / 'text'}:2 ','" in lines[0] and f"{tmp_path / 'text'}:3 '\"'" in lines[0]
    assert not (tmp_path / "units.txt").exists()


def test_s1_bpe_units_hold_no_punctuation(tmp_path):
    words = "zero one two three four five six seven eight nine".split()
    rng = random.Random(1)
    lines = [" ".join(rng.choice(words) + rng.choice(["", "", ",", "."]) for _ in range(6)) for _ in range(200)]
    (tmp_path / "text").write_text("".join(f"u{i} {s.capitalize()}\n" for i, s in enumerate(lines)))
    args = ["--text", tmp_path / "text", "--nbpe", "20", "--model_prefix", tmp_path / "bpe", "--units",
            tmp_path / "units.txt"]
    refused = tool("train_bpe.py", *args)
    assert refused.returncode == 2 and f"{tmp_path / 'text'}:" in refused.stderr.splitlines()[-1]
    for rule, marks in (("keep", True), ("remove", False)):   # keep: declared, the marks are units (S1's 4 of 20)
        proc = tool("train_bpe.py", *args, "--punctuation", rule)
        assert proc.returncode == 0, proc.stderr
        units = set(read_symbol_table(str(tmp_path / "units.txt"))) - {"<blank>", "<unk>", "<sos/eos>"}
        assert any(c in unit for unit in units for c in ",.") == marks and all(u == u.upper() for u in units)


def test_s1_scoring_compares_normalised_words(tmp_path):
    (tmp_path / "ref").write_text("u1 ZERO ONE\nu2 TWO\n")
    (tmp_path / "hyp").write_text("u1 Zero, one.\nu2 two\n")
    wenet = load_tool("compute-wer")
    assert wenet.main(["--v", "0", str(tmp_path / "ref"), str(tmp_path / "hyp")]) == 0  # WeNet's: 2 errors
    proc = tool("compute-wer.py", "--v", "0", "--punctuation", "remove", tmp_path / "ref", tmp_path / "hyp")
    assert proc.returncode == 0 and "Overall -> 0.00 % N=3 C=3" in proc.stdout, proc.stderr
    assert "2 punctuation marks removed from 1" in proc.stderr
    # refuse: a mark in a reference is an error naming its line; one in a hypothesis is scored as decoded
    (tmp_path / "ref2").write_text("u1 ZERO ONE\nu2 TWO.\n")
    proc = tool("compute-wer.py", "--punctuation", "refuse", tmp_path / "ref2", tmp_path / "hyp")
    assert proc.returncode == 2 and f"{tmp_path / 'ref2'}:2 '.'" in proc.stderr
    proc = tool("compute-wer.py", "--v", "0", "--punctuation", "refuse", tmp_path / "ref", tmp_path / "hyp")
    assert proc.returncode == 0 and "S=2" in proc.stdout


def test_normalise_text_rewrites_only_what_changes(tmp_path):
    text = tmp_path / "text"
    text.write_text("a ZERO ONE\nb TWO\n")
    before = text.stat().st_mtime_ns
    assert tool("normalise_text.py", "--case", "upper", text).returncode == 0
    assert text.stat().st_mtime_ns == before
    text.write_text("a Zero, one\nb\nc two.\n")
    proc = tool("normalise_text.py", "--case", "upper", "--punctuation", "remove", text)
    assert proc.returncode == 0 and text.read_text() == "a ZERO ONE\nb\nc TWO\n"
    assert "3 lines: case changed on 2, 2 punctuation marks removed from 2" in proc.stdout
