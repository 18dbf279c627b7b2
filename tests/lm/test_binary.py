"""KenLM binaries: written from an lmplz ARPA with their words file, identified by their header (order and counts as
the ARPA's), decoded exactly as the ARPA; a binary without its words file, with another LM's, cut short or left
incomplete by build_binary is one line naming the file."""
import pytest
import torch

from tests.lm.lm_helpers import need_build_binary, need_flashlight, need_lmplz, write_units
from wenet_udps.lm.arpa import LmError, read_arpa
from wenet_udps.lm.binary import read_lm, words_path, write_binary
from wenet_udps.lm.build import build_arpa
from wenet_udps.lm.search import LmSearch, LmSearchConfig
from wenet_udps.text import CharTokenizer
from wenet_udps.utils.source_info import file_sha256

SENTENCES = ["ab ba", "ab ab ba", "ba ab", "aab ba ab", "ba ba aab", "ab aab"]


@pytest.fixture
def lm(tmp_path):
    need_lmplz()
    need_build_binary()
    arpa = build_arpa(SENTENCES * 3, str(tmp_path / "lm.arpa"), order=3)
    return arpa, write_binary(arpa.path, str(tmp_path / "lm.bin"))


def test_binary_has_the_arpa_identity_and_words(tmp_path, lm):
    arpa, binary = lm
    assert binary.kind == "KenLM binary" and binary.path == str(tmp_path / "lm.bin")
    assert binary.order == arpa.order == 3 and binary.counts == arpa.counts
    assert binary.words == arpa.words and (tmp_path / "lm.bin.words").read_text().split() == arpa.words
    assert binary.sha256 == file_sha256(binary.path) and binary.size == (tmp_path / "lm.bin").stat().st_size
    assert binary.source()["lm"] == binary.path and binary.source()["lm_order"] == "3"
    assert "KenLM binary, 3-gram" in binary.describe()
    assert read_lm(binary.path) == binary and read_lm(arpa.path) == arpa
    assert not list(tmp_path.glob("*.partial"))


def test_binary_decodes_as_the_arpa(tmp_path, lm):
    need_flashlight()
    arpa, binary = lm
    write_units(tmp_path / "units.txt", ["<blank>", "<unk>", "a", "b", "▁", "<sos/eos>"])
    tok = CharTokenizer(symbol_table_path=str(tmp_path / "units.txt"))
    logp = torch.randn(3, 24, 6, generator=torch.Generator().manual_seed(0)).log_softmax(-1)
    lens = torch.tensor([24, 20, 13])
    conf = LmSearchConfig(lm_weight=1.0, word_score=0.5, beam_size=6)
    from_arpa = LmSearch(arpa.path, tok, 0, conf)(logp, lens)
    from_binary = LmSearch(binary.path, tok, 0, conf)(logp, lens)
    assert [r.nbest for r in from_binary] == [r.nbest for r in from_arpa]
    assert [r.nbest_scores for r in from_binary] == [r.nbest_scores for r in from_arpa]
    assert any(r.tokens for r in from_arpa)


def test_binary_without_its_words_file(tmp_path, lm):
    _, binary = lm
    (tmp_path / "lm.bin.words").unlink()
    with pytest.raises(LmError) as e:
        read_lm(binary.path)
    msg = str(e.value)
    assert f"{words_path(binary.path)} not found" in msg and "binarize_lm" in msg and "\n" not in msg


def test_words_file_of_another_lm(tmp_path, lm):
    _, binary = lm
    (tmp_path / "lm.bin.words").write_text("<unk>\n<s>\n</s>\nab\n")
    with pytest.raises(LmError, match=r"lm.bin.words: 4 words, but .*lm.bin has 6 unigrams"):
        read_lm(binary.path)
    (tmp_path / "lm.bin.words").write_text("<unk>\n<s>\nab ba\n")
    with pytest.raises(LmError, match=r"lm.bin.words:3: expected one word a line"):
        read_lm(binary.path)


@pytest.mark.parametrize("head,expected", [
    (b"mmap lm http://kheafield.com/code incomplete\n", "incomplete KenLM binary"),
    (b"mmap lm http://kheafield.com/code format version 4\n\0", "another format version"),
    (b"mmap lm http://kheafield.com/code format version 5\n\0" + b"\0" * 40, "cut short"),
])
def test_broken_binary_is_one_line(tmp_path, head, expected):
    path = tmp_path / "lm.bin"
    path.write_bytes(head)
    with pytest.raises(LmError) as e:
        read_lm(str(path))
    assert expected in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value)


def test_corrupt_arpa_writes_no_binary(tmp_path):
    arpa = tmp_path / "lm.arpa"
    arpa.write_text("\\data\\\nngram 1=3\nngram 2=2\n\n\\1-grams:\n-1\t<s>\t0\n")
    with pytest.raises(LmError, match="truncated"):
        write_binary(str(arpa), str(tmp_path / "lm.bin"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lm.arpa"]
    with pytest.raises(LmError):
        read_arpa(str(arpa))
