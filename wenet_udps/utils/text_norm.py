"""The one text normaliser: what a recipe declares about case and punctuation, applied alike to the training
targets (run.sh stage 0, ``tools/normalise_text.py``), the units (stage 2, ``tools/make_char_units.py``,
``tools/train_bpe.py``), the word LM's text (stage 2, ``wenet_udps.bin.build_lm``) and scoring
(``tools/compute-wer.py``). Without it ``Zero,`` and ``ZERO`` are two units and a scoring error, and an LM learns one
word's probability split over its spellings.

A recipe declares it once (``text_case`` and ``text_punctuation`` in ``recipes/<corpus>/settings.sh``, or run.sh's
``--text_case`` / ``--text_punctuation``); every tool takes the same two options (``--case``, ``--punctuation``):

- case: ``keep`` | ``upper`` | ``lower``;
- punctuation: ``refuse`` (the default: a transcript holding a punctuation mark is an error naming the file and its
  lines, because the mark would become a unit or part of one), ``keep`` (the marks are part of the words; declared,
  so not reported) or ``remove`` (each run of marks is cut out; between two letters of a non-CJK script it becomes
  a space, so ``well-known`` gives ``well known``; in CJK text and at a word's edge it leaves nothing).

A punctuation mark is a character of a Unicode ``P*`` category, except an apostrophe (``'``, ``’``) touching a
letter or digit (``IT'S``, ``BOYS'``: part of the word) and the brackets of a non-language symbol (``<unk>``,
``{NOISE}``, ``[laughter]``: kept whole, as the tokenizers keep them). With ``keep``/``keep`` a text in its read form
(below) is unchanged, byte for byte; a line whose punctuation is removed has its white space collapsed. What is
changed is counted (:class:`NormCounts`) and each tool logs the counts.

Before case and punctuation, every text is put in its read form (:func:`read_form`), whatever a recipe declares:
Unicode NFKC after the format characters (category ``Cf``: a byte-order mark inside a line, a zero-width space, a
soft hyphen) are removed. ``CAFÉ`` typed as ``E`` + a combining accent (NFD, as macOS file names and some editors
write it) is then the same unit, LM word and scoring token as the precomposed ``É``, and a U+FEFF that a Windows tool
wrote at the start of a per-utterance transcript never becomes a unit (stage 4 refuses a units file holding one).
So with ``keep``/``keep`` a text already in its read form is unchanged, byte for byte. The tokenizers
(``wenet_udps.text``) and the scorer (``wenet_udps.scoring.tokens``) apply :func:`read_form` too, so a text that
did not pass through a tool is split and compared in the same form; ``tests/utils/test_one_normaliser.py`` finds
them all and fails on one that does not.

:func:`match_form` is the form in which the LM's held-out check compares sentences (``wenet_udps.lm.held_out``):
what a reader sees, whatever a recipe keeps: Unicode NFKC (fullwidth ``ＴＨＥ`` and the ligature ``ﬁ`` are ``THE`` and
``fi``, a no-break space a space), format characters removed (category ``Cf``: a zero-width space, a soft hyphen),
lower case, punctuation removed, white space collapsed (a dev sentence followed by ``.`` is still that sentence).
A letter that only looks like one (the Cyrillic ``А`` in Latin text) survives NFKC; :func:`foreign_letter` finds a
letter of a script that is not among a recipe's scripts (:func:`text_scripts`: those of its transcripts' letters).

This module imports only the standard library and ``cli``, so every layer of the package may use it.
"""
import argparse
import collections
import functools
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Tuple

from wenet_udps.utils.cli import UserError

CASES = ("keep", "upper", "lower")
PUNCTUATION = ("refuse", "keep", "remove")
# CJK ideographs (incl. extension A and compatibility), kana and hangul: the tokenizers make each a token.
CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# Bracketed non-language symbols such as {NOISE}, <unk>, [laughter] (kept whole by the tokenizers).
CJK = re.compile(f"[{CJK_RANGES}]")
BRACKETED = re.compile(r"(\[[^\[\]]+\]|<[^<>]+>|\{[^{}]+\})")
APOSTROPHES = "'\u2019"
# The scorer's tag rule (``wenet_udps.scoring.tokens``, compute-wer's ``remove_tag``), here so that every layer uses
# the one rule: the LM's held-out check drops tags as the scorer does.
TAG = re.compile(r"<[^>]*(?:>|$)")
REPORTED_LINES = 5  # lines named in a refusal (and the total count)


class TextNormError(UserError):
    """Punctuation in a text whose recipe did not declare what to do with it: names the file and lines."""


