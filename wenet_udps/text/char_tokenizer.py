"""Character tokenizer (WeNet ``char``): CJK characters one by one, English words whole, optional '▁' for spaces."""
from typing import Container, List, Optional, Set

from wenet_udps.text.base_tokenizer import SPACE, BaseTokenizer
from wenet_udps.text.text_utils import BRACKETED, CHUNK, is_cjk, read_non_lang_syms, split_non_lang_syms
from wenet_udps.utils.text_norm import read_form


def char_split(text: str, *, split_with_space: bool = False, non_lang_syms: Set[str] = frozenset(),
               known: Optional[Container[str]] = None, letters: bool = False) -> List[str]:
    """Split text into CJK characters, whole non-CJK words, '▁' (spaces, when not ``split_with_space``) and the
    listed non-language symbols. A word is split into its characters when ``letters`` is set or when ``known``
    is given and lacks the word. The text is split in its read form (NFKC, no format characters: the one
    normaliser's ``read_form``), in which ``tools/make_char_units.py`` made the units."""
    tokens: List[str] = []
    for part in split_non_lang_syms(read_form(text).strip()):
        if part in non_lang_syms:
            tokens.append(part)
            continue
        for chunk in CHUNK.findall(part):
            if chunk.isspace():
                if not split_with_space and tokens and tokens[-1] != SPACE:
                    tokens.append(SPACE)
            elif is_cjk(chunk) or (not letters and (known is None or chunk in known)):
                tokens.append(chunk)
            else:
                tokens.extend(chunk)
    while tokens and tokens[-1] == SPACE:
        tokens.pop()
    return tokens


class CharTokenizer(BaseTokenizer):
    """Split text into CJK characters and whole non-CJK words.

    With ``split_with_space=False`` (WeNet's default) a run of whitespace becomes the token '▁'; with True, spaces
    only separate tokens. A word that is not in the units table falls back to its characters, so a WeNet units file
    of letters (``a``, ``b``, ...) works as well as one of whole words. Symbols listed in ``non_lang_syms_path``
    (e.g. ``{NOISE}``) and bracketed symbols of the units table (e.g. ``<unk>``) are kept whole.
    """

    def __init__(self, *, symbol_table_path: str, split_with_space: bool = False,
                 non_lang_syms_path: Optional[str] = None):
        super().__init__(symbol_table_path=symbol_table_path)
        self.split_with_space = split_with_space
        listed = read_non_lang_syms(non_lang_syms_path)
        self.non_lang_syms = listed | {t for t in self.symbol_table if BRACKETED.fullmatch(t)}

    def text2tokens(self, text: str) -> List[str]:
        return char_split(text, split_with_space=self.split_with_space, non_lang_syms=self.non_lang_syms,
                          known=self.symbol_table)

    def tokens2text(self, tokens: List[str]) -> str:
        if not self.split_with_space:
            return "".join(tokens).replace(SPACE, " ").strip()
        out = ""
        for i, tok in enumerate(tokens):
            # Spaces separated the tokens in the input, except between two CJK characters.
            if i and not (is_cjk(tok) and is_cjk(tokens[i - 1])):
                out += " "
            out += tok
        return out
