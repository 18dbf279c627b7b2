#!/usr/bin/env python3
"""Book text for a LibriSpeech word LM: Project Gutenberg prose written like LibriSpeech transcripts, with every book
that a dev or test speaker reads left out (as OpenSLR 11's librispeech-lm-norm.txt leaves them out).

    python tools/make_lm_book_text.py --git_dir GUTENBERG.git --librispeech DIR/LibriSpeech --out_dir OUT \
        [--dev_speakers "19 2136"] [--test_speakers "4680 1867"] [--lm_order 3] [--ngram_check 10]

GUTENBERG.git: a git repository of Project Gutenberg ``.txt`` files (docs/lm.md names the one used here, from GitHub;
OpenSLR 11's text is not reachable from this project's machine). Every ``.txt`` file at HEAD is read in ``git ls-tree``
order and left out when it is a copy already read (same blob or PG id), a book of LibriSpeech's dev/test sets or of the
held-out speakers (by PG id from ``CHAPTERS.TXT``, by title, or as a listed other edition), not English, or without a
Project Gutenberg START marker. The text between the START and END markers is split into sentences (not after
Mr./Dr./... or an initial); a sentence with a digit (numbers are not spelled out) or a letter of another script
than Latin, without a lower-case letter (a heading) or of fewer than 2 words is dropped; the rest is upper-cased to
A-Z, apostrophe and space, abbreviations spelt out as LibriSpeech's transcripts spell them. A sentence of 8 or more
words written before (another edition's copy) and a sentence that is, or holds every --lm_order-gram of, a held-out
transcript (the LM's one held-out check, wenet_udps.lm.held_out) are not written.

Writes OUT/books.txt (one sentence a line) and OUT/manifest.tsv (each file: PG id, title, what became of it, lines
written); prints the counts. ``--ngram_check N`` then prints, per speaker, the share of the transcripts' word N-grams
found inside a books.txt line: held-out speakers should be near 0. ``run.sh --lm true --lm_text OUT/books.txt``
builds the LM (refusing any dev or test sentence once more).
"""
import argparse
import hashlib
import re
import subprocess
import tempfile
import unicodedata
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

from wenet_udps.lm.held_out import HeldOut
from wenet_udps.lm.options import DEFAULT_ORDER
from wenet_udps.utils import cli
from wenet_udps.utils.atomic import open_atomic
from wenet_udps.utils.text_norm import foreign_letter

# Abbreviations that LibriSpeech transcripts spell out (MISTER, MISSUS, DOCTOR, SAINT, MADAME ... in train-clean-5).
ABBREV = {
    "MR": "MISTER", "MRS": "MISSUS", "DR": "DOCTOR", "ST": "SAINT", "MESSRS": "MESSIEURS", "MME": "MADAME",
    "MLLE": "MADEMOISELLE", "CAPT": "CAPTAIN", "COL": "COLONEL", "GEN": "GENERAL", "LIEUT": "LIEUTENANT",
    "LT": "LIEUTENANT", "SGT": "SERGEANT", "REV": "REVEREND", "HON": "HONOURABLE", "PROF": "PROFESSOR",
    "GOV": "GOVERNOR", "JR": "JUNIOR", "SR": "SENIOR", "ETC": "ET CETERA", "VS": "VERSUS", "MT": "MOUNT",
}
NO_SPLIT_AFTER = set(ABBREV) | {"I.E", "E.G", "VIZ", "CF", "VOL", "CHAP", "FIG"}
# Other PG editions, parts or adaptations of an excluded book in rcdm-uga/Gutenberg_Text (a0b16d35), found by
# comparing its titles with the excluded books' titles and reviewed one by one (docs/lm.md); PG id -> excluded id.
OTHER_EDITIONS = {
    "996": "5921", "55106": "5921", "24754": "5921", **{str(i): "5921" for i in range(5903, 5921)},
    **{str(i): "5946" for i in range(5922, 5946)},  # Don Quixote: complete, retold, quotations, parts
    **{str(i): "1004" for i in (*range(1001, 1004), *range(1005, 1009), *range(1995, 1998), *range(8779, 8800),
                                41537)},  # Divine Comedy: other translations and parts
    "1200": "8166",  # Gargantua and Pantagruel, complete
    "32325": "76", **{str(i): "76" for i in range(7100, 7108)},  # Huckleberry Finn: illustrated, parts
    **{str(i): "3178" for i in range(5818, 5825)},  # The Gilded Age, parts
    "5998": "4964", "4966": "4964",  # Waverley, complete
    "32094": "955",  # The Patchwork Girl of Oz
    "35688": "11", "19002": "11",  # Alice: dramatisation, Under Ground
    "42486": "209",  # The Two Magics holds The Turn of the Screw
    "43302": "4602", "43372": "4602", "43409": "4602",  # The Kingdom of God Is Within You
}
# The body starts after "*** START OF THE/THIS PROJECT GUTENBERG ..." or, in old files, the "*END*THE SMALL PRINT" line.
START_RE = re.compile(r"^\s*(\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG|\*+ ?END.{0,3}THE SMALL PRINT).*$",
                      re.M | re.I)
