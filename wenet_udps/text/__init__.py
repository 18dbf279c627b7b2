"""Tokenizers: ``char`` and ``bpe`` (sentencepiece), built from WeNet's ``tokenizer`` + ``tokenizer_conf``."""
import inspect
from typing import Any, Dict

from wenet_udps.text.base_tokenizer import BLANK, SOS_EOS, SPACE, UNK, BaseTokenizer, read_symbol_table, \
    write_symbol_table
from wenet_udps.text.bpe_tokenizer import BpeTokenizer
from wenet_udps.text.char_tokenizer import CharTokenizer
from wenet_udps.utils.registry import lookup

TOKENIZER_CLASSES = {"char": CharTokenizer, "bpe": BpeTokenizer}
# WeNet tokenizer_conf keys that have no effect here (multilingual Whisper options, special-token maps).
_IGNORED_KEYS = {"special_tokens", "is_multilingual", "num_languages"}


def init_tokenizer(config: Dict[str, Any]) -> BaseTokenizer:
    """Build the tokenizer of a train.yaml dict (``tokenizer``: char|bpe, ``tokenizer_conf``: its options).

    Without a ``tokenizer`` key, ``bpe`` is chosen when ``tokenizer_conf.bpe_path`` is set, else ``char``.
    Unknown ``tokenizer_conf`` keys raise ValueError.
    """
    conf = dict(config.get("tokenizer_conf") or {})
    name = config.get("tokenizer") or ("bpe" if conf.get("bpe_path") else "char")
    cls = lookup(TOKENIZER_CLASSES, name, "tokenizer")
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    kwargs = {}
    for key, value in conf.items():
        if key in accepted:
            kwargs[key] = value
        elif key not in _IGNORED_KEYS and not (key == "bpe_path" and value is None):
            raise ValueError(f"tokenizer_conf.{key} is not an option of tokenizer {name!r}; "
                             f"valid: {', '.join(sorted(accepted))}")
    if "symbol_table_path" not in kwargs:
        raise ValueError("tokenizer_conf.symbol_table_path (the units file) is required")
    return cls(**kwargs)


__all__ = ["init_tokenizer", "TOKENIZER_CLASSES", "BaseTokenizer", "CharTokenizer", "BpeTokenizer",
           "read_symbol_table", "write_symbol_table", "BLANK", "UNK", "SOS_EOS", "SPACE"]
