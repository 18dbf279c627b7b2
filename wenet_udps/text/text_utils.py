"""Text splitting helpers shared by the tokenizers: CJK detection and non-language symbols."""
import re
from typing import List, Optional, Set

from wenet_udps.utils.kaldi_files import utf8_lines

# CJK ideographs (incl. extension A and compatibility), kana and hangul: one token per character.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
CJK_CHAR = re.compile(f"[{_CJK}]")
# CJK characters, whitespace runs, or runs of anything else (an English word, digits, punctuation).
CHUNK = re.compile(f"[{_CJK}]|\\s+|[^\\s{_CJK}]+")
# Bracketed symbols such as {NOISE}, <unk>, [laughter] (kept whole when listed).
BRACKETED = re.compile(r"(\[[^\[\]]+\]|<[^<>]+>|\{[^{}]+\})")


def is_cjk(token: str) -> bool:
    return len(token) == 1 and CJK_CHAR.match(token) is not None


def read_non_lang_syms(path: Optional[str]) -> Set[str]:
    """One symbol per line (e.g. ``{NOISE}``); empty set when ``path`` is None."""
    if not path:
        return set()
    return {line.strip() for _, line in utf8_lines(path) if line.strip()}


def split_non_lang_syms(text: str) -> List[str]:
    """Split ``text`` so that every bracketed symbol is its own part (empty parts dropped)."""
    return [part for part in BRACKETED.split(text) if part]
