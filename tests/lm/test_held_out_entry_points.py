"""The LM's held-out check exists once (wenet_udps.lm.held_out) and every entry point goes through it: a test
sentence written with punctuation (S5), behind a byte-order mark (S6) or among more words (S7), in fullwidth letters,
with a zero-width space or a Cyrillic look-alike letter, and a 6-word (AN4-like) test sentence and a 2-word dev
sentence inside longer lines (issue 66 D: refused when a line holds every n-gram of one at the LM's order) are
refused by ``bin.build_lm``, by run.sh stage 2 (--lm true --lm_text, which passes the dev and the test texts) and
left out by ``tools/make_lm_book_text.py``; a non-UTF-8 LM text is one line through run.sh too (T1).
``bin.check_lm`` takes no LM text: its dev text goes through the same reader (tests/bin/test_build_lm.py
``test_t1_check_lm_names_a_non_utf8_text``)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lm.lm_helpers import need_build_binary, need_flashlight, need_lmplz
from tests.tools.load import load_tool

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "THE OLD MAN WALKED SLOWLY HOME ALONG THE RIVER"
AN4 = "ENTER SIX TWO FOUR ONE NINE"
SPLIT = "MOTHER CAT WHITE EAT FATHER"  # issue 80 case 6: its n-grams over two lines
FULLWIDTH = "".join(chr(ord(c) + 0xFEE0) if c != " " else c for c in SENTENCE)
ZERO_WIDTH = SENTENCE.replace("WALKED", "WAL\u200bKED")
LOOK_ALIKE = SENTENCE.replace("MAN", "M\u0410N")  # a Cyrillic capital A
LEAKS = {  # issue case -> (LM text, its line holding the held-out sentence, what the refusal names)
    "S5": (f"a line of text\n{SENTENCE.lower()}.\n", 2, ("held-out sentence", "test/text:2")),
    "S6": (f"\ufeff{SENTENCE}\na line of text\n", 1, ("held-out sentence", "test/text:2")),
    "S7": (f"a line of text\nand {SENTENCE.lower()} after dark\n", 2, ("held-out sentence", "test/text:2")),
    "fullwidth": (f"a line of text\n{FULLWIDTH}\n", 2, ("is the held-out sentence", "test/text:2")),
    "zero-width space": (f"a line of text\n{ZERO_WIDTH}\n", 2, ("is the held-out sentence", "test/text:2")),
    "Cyrillic look-alike": (f"a line of text\n{LOOK_ALIKE}\n", 2,
                            ("'А' (U+0410 CYRILLIC CAPITAL LETTER A)", "none of the recipe's scripts (LATIN")),
    "6 words in a line": (f"a line of text\nplease {AN4.lower()} now and then stop\n", 2,
                          ("holds every", "held-out sentence", "test/text:3")),
    "dev sentence in a line": ("a line of text\nthere was a cat on the wall\n", 2,
                               ("holds every", "held-out sentence", "dev/text:2")),
    "across a line break": ("a line of text\nmother cat white eat\nwhite eat father\n", "2-3",
                            ("across their line breaks", "held-out sentence", "test/text:4")),
}


def write_data(data: Path) -> None:
    for split, lines in (("train", ["a1 THE CAT SAT", "a2 A DOG RAN HOME"]), ("dev", ["d1 YES", "d2 A CAT"]),
                         ("test", ["t1 NO", f"t2 {SENTENCE}", f"t3 {AN4}", f"t4 {SPLIT}"])):
        (data / split).mkdir(parents=True)
        (data / split / "text").write_text("".join(f"{line}\n" for line in lines))


def last_line(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and lines, proc.stderr[-2000:]
    return lines[-1]


@pytest.mark.parametrize("case", sorted(LEAKS))
def test_build_lm(tmp_path, case):
    """build_lm at its default order 3 (a 2-word dev sentence is refused only as a whole line there)."""
    write_data(tmp_path)
    books, at, named = LEAKS[case]
    (tmp_path / "books.txt").write_text(books, encoding="utf-8")
    order = ["--order", "2"] if case == "dev sentence in a line" else []
    proc = subprocess.run([sys.executable, "-m", "wenet_udps.bin.build_lm", "--text", str(tmp_path / "train/text"),
                           "--lm_text", str(tmp_path / "books.txt"), "--held_out", str(tmp_path / "dev/text"),
                           "--held_out", str(tmp_path / "test/text"), "--punctuation", "keep", *order,
                           "--out", str(tmp_path / "lm.arpa")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = last_line(proc)
    assert f"books.txt:{at}" in line and all(n in line for n in named), line
    assert not (tmp_path / "lm.arpa").exists()


def test_build_lm_without_held_out_texts_says_no_check_ran(tmp_path):
    """Issue 66 D: build_lm --lm_text T without --held_out built from a test sentence and did not say that no
    check ran."""
    need_lmplz()
    write_data(tmp_path)
    (tmp_path / "books.txt").write_text(f"{SENTENCE}\n")
    proc = subprocess.run([sys.executable, "-m", "wenet_udps.bin.build_lm", "--text", str(tmp_path / "train/text"),
                           "--lm_text", str(tmp_path / "books.txt"), "--out", str(tmp_path / "lm.arpa")],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = [line for line in proc.stdout.splitlines() if "held-out" in line]
    assert said == ["note: no held-out check ran (no --held_out): nothing stops a dev or test sentence in the LM "
                    "text; pass the dev and test texts, as run.sh does"], proc.stdout


def run_stage2(tmp_path, books: bytes, *extra):
    need_lmplz()
    need_build_binary()
    need_flashlight()
    write_data(tmp_path / "data")
    (tmp_path / "books.txt").write_bytes(books if isinstance(books, bytes) else books.encode())
    return subprocess.run(["bash", str(ROOT / "run.sh"), "--corpus", "an4", "--stage", "2", "--stop_stage", "2",
                           "--data", str(tmp_path / "data"), "--token_type", "char", "--lm", "true", "--lm_order", "2",
                           "--lm_text", str(tmp_path / "books.txt"), *extra], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


# run.sh stage 2 runs build_lm (about 14 s a run): the cases that need run.sh's part, its dev and test texts, its
# --lm_order (2 here) and its training text (the recipe's script), beside issue 57's.
@pytest.mark.parametrize("case", ["S5", "S6", "S7", "Cyrillic look-alike", "dev sentence in a line",
                                  "across a line break"])
def test_run_sh_stage2(tmp_path, case):
    """run.sh stage 2 (a 2-gram LM here) passes its dev and its test texts to the check."""
    books, at, named = LEAKS[case]
    line = last_line(run_stage2(tmp_path, books, "--text_punctuation", "keep"))
    assert f"books.txt:{at}" in line and all(n in line for n in named), line
    assert not (tmp_path / "data" / "lm" / "lm.arpa").exists()


def test_run_sh_stage2_refuses_undeclared_punctuation_and_non_utf8_in_one_line(tmp_path):
    line = last_line(run_stage2(tmp_path, LEAKS["S5"][0]))
    assert "books.txt:2 '.'" in line and "--text_punctuation" in line
    line = last_line(run_stage2(tmp_path / "t1", b"the cat\ncaf\xe9 au lait\n"))
    assert "books.txt:2: not UTF-8" in line and "Traceback" not in line


def test_make_lm_book_text(tmp_path):
    book_tool = load_tool("make_lm_book_text")
    from tests.tools.test_make_lm_book_text import book
    ls = tmp_path / "LibriSpeech"
    (ls / "train-clean-5" / "4680" / "16042").mkdir(parents=True)
    (ls / "CHAPTERS.TXT").write_text("16042  | 4680 | 12.0  | train-clean-100  | 2    | 200   | Ch 1 | Held Book\n")
    # the held-out speaker's transcripts, behind a byte-order mark (S6)
    (ls / "train-clean-5" / "4680" / "16042" / "4680-16042.trans.txt").write_text(
        f"\ufeff4680-16042-0000 {SENTENCE}\n4680-16042-0001 {AN4}\n4680-16042-0002 {SPLIT}\n", encoding="utf-8")
    work = tmp_path / "books"
    work.mkdir()
    # another book holding the sentence among more words (S7), with punctuation (S5), in fullwidth letters, with a
    # zero-width space, with a Cyrillic look-alike, and the 6-word sentence among more words
    variants = [f"And then, {SENTENCE.lower()} after dark, alone.", f"{FULLWIDTH.capitalize()}.",
                f"{ZERO_WIDTH.capitalize()}.", f"{LOOK_ALIKE.capitalize()}.",
                f"Please {AN4.lower()} now and then stop.", "Mother cat white eat.", "White eat father."]
    (work / "kept.txt").write_text(book(300, "Training Book", f"It was a dark night. {' '.join(variants)} "
                                                              "The wind blew hard."))
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "books"], check=True)
    assert book_tool.main(["--git_dir", str(work / ".git"), "--librispeech", str(ls), "--out_dir",
                           str(tmp_path / "out"), "--dev_speakers", "", "--test_speakers", "4680"]) == 0
    # the split sentence's second half completes its n-grams across the line break: left out
    assert (tmp_path / "out" / "books.txt").read_text().splitlines() == ["IT WAS A DARK NIGHT", "MOTHER CAT WHITE EAT",
                                                                         "THE WIND BLEW HARD"]


def test_every_module_making_a_held_out_check_reads_the_lm_text_across_line_breaks():
    """Guard of issue 80 H: every module of wenet_udps/, tools/ and bench/ that makes a HeldOut check either
    refuses through HeldOut.refuse (the line rule, then the stream) or, checking line by line with find, feeds the
    lines it keeps to HeldOut.stream."""
    import ast
    users = {}
    for top in ("wenet_udps", "tools", "bench"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.name == "held_out.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
            names = {c.func.id if isinstance(c.func, ast.Name) else getattr(c.func, "attr", "") for c in calls}
            if "HeldOut" not in names:
                continue
            streams = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
                       and isinstance(node.value, ast.Call) and getattr(node.value.func, "attr", "") == "stream"
                       for t in node.targets if isinstance(t, ast.Name)}
            fed = any(isinstance(c.func, ast.Attribute) and c.func.attr == "add" and
                      isinstance(c.func.value, ast.Name) and c.func.value.id in streams for c in calls)
            users[str(path.relative_to(ROOT))] = "refuse" in names or fed
    assert {"wenet_udps/bin/build_lm.py", "tools/make_lm_book_text.py"} <= set(users), users
    bad = [p for p, across in users.items() if not across]
    assert not bad, f"these check LM text line by line only, not across line breaks: {bad}"