END_RE = re.compile(r"^\s*(\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg)", re.M | re.I)
# A word of a title that marks an excluded book whose volumes' titles differ ("Les Miserables, v. 1/5: Fantine").
TITLE_WORDS = {"MISERABLES": "135"}
DEDUP_WORDS = 8  # a sentence this long seen before is another edition's copy (Complete vs Volume N files)
ID_RE = re.compile(r"\[(?:e-?book|etext)\s*#\s*(\d+)\]", re.I)
TITLE_RE = re.compile(r"^Title:\s*(.+)$", re.M)
LANG_RE = re.compile(r"^Language:\s*(.+)$", re.M)
SENT_END_RE = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]_]*\s+")
ABBREV_RE = re.compile(r"\b(?:(" + "|".join(sorted(ABBREV, key=len, reverse=True))
                       + r")\.|(MRS|MR|DR|MESSRS|MME|MLLE)\b)", re.I)
QUOTE_MAP = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'", "\u2014": " ", "\u2013": " ",
                           "-": " ", "_": " ", "&": " AND "})
KEEP_RE = re.compile(r"[^A-Z' ]+")


def norm_title(title: str) -> str:
    """Upper-case letters only, volume and book numbers dropped: to compare a PG title with a LibriVox title."""
    t = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode().upper()
    t = re.sub(r"\(VERSION \d+\)|\bVOL(UME)?\.? *\w+\b|\bBOOK \w+\b", " ", t)
    return " ".join(re.sub(r"[^A-Z ]", " ", t).split())


def excluded_books(librispeech: Path, held: Dict[str, str]) -> Dict[str, Tuple[str, str]]:
    """PG id -> (LibriVox title, why) of every book read in LibriSpeech's dev/test sets (CHAPTERS.TXT) and of the
    books the ``held`` speakers (speaker -> "dev"/"test") read in train-clean-5."""
    out: Dict[str, Tuple[str, str]] = {}
    for line in cli.regular_file(librispeech / "CHAPTERS.TXT").read_text(encoding="utf-8").splitlines():
        if line.startswith(";") or not line.strip():
            continue
        f = [x.strip() for x in line.split("|")]
        chapter, reader, subset, book, title = f[0], f[1], f[3], f[5], f[7]
        if subset.startswith(("dev", "test")):
            out.setdefault(book, (title, f"LibriSpeech {subset}"))
        elif reader in held and (librispeech / "train-clean-5" / reader / chapter).is_dir():
            out[book] = (title, f"held-out {held[reader]} speaker {reader}, chapter {chapter}")
    return out


