"""The LM's one held-out check (wenet_udps.lm.held_out): a dev/test sentence is found in LM text whatever its case,
punctuation, a byte-order mark or the words around it (issue 57, S5-S7), its compatibility forms (fullwidth letters,
ligatures) or invisible characters (issue 66 D); a line holding every n-gram of one at the LM's order is refused,
a sentence shorter than the order only as a whole line; a look-alike letter of another script is refused."""
import time

import pytest

from wenet_udps.lm.arpa import LmError
from wenet_udps.lm.build import read_sentences
from wenet_udps.lm.held_out import HeldOut
from wenet_udps.utils.kaldi_files import ListError


def held(tmp_path, text: str, name: str = "dev_text", order: int = 3) -> HeldOut:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return HeldOut([str(path)], order=order)


def refuse_file(tmp_path, h: HeldOut, lm_text: bytes, scripts=None):
    extra = tmp_path / "books.txt"
    extra.write_bytes(lm_text)
    with pytest.raises(LmError) as e:
        h.refuse([(str(extra), read_sentences(str(extra), keyed=False))], scripts)
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
    assert f"{extra}:2" in message and "holds every 3-gram of the held-out sentence" in message
    # at the start and at the end of a line too
    for line in (f"{sentence} and more", f"more and {sentence}."):
        assert h.find(line) is not None and h.find(line).contained
    # a line holding only part of it, or its words in another order, is not it
    assert h.find("the old man walked slowly home along the road") is None
    assert h.find("river the old man walked slowly home along the") is None


def test_d_containment_follows_the_lm_order(tmp_path):
    """Issue 66 D: a held-out sentence inside a longer line was refused only from 8 words, while an AN4 test
    sentence of 6 words inside a line gave a 3-gram LM every one of its inner trigrams. Now a line holding every
    n-gram of a held-out sentence at the LM's order is refused, whether in one run or split over the line; a
    sentence shorter than the order (AN4's YES, TWO) only as a whole line."""
    an4 = "ENTER SIX TWO FOUR ONE NINE"  # a 6-word AN4-style test sentence
    short = ["YES", "TWO", "ENTER ONE"]
    h = held(tmp_path, f"t1 {an4}\n" + "".join(f"t{i + 2} {s}\n" for i, s in enumerate(short)))
    assert h.find(f"please {an4.lower()} now and then rubout").contained
    assert h.find(f"{an4.lower()}").contained is False  # the whole line
    # every trigram of it, in two places of one line: the LM learns all of them
    assert h.find("then enter six two four and later two four one nine").contained
    # one trigram missing (SIX TWO FOUR): not refused
    assert h.find("enter six two and two four one nine") is None
    for s in short:
        assert h.find(f"well {s.lower()} said the man") is None
        assert h.find(f"{s.lower()}.") is not None
    # The order decides: "ENTER ONE FIVE" is three words, so every 3-gram LM learns it whole from a line holding
    # it, a 4-gram LM's n-grams of it all hold its start or end.
    line = "then enter one five and stop"
    assert held(tmp_path, "t1 ENTER ONE FIVE\n", name="o3").find(line).contained
    assert held(tmp_path, "t1 ENTER ONE FIVE\n", name="o4", order=4).find(line) is None
    assert held(tmp_path, f"t1 {an4}\n", name="o4b", order=4).find(f"please {an4} now").contained


def test_character_lm_compares_characters(tmp_path):
    h = held(tmp_path, "t1 今天我们一起去北京看书唱歌\nt2 你好\n")
    assert h.find("昨天说今天我们一起去北京看书唱歌了").contained   # 13 characters inside a longer line
    assert h.find("你好。") is not None and h.find("我说你好吗") is None   # 2 characters: whole lines only


@pytest.mark.parametrize("line", ["ＴＨＥ ＣＡＴ ＲＡＮ", "THE C\u200bAT RAN", "THE\u00a0CAT\u2060 RAN",
                                  "THE CA\u00adT RAN", "\ufeffthe cat ran", "ＴＨＥ ＣＡＴ ＲＡＮ。"])
def test_d_compatibility_forms_and_invisible_characters_hide_nothing(tmp_path, line):
    """Issue 66 D: fullwidth letters, a zero-width space (U+200B), a word joiner, a soft hyphen, a no-break space
    got a test sentence past the check; the LM then learned some of its trigrams. Compared as read (NFKC, format
    characters removed), each is the sentence."""
    h = held(tmp_path, "t1 THE CAT RAN\n")
    message, extra = refuse_file(tmp_path, h, f"other words\n{line}\n".encode())
    assert f"{extra}:2" in message and "is the held-out sentence" in message


def test_d_a_look_alike_letter_of_another_script_is_refused_naming_it(tmp_path):
    """Issue 66 D: a Cyrillic А in place of A got a test sentence past the check (3-4 of its 6 trigrams learned).
    A letter of a script that is not the recipe's is refused, naming the line and the letter; letters of the
    recipe's script with accents are not."""
    h = held(tmp_path, "t1 THE OLD MAN WALKED HOME\n")
    message, extra = refuse_file(tmp_path, h, "a café line\nthe old m\u0430n walked home\n".encode(), ["LATIN"])
    assert f"{extra}:2: this LM text line holds 'а' (U+0430 CYRILLIC SMALL LETTER A)" in message
    assert "none of the recipe's scripts (LATIN" in message
    h.refuse([(extra, [(1, "a naïve café line")])], ["LATIN"])  # Latin with accents: the recipe's script
    h.refuse([(extra, [(1, "你好 hello")])], ["CJK", "LATIN"])


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
    match = h.find("x " + rows[1999] + " y")  # the first held-out line it holds (line 13 is part of line 2000)
    assert match.contained and match.sentence in rows[1999] and match.where.endswith(":13")


