"""KenLM binaries: written from an lmplz ARPA with their words file, identified by their header (order and counts as
the ARPA's), decoded exactly as the ARPA; a binary without its words file, with another LM's, cut short or left
incomplete by build_binary is one line naming the file."""
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import wenet_udps
from tests.decode.decode_helpers import write_clips, write_list
from tests.lm.lm_helpers import need_build_binary, need_flashlight, need_lmplz, write_units
from tests.train.train_helpers import make_model_dir
from wenet_udps.bin import check_lm, recognize
from wenet_udps.lm.arpa import LmError, read_arpa
from wenet_udps.lm.binary import binding_line, read_lm, words_path, write_binary
from wenet_udps.lm.build import build_arpa
from wenet_udps.lm.search import LmSearch, LmSearchConfig
from wenet_udps.text import CharTokenizer
from wenet_udps.utils.source_info import file_sha256

ROOT = Path(__file__).resolve().parents[2]
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
    lines = (tmp_path / "lm.bin.words").read_text().splitlines()
    listed = "".join(w + "\n" for w in arpa.words).encode()  # the binary the words belong to, and the words
    words_sha256 = hashlib.sha256(listed).hexdigest()
    assert lines[0] == f"#binary sha256={binary.sha256} size={binary.size} words_sha256={words_sha256}"
    assert binary.words == arpa.words and lines[1:] == arpa.words
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
    for words in ("<unk>\n<s>\n</s>\nab\n", "<unk>\n<s>\nab ba\n"):  # (written with their own hash)
        (tmp_path / "lm.bin.words").write_text(binding_line(binary.sha256, binary.size, words.encode()) + "\n" + words)
        with pytest.raises(LmError, match=r"lm.bin.words: 4 words, but .*lm.bin has 6 unigrams"
                           if words.endswith("ab\n") else r"lm.bin.words:4: expected one word a line"):
            read_lm(binary.path)


def other_lms_words(tmp_path, binary):
    """Put beside ``binary`` the words file of another LM with as many words (its own binary other.bin)."""
    other = write_binary(build_arpa([s.replace("a", "x").replace("b", "y") for s in SENTENCES] * 3,
                                    str(tmp_path / "other.arpa"), order=3).path, str(tmp_path / "other.bin"))
    assert len(other.words) == len(binary.words) and other.words != binary.words
    (tmp_path / "lm.bin.words").write_bytes((tmp_path / "other.bin.words").read_bytes())
    return other


def test_words_file_of_another_lm_of_the_same_size_is_refused(tmp_path, lm):
    """issue 57 S8: the words of another LM with as many unigrams passed the count check, and the decoder then
    scored each word as another (or could never output it). The words file names its binary's SHA-256 and size."""
    _, binary = lm
    other = other_lms_words(tmp_path, binary)
    with pytest.raises(LmError) as e:
        read_lm(binary.path)
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'lm.bin.words'} belongs to another LM") and "\n" not in msg
    assert f"SHA-256 {other.sha256[:12]} ({other.size} bytes), and {binary.path} has SHA-256 {binary.sha256[:12]}" \
        in msg
    assert f"binarize_lm --arpa {tmp_path / 'lm.arpa'} --out {binary.path}" in msg
    assert read_lm(other.path).words == other.words  # the other pair is whole


def test_words_file_without_its_binary_named_is_refused_with_the_command_that_rewrites_it(tmp_path, lm):
    """A words file written before the binding (no first line naming the binary) cannot be told from another LM's:
    refused, with the one command that writes both again; after it the pair reads."""
    arpa, binary = lm
    (tmp_path / "lm.bin.words").write_text("".join(w + "\n" for w in binary.words))
    with pytest.raises(LmError) as e:
        read_lm(binary.path)
    msg = str(e.value)
    assert "does not record the KenLM binary it belongs to" in msg and "older wenet_udps" in msg
    command = f"python -m wenet_udps.bin.binarize_lm --arpa {arpa.path} --out {binary.path}"
    assert msg.endswith(command) and "\n" not in msg
    from wenet_udps.bin import binarize_lm
    assert binarize_lm.main(command.split()[3:]) == 0
    assert read_lm(binary.path).words == binary.words


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


