"""build_lm refuses a held-out sentence in extra LM text in one line; the transcripts may hold one (counted)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lm.lm_helpers import need_lmplz


ROOT = Path(__file__).resolve().parents[2]


def run_lm(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "wenet_udps.bin.build_lm", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_build_refuses_a_dev_sentence_in_lm_text_in_one_line(tmp_path):
    (tmp_path / "train").write_text("a1 the cat sat\n")
    (tmp_path / "books").write_text("the cat sat\na dog ran\n")
    (tmp_path / "dev").write_text("d1 A DOG RAN\n")
    proc = run_lm("--text", str(tmp_path / "train"), "--lm_text", str(tmp_path / "books"),
                  "--held_out", str(tmp_path / "dev"), "--out", str(tmp_path / "lm.arpa"))
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert f"{tmp_path / 'books'}:2" in lines[0] and f"{tmp_path / 'dev'}:1" in lines[0]
    assert not (tmp_path / "lm.arpa").exists()


def test_transcripts_holding_a_dev_sentence_build_and_say_how_many(tmp_path):
    # A corpus whose speakers read the same prompts (AN4) has dev sentences among its training transcripts.
    need_lmplz()
    (tmp_path / "train").write_text("a1 the cat sat\na2 a dog ran\na3 yes\na4 a dog ran\n")
    (tmp_path / "dev").write_text("d1 A DOG RAN\nd2 NO\n")
    proc = run_lm("--text", str(tmp_path / "train"), "--held_out", str(tmp_path / "dev"),
                  "--out", str(tmp_path / "lm.arpa"))
    assert proc.returncode == 0, proc.stderr
    assert "note: 2 transcript line(s) are or hold dev/test sentences" in proc.stdout
    assert f"{tmp_path / 'train'}:2 = {tmp_path / 'dev'}:1" in proc.stdout
    assert "\\1-grams:" in (tmp_path / "lm.arpa").read_text()


def test_a_held_out_text_given_as_transcripts_is_refused(tmp_path):
    """The attack on issue 80's H: the test text passed as --text (beside the training text) built an LM of the test
    sentences with only the note above, which said they were kept because the acoustic model trained on them.
    A transcript with a held-out utterance's key is that utterance: refused, naming both files."""
    (tmp_path / "train").write_text("a1 the cat sat\n")
    (tmp_path / "test").write_text("t1 A DOG RAN\nt2 NO\n")
    proc = run_lm("--text", str(tmp_path / "train"), "--text", str(tmp_path / "test"),
                  "--held_out", str(tmp_path / "test"), "--out", str(tmp_path / "lm.arpa"))
    line = one_error_line(proc)
    assert f"--text {tmp_path / 'test'}: 2 of its 2 utterances are in --held_out {tmp_path / 'test'} (e.g. t1)" in line
    assert not (tmp_path / "lm.arpa").exists()


def one_error_line(proc):
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    return lines[0]


def test_s3_lm_words_are_spelt_as_the_recipe_declares(tmp_path):
    # BPE units are upper case: an LM keeping "Zero," and "zero" would split ZERO's probability over its spellings
    need_lmplz()
    from wenet_udps.lm.arpa import read_arpa
    (tmp_path / "train").write_text("a1 ZERO ONE\na2 TWO ZERO\n")
    (tmp_path / "books").write_text("Zero, one.\n\"zero\" two\nzero ONE two\n")
    proc = run_lm("--text", str(tmp_path / "train"), "--lm_text", str(tmp_path / "books"), "--case", "upper",
                  "--punctuation", "remove", "--out", str(tmp_path / "lm.arpa"))
    assert proc.returncode == 0, proc.stderr
    assert set(read_arpa(str(tmp_path / "lm.arpa")).words) == {"<s>", "</s>", "<unk>", "ZERO", "ONE", "TWO"}
    assert f"{tmp_path / 'books'} normalised (case upper, punctuation remove): 3 lines: case changed on 3, " \
           "4 punctuation marks removed from 2" in proc.stdout
    # undeclared, the punctuation is an error naming the LM text's lines, before anything is built
    line = one_error_line(run_lm("--text", str(tmp_path / "train"), "--lm_text", str(tmp_path / "books"),
                                 "--out", str(tmp_path / "lm2.arpa")))
    assert f"{tmp_path / 'books'}:1 ','" in line and f"{tmp_path / 'books'}:2 '\"'" in line
    assert not (tmp_path / "lm2.arpa").exists()


