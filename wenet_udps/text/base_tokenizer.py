"""Shared tokenizer machinery: units file I/O, token <-> id maps and the <unk> counter.

Units file format (WeNet ``units.txt``): one ``<token> <id>`` per line, ``<blank> 0``, ``<unk> 1``, ...,
``<sos/eos>`` last.
"""
import abc
import hashlib
import logging
import os
import threading
from collections import Counter
from typing import Any, Dict, List, Mapping, Optional, Tuple

from wenet_udps.utils.atomic import write_text
from wenet_udps.utils.cli import UserError, open_input
from wenet_udps.utils.kaldi_files import ListError, read_table

BLANK = "<blank>"
UNK = "<unk>"
SOS_EOS = "<sos/eos>"
SPACE = "\u2581"  # '▁', WeNet's word-boundary symbol (same as sentencepiece's)
# The unknown-token counts of every tokenizer change under this lock: one tokenizer serves every thread decoding with
# its model, and a count must not be lost (a module lock, not an attribute: a tokenizer stays picklable).
_UNK_LOCK = threading.Lock()


class UnitsError(UserError):
    """A malformed units file, or one that is not the file a checkpoint was trained with."""


def read_symbol_table(path: str) -> Dict[str, int]:
    """Read a units file into ``{token: id}``.

    Raises:
        UnitsError: naming the file (and line): a malformed line, a duplicate token or id, ids that are not
            0..N-1, ``<blank>`` not 0, ``<sos/eos>`` missing or not last (CTC and the decoder rely on both).
    """
    table: Dict[str, int] = {}
    line_of: Dict[int, int] = {}
    try:  # the one reader of Kaldi-style files: BOM, encoding, malformed lines and duplicate tokens decided there
        rows = read_table(path, what="<token> <id>", key_name="token", fields=2)
    except ListError as e:
        raise UnitsError(str(e)) from None
    for token, (token_id, lineno) in rows.items():
        if not token_id.lstrip("-").isdigit():
            raise UnitsError(f"{path}:{lineno}: expected '<token> <id>', got {f'{token} {token_id}'!r}")
        if int(token_id) in line_of:
            raise UnitsError(f"{path}:{lineno}: id {token_id} already given on line {line_of[int(token_id)]}")
        table[token] = int(token_id)
        line_of[int(token_id)] = lineno
    if not table:
        raise UnitsError(f"{path}: empty units file")
    if sorted(line_of) != list(range(len(table))):
        raise UnitsError(f"{path}: ids must be 0..{len(table) - 1}, each once")
    if table.get(BLANK) != 0:
        raise UnitsError(f"{path}: {BLANK} must have id 0")
    if table.get(SOS_EOS) != len(table) - 1:
        raise UnitsError(f"{path}: {SOS_EOS} must be the last id ({len(table) - 1})")
    return table


def units_fingerprint(path: str) -> Dict[str, Any]:
    """``{"path", "sha256", "size"}`` of a units file, recorded in every checkpoint."""
    with open_input(path, "rb") as f:
        data = f.read()
    return {"path": os.path.abspath(path), "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def check_units(recorded: Optional[Mapping[str, Any]], path: str, checkpoint: str) -> None:
    """UnitsError naming both files unless ``path`` is the units file ``checkpoint`` recorded (by hash and size);
    a checkpoint without a record (WeNet's, or older ones) passes."""
    if not recorded:
        return
    now = units_fingerprint(path)
    if (now["sha256"], now["size"]) != (recorded.get("sha256"), recorded.get("size")):
        raise UnitsError(f"units file {path} ({now['size']} bytes, sha256 {now['sha256'][:12]}) is not the one "
                         f"{checkpoint} was trained with ({recorded.get('path')}, {recorded.get('size')} bytes, "
                         f"sha256 {str(recorded.get('sha256'))[:12]}): token ids would be decoded as other tokens")


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
    write_text(path, "".join(f"{tok} {i}\n" for i, tok in enumerate(ordered)))
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
        with _UNK_LOCK:
            self.unk_counts[tok] += 1
            warn, self._warned = not self._warned, True
        if warn:
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
