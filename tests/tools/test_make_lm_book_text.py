"""tools/make_lm_book_text.py: Project Gutenberg text in LibriSpeech's transcript form, the held-out speakers' books and
sentences left out, from a tiny git tree of books and a tiny LibriSpeech tree made here."""
import subprocess
from pathlib import Path

import pytest

from tests.tools.load import load_tool
from wenet_udps.utils import cli

tool = load_tool("make_lm_book_text")


@pytest.mark.parametrize("sentence,expected", [
    ("Mr. Smith said, \u201cIt\u2019s the boys\u2019 toys.\u201d", "MISTER SMITH SAID IT'S THE BOYS' TOYS"),
    ("Mrs Brown went to St. Paul's, etc.", "MISSUS BROWN WENT TO SAINT PAUL'S ET CETERA"),
    ("The caf\u00e9 was na\u00efve\u2014and 'so' was she & he.", "THE CAFE WAS NAIVE AND SO WAS SHE AND HE"),
    ("well-known fellow_travellers", "WELL KNOWN FELLOW TRAVELLERS"),
    ("He had 3 dogs.", None),              # numbers are not spelled out: dropped
    ("CHAPTER THE FIRST", None),           # no lower-case letter: a heading
    ("Yes.", None),                        # under 2 words
    ("The old m\u0430n walked home.", None),  # a Cyrillic look-alike (issue 66 D: dropped from MAN, not the line)
    ("He read \u03bb\u03cc\u03b3\u03bf\u03c2 aloud.", None),  # Greek letters: not a LibriSpeech transcript
    ("\uff34he \uff43at ran", "THE CAT RAN"),  # fullwidth letters are their Latin letters (NFKD)
])
def test_normalise(sentence, expected):
    assert tool.normalise(sentence) == expected


def test_sentences_do_not_end_after_abbreviations_or_initials():
    text = "He met Mr. Brown. Then J. R. Smith left! Did I. go?\n\nA new paragraph\nover two lines."
    assert list(tool.sentences(text)) == ["He met Mr. Brown.", "Then J. R. Smith left!", "Did I.", "go?",
                                          "A new paragraph over two lines."]


def test_body_between_the_markers():
    raw = ("header\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\nthe text\n"
           "*** END OF THE PROJECT GUTENBERG EBOOK X\nlicence")
    assert tool.body(raw).strip() == "the text"
    assert tool.body("*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*\nold text").strip() == "old text"
    assert tool.body("no markers at all") is None


def book(pg_id: int, title: str, text: str, language: str = "English") -> str:
    return (f"Title: {title}\nLanguage: {language}\n\nRelease Date: 2004 [EBook #{pg_id}]\n\n"
            f"*** START OF THIS PROJECT GUTENBERG EBOOK ***\n\n{text}\n\n*** END OF THIS PROJECT GUTENBERG EBOOK ***\n")


HELD_SENTENCE = "THE HELD OUT SPEAKER READ THIS VERY SENTENCE ALOUD ONE EVENING"
TRAIN_SENTENCE = "A TRAINING SPEAKER READ THESE ELEVEN WORDS FROM A KEPT BOOK TODAY"