def held_out_texts(librispeech: Path, speakers: List[str]) -> List[str]:
    """The transcript files of the held-out speakers' train-clean-5 utterances, and of dev-clean-2 when present."""
    dirs = [librispeech / "train-clean-5" / s for s in speakers] + [librispeech / "dev-clean-2"]
    return [str(f) for d in dirs if d.is_dir() for f in sorted(d.glob("**/*.trans.txt"))]


def body(raw: str) -> Optional[str]:
    """The text between the START and END markers (to the end without an END), None without a START marker."""
    start, end = START_RE.search(raw), END_RE.search(raw)
    if not start:
        return None
    return raw[start.end(): end.start() if end and end.start() > start.end() else len(raw)]


def sentences(text: str) -> Iterator[str]:
    """Paragraphs (blank-line separated) split into sentences; abbreviations and initials do not end one."""
    for para in re.split(r"\n\s*\n", text):
        para = " ".join(para.split())
        buf = ""
        for piece in SENT_END_RE.split(para) if para else []:
            buf = f"{buf} {piece}" if buf else piece
            last = re.sub(r"[^A-Za-z.]", "", buf.rsplit(" ", 1)[-1]).rstrip(".")
            if last.upper() in NO_SPLIT_AFTER or re.fullmatch(r"[A-HJ-Z]", last):  # initials, but "I." ends one
                continue
            yield buf
            buf = ""
        if buf:
            yield buf


def normalise(sentence: str) -> Optional[str]:
    """A sentence in LibriSpeech's transcript form, or None if it holds a digit or a letter of another script than
    Latin (a Cyrillic look-alike would be dropped from its word, and the rest of the sentence pass the held-out
    check), is a heading or is under 2 words."""
    if re.search(r"\d", sentence) or not re.search(r"[a-z]", sentence) or foreign_letter(sentence, ["LATIN"]):
        return None
    s = ABBREV_RE.sub(lambda m: " " + ABBREV[(m.group(1) or m.group(2)).upper()] + " ", sentence)
    s = unicodedata.normalize("NFKD", s.translate(QUOTE_MAP)).encode("ascii", "ignore").decode().upper()
    words = []
    for w in KEEP_RE.sub(" ", s).split():
        w = w.lstrip("'")
        w = w if w.endswith("S'") else w.rstrip("'")  # a possessive plural keeps its apostrophe
        if w and "''" not in w:
            words.append(w)
    return " ".join(words) if len(words) >= 2 else None


def verdict(raw: str, path: str, blob: str, seen_blob: Dict[str, str], seen_id: Dict[str, str],
            excluded: Dict[str, Tuple[str, str]], excluded_titles: Dict[str, str]) -> Tuple[str, str, str]:
    """(PG id, title, status) of one file: ``kept`` or why it is left out. Records the file as seen."""
    head = raw[:5000]
    m_id, m_title, m_lang = ID_RE.search(head), TITLE_RE.search(head), LANG_RE.search(head)
    pg_id = m_id.group(1) if m_id else ""
    title = m_title.group(1).strip() if m_title else ""
    lang = m_lang.group(1).strip() if m_lang else ""
    normed = norm_title(title)
    title_book = excluded_titles.get(normed) or next((b for w, b in TITLE_WORDS.items() if w in normed), None)
    if blob in seen_blob:
        status = f"duplicate file of {seen_blob[blob]}"
    elif pg_id and pg_id in seen_id:
        status = f"duplicate PG id of {seen_id[pg_id]}"
    elif pg_id in excluded:
        status = f"excluded: PG {pg_id} = {excluded[pg_id][1]}"
    elif pg_id in OTHER_EDITIONS and OTHER_EDITIONS[pg_id] in excluded:
        status = f"excluded: edition/part of PG {OTHER_EDITIONS[pg_id]} ({excluded[OTHER_EDITIONS[pg_id]][1]})"
    elif title_book:
        why = excluded[title_book][1] if title_book in excluded else "listed"
        status = f"excluded: title of PG {title_book} ({why})"
    elif lang and not lang.lower().startswith("english"):
        status = f"not English ({lang})"
    elif not START_RE.search(raw):
        status = "no START marker"
    else:
        status = "kept"
    seen_blob.setdefault(blob, path)
    if pg_id:
        seen_id.setdefault(pg_id, path)
    return pg_id, title, status


