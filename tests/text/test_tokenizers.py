import logging

import pytest

from tests.tools.load import run_tool
from wenet_udps.text import SPACE, init_tokenizer, read_symbol_table, write_symbol_table


def _units(tmp_path, tokens):
    path = tmp_path / "units.txt"
    write_symbol_table(tokens, str(path))
    return str(path)


def test_units_file_format(tmp_path):
    path = _units(tmp_path, ["b", "a", "<unk>", "a"])
    lines = open(path).read().splitlines()
    assert lines == ["<blank> 0", "<unk> 1", "b 2", "a 3", "<sos/eos> 4"]
    assert read_symbol_table(path)["<sos/eos>"] == 4
    (tmp_path / "bad.txt").write_text("<blank> 0\nfoo\n")
    with pytest.raises(ValueError, match="bad.txt:2"):
        read_symbol_table(str(tmp_path / "bad.txt"))


def test_char_cjk_english_and_space(tmp_path):
    path = _units(tmp_path, ["我", "爱", "hello", "world", SPACE, "{NOISE}"])
    (tmp_path / "nls").write_text("{NOISE}\n")
    tok = init_tokenizer({"tokenizer": "char", "tokenizer_conf": {
        "symbol_table_path": path, "split_with_space": False, "non_lang_syms_path": str(tmp_path / "nls")}})
    tokens, ids = tok.tokenize("我爱 hello {NOISE} world")
    assert tokens == ["我", "爱", SPACE, "hello", SPACE, "{NOISE}", SPACE, "world"]
    assert tok.unk_id not in ids and len(ids) == len(tokens)
    text, back = tok.detokenize(ids)
    assert text == "我爱 hello {NOISE} world" and back == tokens
    assert tok.vocab_size() == 9 and tok.symbol_table["<sos/eos>"] == 8


def test_char_split_with_space_round_trip(tmp_path):
    path = _units(tmp_path, ["你", "好", "hello", "world"])
    tok = init_tokenizer({"tokenizer_conf": {"symbol_table_path": path, "split_with_space": True}})
    tokens, ids = tok.tokenize("hello 你好 world")
    assert tokens == ["hello", "你", "好", "world"]
    assert tok.detokenize(ids)[0] == "hello 你好 world"


def test_char_letters_units_and_unk_counting(tmp_path, caplog):
    path = _units(tmp_path, list("abcdefghijklmnopqrstuvwxyz") + [SPACE])
    tok = init_tokenizer({"tokenizer": "char", "tokenizer_conf": {"symbol_table_path": path}})
    tokens, ids = tok.tokenize("zero one")
    assert tokens == list("zero") + [SPACE] + list("one")
    assert tok.detokenize(ids)[0] == "zero one"
    with caplog.at_level(logging.WARNING):
        _, ids = tok.tokenize("a1b2 三")
        tok.tokenize("9 9 9")
    assert ids.count(tok.unk_id) == 3
    assert tok.num_unk == 6 and tok.unk_counts["9"] == 3
    assert len([r for r in caplog.records if "<unk>" in r.message]) == 1
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        tok.log_unk_summary()
    assert len(caplog.records) == 1 and "6 tokens" in caplog.records[0].message


def _train_bpe(tmp_path, mode="unigram"):
    text = tmp_path / "text"
    words = ["hello world", "speech recognition is fun", "the quick brown fox", "jumps over the lazy dog",
             "unit dot product similarity", "attention is all you need"]
    text.write_text("".join(f"utt{i} {w}\n" for i, w in enumerate(words * 5)))
    prefix = tmp_path / "bpe"
    run_tool("train_bpe", ["--text", str(text), "--model_prefix", str(prefix), "--units", str(tmp_path / "units.txt"),
                           "--nbpe", "30", "--bpe_mode", mode])
    return str(prefix) + ".model", str(tmp_path / "units.txt")