LEAKS = [  # (issue case, LM text bytes): each holds the test sentence "THE OLD MAN WALKED SLOWLY HOME ALONG THE RIVER"
    ("S5", b"a line of text\nthe old man walked slowly home along the river.\n"),
    ("S6", "\ufeffTHE OLD MAN WALKED SLOWLY HOME ALONG THE RIVER\na line of text\n".encode()),
    ("S7", b"a line of text\nand the old man walked slowly home along the river after dark\n"),
]


@pytest.mark.parametrize("case,books", LEAKS, ids=[c for c, _ in LEAKS])
def test_a_held_out_sentence_is_refused_however_it_is_written(tmp_path, case, books):
    (tmp_path / "train").write_text("a1 the cat sat\n")
    (tmp_path / "books").write_bytes(books)
    (tmp_path / "test").write_text("t1 YES\nt2 THE OLD MAN WALKED SLOWLY HOME ALONG THE RIVER\n")
    line = one_error_line(run_lm("--text", str(tmp_path / "train"), "--lm_text", str(tmp_path / "books"),
                                 "--held_out", str(tmp_path / "test"), "--punctuation", "keep",
                                 "--out", str(tmp_path / "lm.arpa")))
    assert "held-out sentence" in line and f"{tmp_path / 'test'}:2" in line
    assert f"{tmp_path / 'books'}:{2 if case != 'S6' else 1}" in line
    assert not (tmp_path / "lm.arpa").exists()


@pytest.mark.parametrize("which", ["--text", "--lm_text", "--held_out"])
def test_t1_non_utf8_text_is_one_line_naming_the_file_and_line(tmp_path, which):
    files = {"--text": "a1 the cat sat\na2 a dog ran\n", "--lm_text": "the dog sat\nthe cat ran\n",
             "--held_out": "d1 A DOG SAT\nd2 NO\n"}
    args = []
    for option, text in files.items():
        (tmp_path / option[2:]).write_bytes(text.encode() if option != which else text.encode() + b"caf\xe9\n")
        args += [option, str(tmp_path / option[2:])]
    line = one_error_line(run_lm(*args, "--out", str(tmp_path / "lm.arpa")))
    assert f"{tmp_path / which[2:]}:3: not UTF-8" in line and "Traceback" not in line


def test_t1_check_lm_names_a_non_utf8_text(tmp_path):
    need_lmplz()
    from wenet_udps.lm.build import build_arpa
    build_arpa(["the cat sat", "a dog ran"], str(tmp_path / "lm.arpa"), order=2)
    (tmp_path / "dev").write_bytes(b"d1 the cat\nd2 caf\xe9\n")
    proc = subprocess.run([sys.executable, "-m", "wenet_udps.bin.check_lm", "--lm", str(tmp_path / "lm.arpa"),
                           "--text", str(tmp_path / "dev")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert f"{tmp_path / 'dev'}:2: not UTF-8" in one_error_line(proc)


@pytest.mark.parametrize("content", [b"", b"\n  \n", "\ufeff\n".encode()])
def test_m4_an_empty_lm_text_is_refused(tmp_path, content):
    (tmp_path / "train").write_text("a1 the cat sat\n")
    (tmp_path / "books").write_bytes(content)
    line = one_error_line(run_lm("--text", str(tmp_path / "train"), "--lm_text", str(tmp_path / "books"),
                                 "--out", str(tmp_path / "lm.arpa")))
    assert f"{tmp_path / 'books'}: the LM text holds no sentence" in line
    assert not (tmp_path / "lm.arpa").exists()