def make_trees(tmp: Path):
    """(git dir of books, LibriSpeech dir): speaker 19 (dev) reads PG 100, 4680 (test) PG 200, 2000 (train) PG 300;
    PG 400 is a dev-clean book."""
    ls = tmp / "LibriSpeech"
    ls.mkdir()
    (ls / "CHAPTERS.TXT").write_text(
        ";ID    |READER|MINUTES| SUBSET           | PROJ.|BOOK ID| CH. TITLE | PROJECT TITLE\n"
        "198    | 19   | 12.0  | train-clean-100  | 1    | 100   | Ch 1 | Held Dev Book\n"
        "16042  | 4680 | 12.0  | train-clean-100  | 2    | 200   | Ch 1 | Held Test Book\n"
        "5000   | 2000 | 12.0  | train-clean-100  | 3    | 300   | Ch 1 | Training Book\n"
        "6000   | 3000 | 12.0  | dev-clean        | 4    | 400   | Ch 1 | Some Dev Clean Book\n")
    for spk, chapter, sentence in (("19", "198", HELD_SENTENCE), ("4680", "16042", "ANOTHER HELD SENTENCE HERE"),
                                   ("2000", "5000", TRAIN_SENTENCE)):
        d = ls / "train-clean-5" / spk / chapter
        d.mkdir(parents=True)
        (d / f"{spk}-{chapter}.trans.txt").write_text(f"{spk}-{chapter}-0000 {sentence}\n")
    kept = ("It was a dark night. The wind blew hard over the hills and the moor all night long. "
            f"{HELD_SENTENCE.capitalize()}. {TRAIN_SENTENCE.capitalize()}.")
    files = {
        "A/kept.txt": book(300, "Training Book", kept),
        "B/kept copy.txt": book(300, "Training Book", kept),                     # the same blob again
        "A/other edition.txt": book(300, "Training Book, Illustrated", "Other text here."),  # same PG id
        "A/held dev.txt": book(100, "Held Dev Book", "Never written, dev."),     # the dev speaker's book
        "A/dev clean.txt": book(400, "Some Dev Clean Book", "Never written, dev clean."),
        "A/title match.txt": book(999, "Some Dev Clean Book", "Never written, same title."),
        "A/misérables.txt": book(48731, "Les Mis\u00e9rables, v. 1/5: Fantine", "Never written, a volume."),
        "A/french.txt": book(500, "Un Livre", "Jamais \u00e9crit ici.", language="French"),
        "A/no start.txt": "Title: Odd\n\nno markers in this file.\n",
        "C/repeats.txt": book(600, "Repeats", "The wind blew hard over the hills and the moor all night long. "
                                              "Short one here."),
    }
    work = tmp / "books"
    for path, text in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text, encoding="utf-8")
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "books"], check=True)
    return work / ".git", ls


def test_tree_to_books_and_manifest(tmp_path, capsys):
    git_dir, ls = make_trees(tmp_path)
    out = tmp_path / "out"
    assert tool.main(["--git_dir", str(git_dir), "--librispeech", str(ls), "--out_dir", str(out),
                      "--ngram_check", "10"]) == 0
    assert (out / "books.txt").read_text().splitlines() == [
        "IT WAS A DARK NIGHT", "THE WIND BLEW HARD OVER THE HILLS AND THE MOOR ALL NIGHT LONG", TRAIN_SENTENCE,
        "SHORT ONE HERE"]   # the held-out sentence is not written; the long sentence is not written twice
    rows = {r.split("\t")[0]: r.split("\t") for r in (out / "manifest.tsv").read_text().splitlines()[1:]}
    status = {path: row[4] for path, row in rows.items()}
    assert status["A/kept.txt"] == "kept" and rows["A/kept.txt"][5] == "3"
    assert status["B/kept copy.txt"] == "duplicate file of A/kept.txt"
    assert status["A/other edition.txt"] == "duplicate PG id of A/kept.txt"
    assert status["A/held dev.txt"] == "excluded: PG 100 = held-out dev speaker 19, chapter 198"
    assert status["A/dev clean.txt"] == "excluded: PG 400 = LibriSpeech dev-clean"
    assert status["A/title match.txt"] == "excluded: title of PG 400 (LibriSpeech dev-clean)"
    assert status["A/misérables.txt"].startswith("excluded: title of PG 135")
    assert status["A/french.txt"] == "not English (French)"
    assert status["A/no start.txt"] == "no START marker"
    printed = capsys.readouterr().out
    assert "sentences that are or hold a held-out transcript (not written): 1" in printed
    assert "repeated sentences of >= 8 words: 1" in printed
    assert "speaker    19   dev: 0 / 2 = 0.0 %" in printed      # its sentence was left out
    assert "speaker  2000 train: 3 / 3 = 100.0 %" in printed    # a training speaker's book is in the text


def test_missing_chapters_file_names_it(tmp_path):
    with pytest.raises(cli.UserError, match=f"{tmp_path}/CHAPTERS.TXT not found"):
        tool.main(["--git_dir", str(tmp_path), "--librispeech", str(tmp_path), "--out_dir", str(tmp_path / "o")])
    assert not (tmp_path / "o" / "books.txt").exists()
