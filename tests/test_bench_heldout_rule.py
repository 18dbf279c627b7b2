"""bench/heldout_rule.py counts, over a made-up book tree, the held-out sentences that the held-out check's window
refuses and those a global rule would: sentences split at blank lines and after .!?;:, normalised as LM text."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAR = "\n\n".join(f"Filler number {w} goes here." for w in ("one", "two", "three", "four", "five", "six", "seven"))


def run_bench(*args):
    return subprocess.run([sys.executable, "-m", "bench.heldout_rule", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def make_tree(tmp_path):
    books = tmp_path / "books"
    (books / "Author, An").mkdir(parents=True)
    # MOTHER CAT WHITE EAT FATHER: its parts seven sentences apart, the first at a sentence start, the last at an end
    (books / "Author, An" / "a.txt").write_text(
        f"Mother, cat white eat!\n\n{FAR}\n\nWhite eat father.\nThen the dog ran home quickly; nothing\nelse: "
        "alpha beta gamma. Delta epsilon\n\nzeta eta.\nKappa\nlambda mu?\n", encoding="utf-8")
    (books / "b.txt").write_text("The dog sat.\n", encoding="utf-8")
    (books / "notes.md").write_text("Mother cat white eat father.\n", encoding="utf-8")  # not a .txt: not read
    text = tmp_path / "text"
    text.write_text("u1 MOTHER CAT WHITE EAT FATHER\nu2 THE DOG RAN HOME\nu3 ALPHA BETA GAMMA\nu4 ZETA ETA\n"
                    "u5 LAMBDA MU\nu6 THE DOG RAN HOME\nu7 NOWHERE IN THE BOOKS\n", encoding="utf-8")
    return books, text


def test_the_window_and_the_global_rule_are_counted_at_each_order(tmp_path):
    books, text = make_tree(tmp_path)
    proc = run_bench("--books", str(books), "--text", str(text), "--orders", "3", "4")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # a.txt: 1 + 7 filler + 1 + 3 (split at ';' and ':') + 2 (the blank line) + 1 (KAPPA LAMBDA MU, one paragraph
    # over two lines), and b.txt's one; of 4 + 35 + 3 + 6 + 2 + 3 + 2 + 2 + 3 and 3 words
    assert "books: 2 under" in out and "16 sentences, 63 words" in out, out
    assert "held out: 6 distinct sentences" in out, out
    # order 3: the window check refuses the sentence inside a line (u2) and the whole lines (u3, u4); the global rule
    # the whole lines and u1, spread over lines far apart (its <s> and </s> trigrams at their start and end), not u2
    # (no line starts with THE DOG RAN); LAMBDA MU is inside a line (no blank line split the paragraph)
    assert "order 3: the window check refuses 3, the global rule 3, both 2" in out, out
    assert "window: 'THE DOG RAN HOME' (4 words, " in out and f"{text}:2)" in out, out
    assert "global: 'MOTHER CAT WHITE EAT FATHER' (5 words, " in out, out
    # order 4: CAT WHITE EAT FATHER is nowhere; u2 holds no 4-gram but itself, inside a longer line: refused whole
    assert "order 4: the window check refuses 3, the global rule 2, both 2" in out, out
    assert "ZETA ETA" in out and "LAMBDA MU" not in out and "NOWHERE" not in out


def test_a_folder_without_books_is_one_line(tmp_path):
    text = tmp_path / "text"
    text.write_text("u1 A B C\n", encoding="utf-8")
    proc = run_bench("--books", str(tmp_path), "--text", str(text))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"heldout_rule.py: error: --books {tmp_path}: no .txt file under it", proc.stderr