@functools.lru_cache(maxsize=1)
def _marks() -> "re.Pattern[str]":
    """A bracketed symbol (group 1, kept) or a run of punctuation marks (group 2). Built once, on first use: the
    P* characters are found by walking Unicode (about 0.2 s)."""
    chars = "".join(chr(c) for c in range(sys.maxunicode + 1)
                    if unicodedata.category(chr(c)).startswith("P") and chr(c) not in APOSTROPHES)
    apostrophe = f"(?<![^\\W_])[{APOSTROPHES}](?![^\\W_])"  # one touching no letter or digit is a quote mark
    return re.compile(f"{BRACKETED.pattern}|((?:[{re.escape(chars)}]|{apostrophe})+)")


def _space_between(text: str, start: int, end: int) -> str:
    """What a removed run of marks leaves: a space between two non-CJK, non-space characters, else nothing."""
    if start == 0 or end == len(text):
        return ""
    left, right = text[start - 1], text[end]
    return "" if left.isspace() or right.isspace() or CJK.match(left) or CJK.match(right) else " "


@dataclass
class NormCounts:
    """What normalising a text changed: lines read, lines changed by the read form (:func:`read_form`), lines whose
    case changed, punctuation marks removed (and on how many lines), lines left empty by it, and the lines holding
    punctuation that was refused."""
    lines: int = 0
    form_changed: int = 0
    case_changed: int = 0
    marks_removed: int = 0
    lines_with_marks: int = 0
    emptied: int = 0
    refused: List[Tuple[int, str]] = field(default_factory=list)
    refused_count: int = 0

    def describe(self) -> str:
        return (f"{self.lines} lines: case changed on {self.case_changed}, {self.marks_removed} punctuation marks "
                f"removed from {self.lines_with_marks} ({self.emptied} left empty), Unicode form changed on "
                f"{self.form_changed} (NFKC, format characters removed)")

    @property
    def changed(self) -> bool:
        """Whether normalising changed any line."""
        return bool(self.form_changed or self.case_changed or self.marks_removed)


@dataclass(frozen=True)
class TextNorm:
    """A recipe's declaration: ``case`` (keep | upper | lower), ``punctuation`` (refuse | keep | remove)."""
    case: str = "keep"
    punctuation: str = "refuse"

    def __post_init__(self):
        if self.case not in CASES:
            raise ValueError(f"unknown text case {self.case!r}; valid choices: {', '.join(CASES)}")
        if self.punctuation not in PUNCTUATION:
            raise ValueError(f"unknown punctuation rule {self.punctuation!r}; valid choices: {', '.join(PUNCTUATION)}")

    def _cased(self, text: str) -> str:
        """``text`` in the declared case; bracketed symbols (``<unk>``) as they are."""
        if self.case == "keep":
            return text
        change = str.upper if self.case == "upper" else str.lower
        return "".join(part if i % 2 else change(part) for i, part in enumerate(BRACKETED.split(text)))

    def __call__(self, text: str, counts: Optional[NormCounts] = None, lineno: int = 0) -> str:
        """``text`` normalised. With ``counts``, what changed is added to it, and a line holding a mark under
        ``refuse`` is recorded there (``lineno`` names it) for :meth:`check` to refuse; the text is returned
        unchanged then (in its read form)."""
        read = read_form(text)
        out = read_form(self._cased(read))  # a case change can leave combining marks that compose again
        case_changed = out != read
        removed = 0
        if self.punctuation != "keep":
            found = [m for m in _marks().finditer(out) if m.group(2)]
            if found and self.punctuation == "refuse":
                if counts is not None:
                    counts.refused_count += 1
                    if len(counts.refused) < REPORTED_LINES:
                        counts.refused.append((lineno, found[0].group(2)))
            elif found:
                removed = sum(len(m.group(2)) for m in found)
                out = _marks().sub(lambda m: m.group(1) or _space_between(m.string, m.start(), m.end()), out)
                out = " ".join(out.split())
        if counts is not None:
            counts.lines += 1
            counts.form_changed += read != text
            counts.case_changed += case_changed
            counts.marks_removed += removed
            counts.lines_with_marks += removed > 0
            counts.emptied += bool(removed and text.strip() and not out)
        return out

    def check(self, counts: NormCounts, path: str) -> None:
        """TextNormError naming ``path`` and the lines that hold punctuation the declaration refuses."""
        if counts.refused_count:
            where = ", ".join(f"{path}:{lineno} {mark!r}" for lineno, mark in counts.refused)
            more = " ..." if counts.refused_count > len(counts.refused) else ""
            raise TextNormError(
                f"{path}: {counts.refused_count} line(s) hold punctuation ({where}{more}), which would become "
                "units or parts of units: declare it with run.sh "
                "--text_punctuation remove|keep (text_punctuation in recipes/<corpus>/settings.sh) or this "
                "tool's --punctuation remove|keep")

    def lines(self, rows: Iterable[Tuple[int, str]], path: str) -> Tuple[List[Tuple[int, str]], NormCounts]:
        """``(line number, text)`` rows of ``path`` normalised, and the counts; TextNormError (after reading them
        all, so that it names every line) when punctuation is refused. Each text is stripped of the white space at
        its ends, as a line is read (``utils.kaldi_files``): removing a format character can leave some there
        (``0\x1f\ufeff``), and the file written would read back otherwise than it was scored or counted."""
        counts = NormCounts()
        out = [(lineno, self(text, counts, lineno).strip()) for lineno, text in rows]
        self.check(counts, path)
        return out, counts