def test_every_entry_point_refuses_a_words_file_of_another_lm(tmp_path, lm):
    """recognize (before decoding), check_lm, the Python API's lm= and bench/decode_speed.py --lm all read the LM
    through read_lm: each refuses the pair in one line."""
    need_flashlight()
    _, binary = lm
    other_lms_words(tmp_path, binary)
    conf, ckpt = make_model_dir(tmp_path, att_udps=False)
    clips = write_clips(tmp_path, 1)
    data = write_list(clips, tmp_path / "test.list")
    (tmp_path / "text").write_text("utt0 ab ba\n")
    expected = "lm.bin.words belongs to another LM"
    with pytest.raises(LmError, match=expected):
        recognize.main(["--config", str(conf), "--checkpoint", str(ckpt), "--test_data", str(data), "--result_dir",
                        str(tmp_path / "res"), "--modes", "ctc_prefix_beam_search_lm", "--lm", binary.path])
    assert not (tmp_path / "res" / "ctc_prefix_beam_search_lm").exists()
    with pytest.raises(LmError, match=expected):
        check_lm.main(["--lm", binary.path, "--text", str(tmp_path / "text")])
    model = wenet_udps.load_model(str(tmp_path), checkpoint="avg.pt")
    with pytest.raises(LmError, match=expected):
        model.transcribe(str(clips[0]), mode="ctc_prefix_beam_search_lm", lm=binary.path)
    bench = subprocess.run([sys.executable, "-m", "bench.decode_speed", "--exp_dirs", str(tmp_path),
                            "--checkpoint", "avg.pt", "--test_data", str(data), "--repeats", "1", "--modes",
                            "ctc_prefix_beam_search_lm", "--lm", binary.path], capture_output=True, text=True,
                           timeout=300, cwd=ROOT)
    err = bench.stderr.strip().splitlines()
    assert bench.returncode == 2 and err[-1].startswith("decode_speed.py: error: ") and expected in err[-1], err


@pytest.mark.parametrize("new", ["QQQQ", "ab"])
def test_a_words_file_edited_by_hand_is_refused_naming_it(tmp_path, lm, new):
    """issue 80 case 4: lm.bin and lm.bin.words copied, one word's line replaced (by a new word, or by one already
    in the file) and the first line kept: read with a "cannot be spelled ... left out" warning, and the word was
    never output. The first line records the words' SHA-256, checked at every read."""
    _, binary = lm
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "lm.bin").write_bytes(Path(binary.path).read_bytes())
    lines = (tmp_path / "lm.bin.words").read_text().split("\n")
    lines[lines.index("aab")] = new
    (copy / "lm.bin.words").write_text("\n".join(lines))
    with pytest.raises(LmError) as e:
        read_lm(str(copy / "lm.bin"))
    msg = str(e.value)
    assert msg.startswith(f"{copy / 'lm.bin.words'}: its words were changed after they were written")
    assert "\n" not in msg
    assert f"binarize_lm --arpa LM.arpa --out {copy / 'lm.bin'}" in msg
    (tmp_path / "text").write_text("utt0 ab ba\n")
    with pytest.raises(LmError, match="lm.bin.words: its words were changed"):
        check_lm.main(["--lm", str(copy / "lm.bin"), "--text", str(tmp_path / "text")])
    (copy / "lm.bin.words").write_bytes((tmp_path / "lm.bin.words").read_bytes())  # the words as written: whole
    assert read_lm(str(copy / "lm.bin")).words == binary.words


def test_a_words_file_whose_words_were_not_hashed_is_refused_with_the_command_that_rewrites_it(tmp_path, lm):
    """The first line of a words file written before the words' SHA-256 (issue 66's binding) names the binary only."""
    arpa, binary = lm
    words = tmp_path / "lm.bin.words"
    first, rest = words.read_text().split("\n", 1)
    words.write_text(first.rsplit(" words_sha256=", 1)[0] + "\n" + rest)
    with pytest.raises(LmError) as e:
        read_lm(binary.path)
    msg = str(e.value)
    assert msg.startswith(f"{words} records no SHA-256 of its words") and "older wenet_udps" in msg
    assert msg.endswith(f"python -m wenet_udps.bin.binarize_lm --arpa {arpa.path} --out {binary.path}")
