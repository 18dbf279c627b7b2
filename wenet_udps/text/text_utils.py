"""Text splitting helpers shared by the tokenizers: CJK detection and non-language symbols."""
import re
from typing import List, Optional, Set

from wenet_udps.utils.kaldi_files import utf8_lines
# CJK characters (one token each) and bracketed symbols such as {NOISE}, <unk>, [laughter] (kept whole when listed)
# are defined once, with the text normaliser that keeps them too.
from wenet_udps.utils.text_norm import BRACKETED, CJK as CJK_CHAR, CJK_RANGES as _CJK

# CJK characters, whitespace runs, or runs of anything else (an English word, digits, punctuation).
CHUNK = re.compile(f"[{_CJK}]|\\s+|[^\\s{_CJK}]+")


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
