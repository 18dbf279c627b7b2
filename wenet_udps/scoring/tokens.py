"""Transcript files and scoring tokens, by the rules of WeNet's ``tools/compute-wer.py``.

Word mode splits at whitespace. Character mode (``char=True``) walks the text once:
- skips spaces (``' '``, tab, CR, LF and every Unicode ``Zs`` or unassigned character) and the punctuation marks
  in ``SKIPPED_PUNCTUATION`` (commas, stops, question and exclamation marks, CJK brackets);
- makes each ``Lo`` character (CJK ideographs, kana, ...) a token of its own;
- starts a token at any other character and extends it over the ASCII characters that follow, up to a space or
  a non-ASCII character, so ``it's``, ``e-mail``, ``3.5`` and ``hello,`` stay whole while ``café`` splits into
  ``caf`` + ``é`` and a lone ``.`` is a token; a token starting with ``<`` also ends after the first ``>``, so
  ``<unk><noise>`` gives two tokens.
Then each token is upper-cased (unless case-sensitive), dropped if it is an ignored word, has its ``<...>`` tags cut
out (``abc<unk>`` -> ``abc``, ``<unk>`` -> nothing) and is dropped when nothing is left.
Unlike WeNet, a text is first put in the read form of the one normaliser (``wenet_udps.utils.text_norm.read_form``:
format characters removed, NFKC), as the units and the LM text were, and so are the ignored words: the same words
typed in NFC and in NFD, or with a zero-width space, score as equal.
"""
import unicodedata
from typing import Dict, Iterable, List, Optional, Set

from wenet_udps.utils.kaldi_files import ListError, read_map, utf8_lines
from wenet_udps.utils.text_norm import read_form, strip_tags

SKIPPED_PUNCTUATION = frozenset("!,?、。！，；？：「」︰『』《》")
SPACES = frozenset(" \t\r\n")

# Unicode-name prefixes of the per-cluster lines (Mandarin / English / Number / Japanese; anything else is Other).
CLUSTER_PREFIXES = (("DIGIT", "Number"), ("CJK UNIFIED IDEOGRAPH", "Mandarin"),
                    ("CJK COMPATIBILITY IDEOGRAPH", "Mandarin"), ("LATIN CAPITAL LETTER", "English"),
                    ("LATIN SMALL LETTER", "English"), ("HIRAGANA LETTER", "Japanese"))
# Symbols that do not decide a token's cluster (``e-mail`` is English, ``3.5`` a Number).
CLUSTER_NEUTRAL = ("AMPERSAND", "APOSTROPHE", "COMMERCIAL AT", "DEGREE CELSIUS", "EQUALS SIGN", "FULL STOP",
                   "HYPHEN-MINUS", "LOW LINE", "NUMBER SIGN", "PLUS SIGN", "SEMICOLON")


def _is_space(ch: str) -> bool:
    return ch in SPACES or unicodedata.category(ch) in ("Zs", "Cn")


def _token_end(text: str, start: int) -> int:
    """End of the token that starts at ``text[start]`` (neither a space, skipped mark nor ``Lo`` letter)."""
    stop = ">" if text[start] == "<" else None
    end = start + 1
    while end < len(text) and ord(text[end]) < 128 and text[end] not in SPACES and text[end] != stop:
        end += 1
    if stop and end < len(text) and text[end] == stop:
        end += 1
    return end


def char_tokens(text: str) -> List[str]:
    """Character-mode tokens of a transcript (see the module docstring), before normalisation."""
    tokens = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in SKIPPED_PUNCTUATION or _is_space(ch):
            i += 1
        elif unicodedata.category(ch) == "Lo":
            tokens.append(ch)
            i += 1
        else:
            end = _token_end(text, i)
            tokens.append(text[i:end])
            i = end
    return tokens


def tokenize(text: str, *, char: bool, case_sensitive: bool = False, ignore: Iterable[str] = (),
             remove_tags: bool = True) -> List[str]:
    """Scoring tokens of a transcript: split (words or characters), upper-case, drop ignored words, cut tags.

    ``ignore`` must already be upper-cased when not ``case_sensitive`` (``read_ignore_words`` does that).
    """
    ignore = ignore if isinstance(ignore, (set, frozenset)) else set(ignore)
    out = []
    text = read_form(text)
    for token in (char_tokens(text) if char else text.split()):
        if not case_sensitive:
            token = read_form(token.upper())  # upper-casing can leave marks that NFKC composes (Greek, J-caron)
        if token in ignore:
            continue
        if remove_tags:
            token = strip_tags(token)
        if token:
            out.append(token)
    return out


def cluster_of(token: str) -> str:
    """``Mandarin``, ``English``, ``Number``, ``Japanese`` when every deciding character of the token is of that
    kind (by its Unicode name), else ``Other``. A character without a Unicode name counts as Other."""
    kinds = set()
    for ch in token:
        name = unicodedata.name(ch, "")
        kind = next((k for prefix, k in CLUSTER_PREFIXES if name.startswith(prefix)), None)
        if kind is not None:
            kinds.add(kind)
        elif not name or not name.startswith(CLUSTER_NEUTRAL):
            return "Other"
    return kinds.pop() if len(kinds) == 1 else "Other"


def read_text(path: str) -> Dict[str, str]:
    """A Kaldi text file as ``{key: transcript}`` in file order, read by the one reader of Kaldi files
    (``wenet_udps.utils.kaldi_files``, as every tool reads it: a byte-order mark at the start is dropped, a
    duplicate key or invalid UTF-8 is a ListError, a ValueError, naming the line). The transcript is the rest of
    the line, its inner spaces unchanged (character mode needs them)."""
    return read_map(path, key_name="utterance key", allow_empty_value=True)


def read_ignore_words(path: Optional[str], case_sensitive: bool = False) -> Set[str]:
    """Words to drop before scoring, one per line, in their read form (upper-cased unless ``case_sensitive``)."""
    if not path:
        return set()
    words = set()
    for lineno, line in utf8_lines(path):
        word = read_form(line).strip()  # before the one-word check: NFKC may make a space (U+00A8 is ' ' + U+0308)
        if not word:
            continue
        if len(word.split()) > 1:
            raise ListError(f"{path}:{lineno}: one word per line expected, got {word!r} "
                             "(a token never contains a space, so it could never match)")
        words.add(word if case_sensitive else read_form(word.upper()))
    return words
