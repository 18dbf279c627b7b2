"""Sentencepiece tokenizer (WeNet ``bpe``): CJK characters one by one, everything else through the BPE model."""
from typing import List, Optional

import sentencepiece as spm

from wenet_udps.text.base_tokenizer import SPACE, BaseTokenizer
from wenet_udps.text.text_utils import CHUNK, is_cjk, read_non_lang_syms, split_non_lang_syms
from wenet_udps.utils.cli import UserError, regular_file
from wenet_udps.utils.text_norm import CASES, TextNorm, read_form


class BpeTokenizer(BaseTokenizer):
    """Encode non-CJK text with a sentencepiece model; CJK characters and listed non-language symbols stay whole.

    ``case``: WeNet trains its LibriSpeech BPE model on upper-case text and upper-cases the input before encoding
    (``upper``, default); ``tools/train_bpe.py --case`` must match. Decoding returns text in that case.
    """

    def __init__(self, *, symbol_table_path: str, bpe_path: str, non_lang_syms_path: Optional[str] = None,
                 split_with_space: bool = False, case: str = "upper"):
        super().__init__(symbol_table_path=symbol_table_path)
        if case not in CASES:
            raise UserError(f"unknown tokenizer_conf.case {case!r}; valid choices: {', '.join(CASES)}")
        self.case = case
        self._cased = TextNorm(case=case, punctuation="keep")  # the one normaliser's case rule (tools/train_bpe.py)
        self.sp = spm.SentencePieceProcessor()
        try:
            self.sp.load(regular_file(bpe_path, "tokenizer_conf.bpe_path"))
        except (OSError, RuntimeError) as e:
            # a user error (a conf naming another corpus's model, a stage 2 not run): one line, not a traceback
            raise UserError(f"tokenizer_conf.bpe_path: cannot load the sentencepiece model {bpe_path}: {e}") from None
        self.non_lang_syms = read_non_lang_syms(non_lang_syms_path)
        self.split_with_space = split_with_space

    def _apply_case(self, text: str) -> str:
        return self._cased(text)

    def text2tokens(self, text: str) -> List[str]:
        """Tokens of ``text`` in its read form (NFKC, no format characters), in which tools/train_bpe.py learnt."""
        tokens: List[str] = []
        for part in split_non_lang_syms(read_form(text).strip()):
            if part in self.non_lang_syms:
                tokens.append(part)
                continue
            pending = ""  # non-CJK text collected until the next CJK character, then encoded in one call
            for chunk in CHUNK.findall(part):
                if is_cjk(chunk):
                    if pending.strip():
                        tokens.extend(self.sp.encode_as_pieces(self._apply_case(pending.strip())))
                    pending = ""
                    tokens.append(chunk)
                else:
                    pending += chunk
            if pending.strip():
                tokens.extend(self.sp.encode_as_pieces(self._apply_case(pending.strip())))
        return tokens

    def tokens2text(self, tokens: List[str]) -> str:
        """The pieces joined, '▁' read as a space; a non-language symbol is a word of its own (``HELLO <noise>
        WORLD``, not ``HELLO<noise> WORLD``: it carries no '▁', and glued it is no word of the text or of an LM)."""
        text = "".join(f" {t} " if t in self.non_lang_syms else t for t in tokens).replace(SPACE, " ")
        return " ".join(text.split()) if any(t in self.non_lang_syms for t in tokens) else text.strip()