@pytest.mark.parametrize("mode", ["unigram", "bpe"])
def test_bpe_round_trip(tmp_path, mode):
    model, units = _train_bpe(tmp_path, mode)
    table = read_symbol_table(units)
    assert list(table)[:2] == ["<blank>", "<unk>"] and list(table)[-1] == "<sos/eos>"
    tok = init_tokenizer({"tokenizer": "bpe", "tokenizer_conf": {
        "symbol_table_path": units, "bpe_path": model, "split_with_space": False, "non_lang_syms_path": None}})
    tokens, ids = tok.tokenize("Hello world 你 the fox")
    assert "你" in tokens and all(t == t.upper() for t in tokens) and "HE" in "".join(tokens)
    assert tok.unk_id not in [i for t, i in zip(tokens, ids) if t != "你"]
    text, back = tok.detokenize(ids)
    assert back[:len(tokens)] == [t if t in table else "<unk>" for t in tokens]
    assert tok.detokenize(tok.tokenize("speech recognition is fun")[1])[0] == "SPEECH RECOGNITION IS FUN"


def test_init_tokenizer_errors(tmp_path):
    path = _units(tmp_path, ["a"])
    with pytest.raises(ValueError, match="valid choices: bpe, char"):
        init_tokenizer({"tokenizer": "word", "tokenizer_conf": {"symbol_table_path": path}})
    with pytest.raises(ValueError, match="split_with_spaces"):
        init_tokenizer({"tokenizer": "char", "tokenizer_conf": {"symbol_table_path": path, "split_with_spaces": 1}})
    with pytest.raises(ValueError, match="symbol_table_path"):
        init_tokenizer({"tokenizer": "char", "tokenizer_conf": {}})
    with pytest.raises(ValueError, match="sentencepiece"):
        init_tokenizer({"tokenizer": "bpe", "tokenizer_conf": {"symbol_table_path": path,
                                                               "bpe_path": str(tmp_path / "none.model")}})


@pytest.mark.parametrize("lines,msg", [
    (["<blank> 0", "<unk> 1", "a 1", "<sos/eos> 2"], r"units.txt:3: id 1 already given on line 2"),
    (["<unk> 0", "<blank> 1", "a 2", "<sos/eos> 3"], r"<blank> must have id 0"),
    (["<blank> 0", "<unk> 1", "<sos/eos> 2", "a 3"], r"<sos/eos> must be the last id \(3\)"),
    (["<blank> 0", "<unk> 1", "a 2"], r"<sos/eos> must be the last id"),
    (["<blank> 0", "<unk> 1", "a 5", "<sos/eos> 6"], r"ids must be 0..3"),
    (["<blank> 0", "<unk> 1", "a 2", "a 3"], r"units.txt:4: duplicate token 'a'"),
])
def test_malformed_units_file_is_a_user_error_naming_it(tmp_path, lines, msg):
    from wenet_udps.text.base_tokenizer import UnitsError, read_symbol_table
    path = tmp_path / "units.txt"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UnitsError, match=msg):
        read_symbol_table(str(path))


def test_a_missing_bpe_model_is_a_user_error_naming_the_key(tmp_path):
    """A conf that names another corpus's BPE model (docs/own_data.md: a recipe's conf built on conf/an4's) was a
    ValueError traceback in bin.train; a UserError is one line, exit 2, naming the key and the path."""
    from wenet_udps.utils.cli import UserError
    units = tmp_path / "units.txt"
    write_symbol_table({"<blank>": 0, "<unk>": 1, "▁A": 2, "<sos/eos>": 3}, str(units))
    missing = tmp_path / "data" / "an4" / "lang_bpe" / "train_unigram30.model"
    with pytest.raises(UserError, match=r"tokenizer_conf\.bpe_path: cannot load .*train_unigram30\.model"):
        init_tokenizer({"tokenizer": "bpe", "tokenizer_conf": {"symbol_table_path": str(units),
                                                               "bpe_path": str(missing)}})
