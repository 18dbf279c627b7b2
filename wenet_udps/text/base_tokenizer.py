"""Shared tokenizer machinery: units file I/O, token <-> id maps and the <unk> counter.

Units file format (WeNet ``units.txt``): one ``<token> <id>`` per line, ``<blank> 0``, ``<unk> 1``, ...,
``<sos/eos>`` last.
"""
import abc
import logging
import os
from collections import Counter
from typing import Dict, List, Tuple

BLANK = "<blank>"
UNK = "<unk>"
SOS_EOS = "<sos/eos>"
SPACE = "\u2581"  # '▁', WeNet's word-boundary symbol (same as sentencepiece's)


def read_symbol_table(path: str) -> Dict[str, int]:
    """Read a units file into ``{token: id}``; malformed lines raise ValueError naming file and line."""
    table: Dict[str, int] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
                raise ValueError(f"{path}:{lineno}: expected '<token> <id>', got {line.rstrip()!r}")
            if parts[0] in table:
                raise ValueError(f"{path}:{lineno}: duplicate token {parts[0]!r}")
            table[parts[0]] = int(parts[1])
    if not table:
        raise ValueError(f"{path}: empty units file")
    return table


def write_symbol_table(tokens: List[str], path: str) -> Dict[str, int]:
    """Write ``<blank> 0``, ``<unk> 1``, ``tokens`` (dropping specials and duplicates), ``<sos/eos>`` last."""
    ordered = [BLANK, UNK]
    seen = set(ordered) | {SOS_EOS}
    for tok in tokens:
        if tok not in seen and tok.strip():
            seen.add(tok)
            ordered.append(tok)
    ordered.append(SOS_EOS)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for i, tok in enumerate(ordered):
            f.write(f"{tok} {i}\n")
    return {tok: i for i, tok in enumerate(ordered)}


class BaseTokenizer(abc.ABC):
    """Maps tokens to ids with a units table; unknown tokens become ``<unk>`` and are counted.

    ``unk_counts`` (a Counter of the unknown tokens) and ``num_unk`` can be read by the caller; the first unknown
    token logs a single warning and ``log_unk_summary()`` logs one summary line.
    """

    def __init__(self, *, symbol_table_path: str):
        self.symbol_table: Dict[str, int] = read_symbol_table(symbol_table_path)
        self.symbol_table_path = symbol_table_path
        self.char_dict: Dict[int, str] = {i: t for t, i in self.symbol_table.items()}
        if UNK not in self.symbol_table:
            raise ValueError(f"{symbol_table_path}: units file has no {UNK} entry")
        self.unk_id = self.symbol_table[UNK]
        self.unk_counts: Counter = Counter()
        self._warned = False

    @property
    def num_unk(self) -> int:
        return sum(self.unk_counts.values())

    def vocab_size(self) -> int:
        return len(self.symbol_table)

    def tokens2ids(self, tokens: List[str]) -> List[int]:
        ids = []
        for tok in tokens:
            idx = self.symbol_table.get(tok)
            if idx is None:
                self._count_unk(tok)
                idx = self.unk_id
            ids.append(idx)
        return ids

    def ids2tokens(self, ids: List[int]) -> List[str]:
        return [self.char_dict.get(int(i), UNK) for i in ids]

    def _count_unk(self, tok: str) -> None:
        self.unk_counts[tok] += 1
        if not self._warned:
            self._warned = True
            logging.warning("token %r is not in %s; mapped to %s. Further unknown tokens are counted silently "
                            "(tokenizer.unk_counts)", tok, self.symbol_table_path, UNK)

    def log_unk_summary(self) -> None:
        """Log one line summarising the unknown tokens seen so far (nothing when there were none)."""
        if self.unk_counts:
            top = ", ".join(f"{t!r}x{n}" for t, n in self.unk_counts.most_common(10))
            logging.warning("%d tokens (%d distinct) mapped to %s; most frequent: %s", self.num_unk,
                            len(self.unk_counts), UNK, top)

    @abc.abstractmethod
    def text2tokens(self, text: str) -> List[str]:
        """Split text into tokens (before the id look-up)."""

    @abc.abstractmethod
    def tokens2text(self, tokens: List[str]) -> str:
        """Join tokens back into text."""

    def tokenize(self, text: str) -> Tuple[List[str], List[int]]:
        """Text -> (tokens, ids)."""
        tokens = self.text2tokens(text)
        return tokens, self.tokens2ids(tokens)

    def detokenize(self, ids: List[int]) -> Tuple[str, List[str]]:
        """Ids -> (text, tokens)."""
        tokens = self.ids2tokens(ids)
        return self.tokens2text(tokens), tokens