def git_files(git_dir: Path) -> Iterator[Tuple[str, str]]:
    """(path, blob id) of every ``.txt`` file at HEAD."""
    out = subprocess.run(["git", f"--git-dir={git_dir}", "ls-tree", "-r", "-z", "HEAD"], check=True,
                         capture_output=True).stdout.decode("utf-8")
    for rec in filter(None, out.split("\0")):
        meta, path = rec.split("\t", 1)
        if path.endswith(".txt"):
            yield path, meta.split()[2]


def make_books(git_dir: Path, librispeech: Path, out_dir: Path, held: Dict[str, str],
               lm_order: int = DEFAULT_ORDER) -> Counter:
    """Write out_dir/books.txt and manifest.tsv; return the counts. ``lm_order``: the order of the LM the text is
    for (the held-out check's containment rule)."""
    excluded = excluded_books(librispeech, held)
    excluded_titles = {norm_title(t): b for b, (t, _) in excluded.items() if len(norm_title(t).split()) >= 2}
    held_text = HeldOut(held_out_texts(librispeech, list(held)), order=lm_order)  # the LM's one held-out check
    written_text = held_text.stream()  # books.txt as one stream of words: a sentence across its line breaks
    seen_blob: Dict[str, str] = {}
    seen_id: Dict[str, str] = {}
    seen_sent: Set[int] = set()
    stats: Counter = Counter()
    cat = subprocess.Popen(["git", f"--git-dir={git_dir}", "cat-file", "--batch"], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open_atomic(out_dir / "books.txt", encoding="ascii") as out, \
            open_atomic(out_dir / "manifest.tsv") as manifest:
        manifest.write("path\tblob\tpg_id\ttitle\tstatus\tlines\n")
        for path, blob in git_files(git_dir):
            cat.stdin.write(blob.encode() + b"\n")
            cat.stdin.flush()
            header = cat.stdout.readline().split()
            if header[1] == b"missing":  # a shallow or partial copy may lack its largest blobs
                pg_id, title, status = "", "", "blob absent from the copy"
            else:
                raw = cat.stdout.read(int(header[2]) + 1)[:-1].decode("utf-8", "replace").replace("\r\n", "\n")
                pg_id, title, status = verdict(raw, path, blob, seen_blob, seen_id, excluded, excluded_titles)
            written = 0
            for sentence in sentences(body(raw)) if status == "kept" else []:
                s = normalise(sentence)
                if s is None:
                    stats["sentences dropped (digits, other scripts, heading, < 2 words)"] += 1
                    continue
                if s.count(" ") + 1 >= DEDUP_WORDS:
                    key = int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little")
                    if key in seen_sent:
                        stats[f"repeated sentences of >= {DEDUP_WORDS} words"] += 1
                        continue
                    seen_sent.add(key)
                if held_text.find(s) is not None:
                    stats["sentences that are or hold a held-out transcript (not written)"] += 1
                    continue
                if written_text.add(s) is not None:  # (added to the stream only when kept)
                    stats["sentences completing a held-out transcript across line breaks (not written)"] += 1
                    continue
                out.write(s + "\n")
                written += 1
                stats["words"] += s.count(" ") + 1
            stats["lines"] += written
            stats["files " + status.split(":")[0].split(" of ")[0].split(" (")[0]] += 1
            manifest.write("\t".join((path, blob, pg_id, title, status, str(written))).replace("\r", " ") + "\n")
    cat.stdin.close()
    cat.wait()
    return stats


def ngram_leaks(books: Path, librispeech: Path, n: int) -> Dict[str, Tuple[int, int]]:
    """speaker -> (word n-grams of its train-clean-5 transcripts found inside a line of ``books``, all of them)."""
    grams: Dict[str, Set[str]] = defaultdict(set)  # n-gram -> utterance ids
    for f in sorted(librispeech.glob("*/*/*/*.trans.txt")):
        for line in cli.regular_file(f).read_text(encoding="utf-8").splitlines():
            uid, _, text = line.partition(" ")
            w = text.split()
            for i in range(len(w) - n + 1):
                grams[" ".join(w[i:i + n])].add(uid)
    with tempfile.NamedTemporaryFile("w", suffix=".pat") as pat:
        pat.write("\n".join(grams) + "\n")
        pat.flush()  # grep -F finds the lines that hold any n-gram; their n-grams are then looked up
        lines = subprocess.run(["grep", "-w", "-F", "-f", pat.name, str(books)], capture_output=True,
                               text=True).stdout.splitlines()
    hit = set()
    for words in (line.split() for line in lines):
        hit.update(g for g in (" ".join(words[i:i + n]) for i in range(len(words) - n + 1)) if g in grams)
    per_speaker: Dict[str, List[int]] = defaultdict(lambda: [0, 0])
    for gram, uids in grams.items():
        for uid in uids:
            per_speaker[uid.split("-")[0]][0] += gram in hit
            per_speaker[uid.split("-")[0]][1] += 1
    return {s: (h, t) for s, (h, t) in per_speaker.items()}


def main(argv: Optional[List[str]] = None) -> int:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--git_dir", type=cli.existing_dir, required=True,
                        help="git repository of Project Gutenberg .txt files")
    parser.add_argument("--librispeech", type=cli.existing_dir, required=True,
                        help="the LibriSpeech folder (CHAPTERS.TXT, train-clean-5/...)")
    parser.add_argument("--out_dir", type=cli.output_dir, required=True)
    # The mini LibriSpeech recipe's held-out speakers (recipes/mini_librispeech/prepare.sh's defaults).
    parser.add_argument("--dev_speakers", default="19 2136")
    parser.add_argument("--test_speakers", default="4680 1867")
    parser.add_argument("--lm_order", type=cli.int_range(2), default=DEFAULT_ORDER,
                        help="the order of the LM the text is for (run.sh --lm_order): a sentence holding every "
                             "n-gram of a held-out transcript at this order is not written (wenet_udps.lm.held_out)")
    parser.add_argument("--ngram_check", type=cli.non_negative_int, default=0, metavar="N",
                        help="then report each speaker's word N-grams found in books.txt (0: no check)")
    args = parser.parse_args(argv)
    git_dir, librispeech, out_dir = Path(args.git_dir), Path(args.librispeech), Path(args.out_dir)
    if not (librispeech / "CHAPTERS.TXT").is_file():
        raise cli.UserError(f"{librispeech}/CHAPTERS.TXT not found (--librispeech: the LibriSpeech folder)")
    held = {**{s: "dev" for s in args.dev_speakers.split()}, **{s: "test" for s in args.test_speakers.split()}}
    for key, value in sorted(make_books(git_dir, librispeech, out_dir, held, args.lm_order).items()):
        print(f"{key}: {value}")
    if args.ngram_check > 0:
        print(f"{args.ngram_check}-grams of each speaker's transcripts found inside a books.txt line:")
        leaks = ngram_leaks(out_dir / "books.txt", librispeech, args.ngram_check)
        for spk, (h, t) in sorted(leaks.items(), key=lambda kv: (kv[0] not in held, kv[0])):
            print(f"  speaker {spk:>5} {held.get(spk, 'train'):>5}: {h} / {t} = {100 * h / max(t, 1):.1f} %")
    return 0


if __name__ == "__main__":
    cli.run_cli(main, "make_lm_book_text.py")
