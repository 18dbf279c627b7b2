"""The held-out check's tokens (wenet_udps.lm.held_out.tokens_of, issue 80 H, hostile round): a non-language symbol
in a held-out sentence (``<noise>``, ``[laughter]``, ``{NOISE}``) or in the LM text hides nothing, by the scorer's tag
rule; Mandarin is compared character by character whether or not the LM is built with ``--char_lm``."""
import subprocess
import sys
from pathlib import Path

import pytest

from wenet_udps.lm.held_out import HeldOut, tokens_of

ROOT = Path(__file__).resolve().parents[2]
SHORE = "SHE SELLS SEA SHELLS BY THE SHORE"


def held(tmp_path, text: str) -> HeldOut:
    path = tmp_path / "dev_text"
    path.write_text(text, encoding="utf-8")
    return HeldOut([str(path)], order=3)


@pytest.mark.parametrize("symbol", ["<noise>", "[laughter]", "{NOISE}", "<unk>"])
def test_a_non_language_symbol_in_the_held_out_sentence_hides_nothing(tmp_path, symbol):
    h = held(tmp_path, f"d3 {symbol} SHE SELLS SEA SHELLS BY THE SHORE\n")
    assert h.find(SHORE) is not None and not h.find(SHORE).contained          # the whole line
    assert h.find(f"and {SHORE.lower()} today").contained                      # inside a longer line
    assert h.find("SHE SELLS SEA SHELLS") is None


@pytest.mark.parametrize("line", ["SHE SELLS SEA <noise> SHELLS BY THE SHORE", f"[laughter] {SHORE} {{NOISE}}",
                                  "SHE SELLS SEA<unk> SHELLS BY THE SHORE"])
def test_a_non_language_symbol_in_the_lm_text_hides_nothing(tmp_path, line):
    assert held(tmp_path, f"d1 {SHORE}\n").find(line) is not None


def test_symbols_are_dropped_by_the_scorers_tag_rule():
    assert tokens_of("<noise> A<unk>B [laughter] C {NOISE}") == ("ab", "c")
    assert tokens_of("<noise> 你好") == ("你", "好")


def test_mandarin_is_compared_by_characters_without_char_lm(tmp_path):
    h = held(tmp_path, "z1 我们 今天 去 公园 玩\n")
    assert h.find("我 们 今 天 去 公 园 玩") is not None       # the character LM text of the same sentence
    assert h.find("我们今天去公园玩") is not None               # unsegmented
    assert h.find("昨天 我们 今天 去 公园 玩 了").contained     # inside a longer line
    assert h.find("我们 今天 去 公园") is None
    assert tokens_of("HELLO 你好 WORLD") == ("hello", "你", "好", "world")  # English words stay words


def test_a_code_switch_sentence_is_compared_by_characters_and_english_words(tmp_path):
    """A character LM keeps English words whole (issue 80), so the held-out check compares a code-switch sentence
    as it learns it: its characters and its English words, however the Mandarin is spaced."""
    h = held(tmp_path, "c1 我 爱 IPHONE APP 你好\n")
    assert tokens_of("我爱 IPHONE APP 你好") == ("我", "爱", "iphone", "app", "你", "好")
    assert h.find("我爱IPHONE APP你好") is not None and h.find("他说 我爱 IPHONE APP 你好 吗").contained
    assert h.find("我爱 IPHONEAPP 你好") is None and h.find("我爱 I PHONE APP 你好") is None  # other words


@pytest.mark.parametrize("dev,lm_text,char_lm", [
    (f"d3 <noise> {SHORE}\n", f"{SHORE}\n", False),
    ("z1 我们 今天 去 公园 玩\n", "我 们 今 天 去 公 园 玩\n", False),
], ids=["noise symbol", "mandarin without --char_lm"])
def test_build_lm_refuses_the_hidden_sentence(tmp_path, dev, lm_text, char_lm):
    (tmp_path / "train").write_text("a1 THE CAT RAN HOME\na2 今天 天气 很 好\n", encoding="utf-8")
    (tmp_path / "dev").write_text(dev, encoding="utf-8")
    (tmp_path / "books").write_text(lm_text, encoding="utf-8")
    cmd = [sys.executable, "-m", "wenet_udps.bin.build_lm", "--text", str(tmp_path / "train"),
           "--held_out", str(tmp_path / "dev"), "--lm_text", str(tmp_path / "books"), "--punctuation", "keep",
           "--out", str(tmp_path / "o.arpa")] + (["--char_lm"] if char_lm else [])
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{tmp_path / 'books'}:1: this LM text line is the held-out sentence of {tmp_path / 'dev'}:1" in proc.stderr
    assert not (tmp_path / "o.arpa").exists()