def test_h_a_held_out_sentence_across_a_line_break_is_refused_naming_the_lines(tmp_path):
    """Issue 80 case 6: MOTHER CAT WHITE EAT on one line, WHITE EAT FATHER on the next; a 3-gram LM of them holds
    all five trigrams of the test sentence MOTHER CAT WHITE EAT FATHER (its first and last with <s> and </s>). Read
    as one stream of words, the two lines hold every trigram of it."""
    h = held(tmp_path, "t1 MOTHER CAT WHITE EAT FATHER\n", name="test_text")
    message, extra = refuse_file(tmp_path, h, b"a line\nmother cat white eat\nwhite eat father\nthe end\n")
    assert message.startswith(f"{extra}:2-3: these LM text lines hold, across their line breaks, every 3-gram of "
                              f"the held-out sentence of {tmp_path / 'test_text'}:1") and "\n" not in message
    assert h.find("mother cat white eat") is None and h.find("white eat father") is None  # neither line alone
    # wrapped over two lines, or with a line between its parts
    for text in (b"mother cat white\neat father\n", b"mother cat white eat\nsome other line\nwhite eat father\n",
                 b"mother cat\nwhite eat\nfather\n"):
        message, extra = refuse_file(tmp_path, h, text)
        assert "across their line breaks" in message, text


def test_h_the_stream_window_is_the_room_the_sentence_takes(tmp_path):
    """Not over-strict: the window holds at most as many lines as the sentence has words, so a sentence's common
    n-grams met far apart are no leak; a sentence shorter than the order has no n-gram to look for; the order
    decides as on one line."""
    h = held(tmp_path, "t1 I DONT KNOW WHAT\nt2 YES SIR\nt3 MOTHER CAT WHITE EAT FATHER\n")
    far = ["i dont know"] + ["the wind blew hard"] * 4 + ["dont know what"]
    h.refuse([("books.txt", list(enumerate(far, 1)))])
    h.refuse([("books.txt", [(1, "mother cat white eat"), *[(i, "x y z") for i in range(2, 7)],
                             (7, "white eat father")])])
    h.refuse([("books.txt", [(1, "well yes"), (2, "sir he said")])])  # 2 words, order 3: whole lines only
    with pytest.raises(LmError, match="a.txt:3 to b.txt:1: these LM text lines hold"):  # one stream over the files
        h.refuse([("a.txt", [(1, "x"), (2, "y"), (3, "mother cat white eat")]), ("b.txt", [(1, "white eat father")])])
    with pytest.raises(LmError, match="books.txt:1-2: these LM text lines hold"):
        h.refuse([("books.txt", [(1, "i dont know"), (2, "dont know what")])])
    with pytest.raises(LmError, match="across their line breaks, every 2-gram"):  # order 2: its bigrams
        held(tmp_path, "t1 YES SIR\n", name="o2", order=2).refuse([("b", [(1, "well yes"), (2, "sir he said")])])
    held(tmp_path, "t1 MOTHER CAT WHITE EAT FATHER\n", name="o4", order=4).refuse(
        [("b", [(1, "mother cat white eat"), (2, "white eat father")])])  # its 4-gram CAT WHITE EAT FATHER: nowhere


def test_h_a_stream_goes_on_with_the_lines_kept(tmp_path):
    """make_lm_book_text leaves out the line that completes a held-out sentence and goes on: the line is not
    added, and the next lines are read after the lines kept."""
    h = held(tmp_path, "t1 MOTHER CAT WHITE EAT FATHER\n")
    stream = h.stream()
    assert stream.add("mother cat white eat") is None
    first, match = stream.add("white eat father")
    assert first == 0 and match.sentence == "MOTHER CAT WHITE EAT FATHER"
    assert stream.add("the end of it") is None and stream.lines == 2


def test_h_the_stream_is_linear_in_the_lm_text(tmp_path):
    """The stream over the 20000 lines of test_containment_is_linear_in_the_lm_text's held-out sentences finds no
    false match; the last held-out sentence over two lines is found."""
    words = [f"w{i}" for i in range(500)]
    rows = [" ".join(words[(i * 7 + k * 13) % 500] for k in range(8 + i % 36)) for i in range(2000)]
    h = held(tmp_path, "".join(f"t{i} {s}\n" for i, s in enumerate(rows)))
    stream = h.stream()
    assert all(stream.add(" ".join(words[(j * 11 + k * 3) % 500] for k in range(30))) is None for j in range(20000))
    half = rows[0].split()
    assert stream.add(" ".join(half[:4])) is None
    assert stream.add(" ".join(half[3:])) is None  # one word again, added: its trigram w26 w39 w52 nowhere
    assert stream.add(" ".join(half[2:]))[1].sentence == rows[0]  # two words again: every trigram