MATCH = TextNorm(case="lower", punctuation="remove")
# A script is one of a text's own when at least this share of its letters are of it: a stray look-alike in the
# transcripts does not make its script the recipe's (code-switched words do).
MIN_SCRIPT_SHARE = 0.001
# Names whose first word is not the script's (NFKC has already mapped fullwidth, halfwidth and mathematical forms).
_SCRIPT_ALIASES = {"IDEOGRAPHIC": "CJK", "KATAKANA-HIRAGANA": "KATAKANA"}


def read_form(text: str) -> str:
    """``text`` as a reader sees it: format characters (Unicode category Cf) removed, then NFKC. In this order the
    form is stable (``read_form(read_form(t)) == read_form(t)``): a Cf character between a letter and its combining
    mark would otherwise keep them apart through NFKC, and no character's NFKC form holds a Cf character."""
    if text.isascii():  # the common case: ASCII has no format character and is its own NFKC form
        return text
    return unicodedata.normalize("NFKC", "".join(c for c in text if unicodedata.category(c) != "Cf"))


def strip_tags(token: str) -> str:
    """Cut every ``<...>`` span out of a token (an unclosed ``<`` runs to the end): the scorer's ``remove_tag``."""
    return TAG.sub("", token)


def is_symbol(token: str) -> bool:
    """A non-language symbol: a whole ``<...>``, ``[...]`` or ``{...}`` token (``<noise>``, ``[laughter]``,
    ``{NOISE}``), as the normaliser and the tokenizers keep them whole."""
    return BRACKETED.fullmatch(token) is not None


def match_form(text: str) -> str:
    """The form in which sentences are compared (the LM's held-out check): as read (NFKC, no format characters),
    lower case, punctuation removed, white space collapsed."""
    return " ".join(MATCH(text).split())


def script_of(char: str) -> Optional[str]:
    """The script of a letter (the first word of its Unicode name: ``LATIN``, ``CYRILLIC``, ``GREEK``, ``CJK``,
    ``HIRAGANA``, ...), None for a character that is not a letter or a modifier letter (shared by scripts)."""
    if not unicodedata.category(char).startswith("L"):
        return None
    first = unicodedata.name(char, "").split(" ")[0]
    return None if first in ("", "MODIFIER") else _SCRIPT_ALIASES.get(first, first)


def text_scripts(texts: Iterable[str]) -> List[str]:
    """The scripts of ``texts`` (a recipe's transcripts): those of at least :data:`MIN_SCRIPT_SHARE` of their
    letters, as read (NFKC), most letters first."""
    counts: "collections.Counter[str]" = collections.Counter()
    for text in texts:
        counts.update(filter(None, map(script_of, read_form(text))))
    total = sum(counts.values())
    return [script for script, n in counts.most_common() if n >= MIN_SCRIPT_SHARE * total]


def foreign_letter(text: str, scripts: Iterable[str]) -> Optional[str]:
    """The first letter of ``text`` (as read) of a script not in ``scripts``, described for a message (``'А'
    (U+0410 CYRILLIC CAPITAL LETTER A)``), or None."""
    allowed = set(scripts)
    for char in read_form(text):
        script = script_of(char)
        if script is not None and script not in allowed:
            return f"{char!r} (U+{ord(char):04X} {unicodedata.name(char)})"
    return None


def add_arguments(parser: argparse.ArgumentParser, *, case: str = "keep", punctuation: str = "refuse") -> None:
    """The two options of every tool that reads transcripts: ``--case`` and ``--punctuation``."""
    parser.add_argument("--case", choices=CASES, default=case,
                        help=f"case of the text: {' | '.join(CASES)} (default {case}; run.sh --text_case)")
    parser.add_argument("--punctuation", choices=PUNCTUATION, default=punctuation,
                        help=f"punctuation marks: refuse (an error naming the lines) | keep | remove (default "
                             f"{punctuation}; run.sh --text_punctuation)")


def from_args(args: argparse.Namespace) -> TextNorm:
    return TextNorm(case=args.case, punctuation=args.punctuation)
