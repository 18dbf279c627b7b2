"""The hotword file (issue 82, F5-F7): phrases in the case of the units; scores only as ASCII decimals; a typed '▁'
and a word that whole-word units lack refused naming the line; one reader for the decoder and the scorer."""
import pytest

from tests.lm.lm_helpers import write_units
from tests.tools.load import load_tool
from wenet_udps.decode.hotwords import read_lines, read_phrases
from wenet_udps.text import CharTokenizer
from wenet_udps.utils.cli import UserError

LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]


def tokenizer(tmp_path, units, name="units.txt"):
    write_units(tmp_path / name, ["<blank>", "<unk>", *units, "<sos/eos>"])
    return CharTokenizer(symbol_table_path=str(tmp_path / name))


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("letters, phrase", [(LETTERS, "ZEBRA Crossing"),
                                             ([c.upper() for c in LETTERS], "zebra Crossing")])
def test_a_phrase_is_put_in_the_case_of_the_units(tmp_path, letters, phrase):
    tok = tokenizer(tmp_path, letters + ["▁"])
    units = read_phrases([phrase], tok, 1.0)[0][0]
    assert units == tok.tokens2ids(tok.text2tokens(phrase.lower() if letters[0].islower() else phrase.upper()))


@pytest.mark.parametrize("score", ["1e400", "nan", "inf", "\u0661", "1_0", "1e1", "0x1", "-1", "0", "21"])
def test_a_score_is_an_ascii_decimal_in_range(tmp_path, score):
    tok = tokenizer(tmp_path, LETTERS + ["▁"])
    path = write(tmp_path / "hot.txt", f"zebra :1.5\nmarmalade :{score}\n")
    with pytest.raises(UserError, match=r"hot.txt:2: score .* must be a decimal number \(ASCII digits"):
        read_phrases(path, tok, 1.0)
    assert read_phrases(write(tmp_path / "ok.txt", "zebra :1.5\nmarmalade :20\n"), tok, 1.0)[0][1] == 1.5


def test_a_typed_word_boundary_is_refused(tmp_path):
    tok = tokenizer(tmp_path, LETTERS + ["▁"])
    with pytest.raises(UserError, match=r"hot.txt:2: the phrase 'zebra▁crossing' holds '▁'"):
        read_phrases(write(tmp_path / "hot.txt", "zebra\nzebra▁crossing\n"), tok, 1.0)


def test_a_word_whole_word_units_lack_is_refused_naming_the_line(tmp_path):
    """tiny_en's units: whole words and the one-letter words A and I, no letters of their own; 'AI' spelled by its
    characters would be the words 'A' 'I' run together."""
    tok = tokenizer(tmp_path, ["A", "I", "GOOD", "DAY", "▁"])
    assert len(read_phrases(["GOOD DAY", "A"], tok, 1.0)) == 2
    with pytest.raises(UserError, match=r"hotwords\[1\]: .*whole words and 'AI' is not one of them"):
        read_phrases(["GOOD", "AI"], tok, 1.0)
    code_switch = tokenizer(tmp_path, ["A", "I", "GOOD", "D", "O", "G", "▁"], "switch.txt")  # letters too
    assert read_phrases(["AI", "DOG"], code_switch, 1.0)[0][0] == code_switch.tokens2ids(["A", "I"])


def test_the_scorer_reads_lists_with_the_decoders_reader(tmp_path, capsys):
    assert read_lines(write(tmp_path / "l.txt", "A B :2\n\nC\n"))[1] == [(f"{tmp_path}/l.txt:1", "A B", 2.0),
                                                                      (f"{tmp_path}/l.txt:3", "C", None)]
    ref, hyp = write(tmp_path / "ref", "u1 ZEBRA\n"), write(tmp_path / "hyp", "u1 ZEBRA\n")
    tool = load_tool("compute-biased-wer")
    for bad in ("ZEBRA :nan\n", "ZEBRA▁CROSSING\n"):
        with pytest.raises(UserError, match="list.txt:1"):
            tool.main(["--biasing_list", write(tmp_path / "list.txt", bad), ref, hyp])
