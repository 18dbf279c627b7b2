"""The LM's one held-out check (wenet_udps.lm.held_out): a dev/test sentence is found in LM text whatever its case,
punctuation, a byte-order mark or the words around it (issue 57, S5-S7); short sentences only as whole lines."""
import time

import pytest

from wenet_udps.lm.arpa import LmError
from wenet_udps.lm.build import read_sentences
from wenet_udps.lm.held_out import CONTAINED_MIN, HeldOut
from wenet_udps.utils.kaldi_files import ListError


def held(tmp_path, text: str, name: str = "dev_text", char: bool = False) -> HeldOut:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return HeldOut([str(path)], char=char)


def refuse_file(tmp_path, h: HeldOut, lm_text: bytes):
    extra = tmp_path / "books.txt"
    extra.write_bytes(lm_text)
    with pytest.raises(LmError) as e:
        h.refuse([(str(extra), read_sentences(str(extra), keyed=False))])
    return str(e.value), str(extra)


def test_held_out_sentence_is_refused_naming_both_lines(tmp_path):
    h = held(tmp_path, "d1 THE CAT RAN\nd2 other words\n")
    message, extra = refuse_file(tmp_path, h, b"a sentence\n  the  cat ran \n")
    assert f"{extra}:2" in message and f"{tmp_path / 'dev_text'}:1" in message
    h.refuse([(extra, [(1, "a sentence")])])  # no overlap: passes


@pytest.mark.parametrize("line", ["the cat ran.", "The cat ran!", "\"The cat, ran.\"", "THE CAT RAN ?"])
def test_s5_a_held_out_sentence_with_punctuation_is_found(tmp_path, line):
    h = held(tmp_path, "d1 THE CAT RAN\n")
    message, extra = refuse_file(tmp_path, h, f"other words\n{line}\n".encode())
    assert f"{extra}:2" in message and "is the held-out sentence" in message


def test_s6_a_byte_order_mark_hides_nothing(tmp_path):
    # in the LM text: its first line is the test sentence behind a BOM
    h = held(tmp_path, "t1 CAR\n")
    message, extra = refuse_file(tmp_path, h, "\ufeffCAR\nother words\n".encode())
    assert f"{extra}:1" in message
    assert read_sentences(extra, keyed=False)[0] == (1, "CAR")  # \ufeffCAR never reaches the LM
    # in the held-out text: its first sentence is still held out
    h = held(tmp_path, "\ufefft1 THE DOG SAT\n", name="bom_test_text")
    message, _ = refuse_file(tmp_path, h, b"the dog sat\n")
    assert "bom_test_text:1" in message


def test_s7_a_line_holding_a_held_out_sentence_among_more_words_is_refused(tmp_path):
    sentence = "THE OLD MAN WALKED SLOWLY HOME ALONG THE RIVER"
    h = held(tmp_path, f"t1 {sentence}\n")
    message, extra = refuse_file(tmp_path, h, f"a line\nand then {sentence.lower()} after dark, said he\n".encode())
    assert f"{extra}:2" in message and "contains the held-out sentence" in message
    # at the start and at the end of a line too
    for line in (f"{sentence} and more", f"more and {sentence}."):
        assert h.find(line) is not None and h.find(line).contained
    # a line holding only part of it, or its words in another order, is not it
    assert h.find("the old man walked slowly home along the road") is None
    assert h.find("river the old man walked slowly home along the") is None


def test_short_held_out_sentences_are_refused_only_as_whole_lines(tmp_path):
    # AN4's YES, TWO, ENTER ONE FIVE: inside a good share of any book, so only a whole line equal to one is refused
    short = ["YES", "TWO", "ENTER ONE FIVE", "I RETURNED TO THE DRAWING ROOM", "A B C D E F G"]
    assert all(len(s.split()) < CONTAINED_MIN["words"] for s in short)
    h = held(tmp_path, "".join(f"t{i} {s}\n" for i, s in enumerate(short)))
    for s in short:
        assert h.find(f"well {s.lower()} said the man") is None
        assert h.find(f"{s.lower()}.") is not None
    eight = "ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT"   # the shortest sentence refused inside a line
    h = held(tmp_path, f"t1 {eight}\n", name="eight")
    assert h.find(f"count {eight} now").contained


def test_character_lm_compares_characters(tmp_path):
    h = held(tmp_path, "t1 今天我们一起去北京看书唱歌\nt2 你好\n", char=True)
    assert h.find("昨天说今天我们一起去北京看书唱歌了").contained   # 13 characters inside a longer line
    assert h.find("你好。") is not None and h.find("我说你好吗") is None   # 2 characters: whole lines only


def test_non_utf8_held_out_text_names_the_file_and_line(tmp_path):
    path = tmp_path / "test_text"
    path.write_bytes(b"t1 GOOD\nt2 BAD \xff\n")
    with pytest.raises(ListError, match=f"{path}:2: not UTF-8"):
        HeldOut([str(path)])


def test_containment_is_linear_in_the_lm_text(tmp_path):
    # 2000 held-out sentences of 8..43 words and 20000 lines of 30 words: a few seconds, not an n-gram per length
    words = [f"w{i}" for i in range(500)]
    rows = [" ".join(words[(i * 7 + k * 13) % 500] for k in range(8 + i % 36)) for i in range(2000)]
    h = held(tmp_path, "".join(f"t{i} {s}\n" for i, s in enumerate(rows)))
    lines = [" ".join(words[(j * 11 + k * 3) % 500] for k in range(30)) for j in range(20000)]
    start = time.perf_counter()
    found = sum(h.find(line) is not None for line in lines)
    assert time.perf_counter() - start < 10 and found == 0
    assert h.find("x " + rows[1999] + " y").where.endswith(":2000")
