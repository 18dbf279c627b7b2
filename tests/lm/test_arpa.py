import pytest

from wenet_udps.lm.arpa import LmError, oov_rate, read_arpa, words_of_text
from wenet_udps.utils.source_info import file_sha256

ARPA = """\\data\\
ngram 1=5
ngram 2=2

\\1-grams:
-1.0\t<unk>\t0
-99\t<s>\t-0.3
-0.7\t</s>\t0
-0.5\tyes\t-0.2
-0.6\tno\t-0.2

\\2-grams:
-0.1\t<s> yes
-0.2\tyes no

\\end\\
"""


def test_reads_identity_and_vocabulary(tmp_path):
    path = tmp_path / "lm.arpa"
    path.write_text(ARPA)
    info = read_arpa(str(path))
    assert info.order == 2 and info.counts == [5, 2]
    assert info.words == ["<unk>", "<s>", "</s>", "yes", "no"]
    assert info.size == path.stat().st_size and info.sha256 == file_sha256(str(path))
    assert info.source()["lm_sha256"] == info.sha256 and info.source()["lm_order"] == "2"


@pytest.mark.parametrize("text,expected", [
    (ARPA.replace("-0.2\tyes no\n", ""), "2-grams 1 of 2"),           # a section shorter than its count
    (ARPA.replace("\\end\\\n", ""), "truncated"),                      # cut before the end
    ("mmap lm http://kheafield.com/code\n", "not an ARPA file"),          # a binary's header (or any other file)
    (ARPA.replace("ngram 2=2", "ngram two"), "bad header line"),
])
def test_corrupt_lm_is_one_line_naming_the_file(tmp_path, text, expected):
    path = tmp_path / "lm.arpa"
    path.write_text(text)
    with pytest.raises(LmError) as e:
        read_arpa(str(path))
    assert expected in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("old,new,line,expected", [
    ("-0.5\tyes\t-0.2", "nan\tyes\t-0.2", 9, "log-probability nan of 'yes'"),
    ("-0.2\tyes no", "0.3\tyes no", 14, "log-probability 0.3 of 'yes no'"),
    ("-0.2\tyes no", "inf\tyes no", 14, "must be a number <= 0"),
    ("-0.6\tno\t-0.2", "-0.6\tno\tNaN", 10, "backoff weight NaN of 'no'"),
    ("-0.2\tyes no", "-0.2\tyes maybe", 14, "the word 'maybe', which is not among the unigrams"),
    ("-0.1\t<s> yes", "-0.1\tyes", 13, "bad 2-gram line"),
    ("-0.1\t<s> yes", "-0.1\t<s> yes no -0.1", 13, "bad 2-gram line"),
    ("-0.1\t<s> yes", "-0.1\t<s> yes x", 13, "must be numbers"),
])
def test_values_kenlm_refuses_are_one_line_naming_file_and_line(tmp_path, old, new, line, expected):
    """A NaN or positive log-probability, a NaN backoff, an n-gram of a word that is no unigram: KenLM refuses the
    file only when it loads it (build_binary, decoding); read_arpa (check_lm, binarize_lm, recognize) refuses it
    first, naming the file and line."""
    assert old in ARPA
    path = tmp_path / "lm.arpa"
    path.write_text(ARPA.replace(old, new))
    with pytest.raises(LmError) as e:
        read_arpa(str(path))
    assert str(e.value).startswith(f"{path}:{line}: ") and expected in str(e.value) and "\n" not in str(e.value)


def test_sections_out_of_order_are_refused(tmp_path):
    path = tmp_path / "lm.arpa"
    one, two = ARPA.index("\\1-grams:"), ARPA.index("\\2-grams:")
    end = ARPA.index("\\end\\")
    path.write_text(ARPA[:one] + ARPA[two:end] + ARPA[one:two] + ARPA[end:])
    with pytest.raises(LmError, match=r"lm.arpa:5: section \\2-grams: out of order \(expected \\1-grams:\)"):
        read_arpa(str(path))


def test_minus_infinity_and_zero_log_probabilities_are_kept(tmp_path):
    """lmplz writes 0 for <s>, other tools -99 or -inf: a probability of 1 or 0 is a valid log10 probability."""
    path = tmp_path / "lm.arpa"
    path.write_text(ARPA.replace("-99\t<s>", "0\t<s>").replace("-1.0\t<unk>", "-inf\t<unk>"))
    assert read_arpa(str(path)).counts == [5, 2]


def test_missing_lm(tmp_path):
    with pytest.raises(LmError, match="does not exist"):
        read_arpa(str(tmp_path / "none.arpa"))


def test_binary_garbage_is_refused(tmp_path):
    path = tmp_path / "lm.bin"
    path.write_bytes(b"\\data\\\n\xff\xfe\x00garbage")
    with pytest.raises(LmError, match="not UTF-8"):
        read_arpa(str(path))


def test_oov_rate_counts_running_words_and_characters():
    assert oov_rate({"yes", "no"}, words_of_text(["yes yes maybe", "no"], char_lm=False)) == pytest.approx(0.25)
    assert words_of_text(["你好 世界"], char_lm=True) == ["你", "好", "世", "界"]
    assert oov_rate({"你", "好"}, words_of_text(["你好世界"], char_lm=True)) == pytest.approx(0.5)
    assert oov_rate({"a"}, []) == 0.0


def test_a_character_lm_counts_english_words_whole():
    """The words of a code-switch text under a character LM: its CJK characters and its other words whole, as the
    LM learnt them (issue 80: every letter was a word, 66.7 % of a dev text not in the LM)."""
    assert words_of_text(["我爱 IPHONE APP", "<noise>你好"], char_lm=True) == ["我", "爱", "IPHONE", "APP", "<noise>",
                                                                            "你", "好"]
