"""Tokenizers: ``char`` and ``bpe`` (sentencepiece), built from WeNet's ``tokenizer`` + ``tokenizer_conf``."""
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

from wenet_udps.text.base_tokenizer import BLANK, SOS_EOS, SPACE, UNK, BaseTokenizer, read_symbol_table, \
    write_symbol_table
from wenet_udps.text.bpe_tokenizer import BpeTokenizer
from wenet_udps.text.char_tokenizer import CharTokenizer
from wenet_udps.utils.schema import call_with, check_section, route, section

TOKENIZER_CLASSES = {"char": CharTokenizer, "bpe": BpeTokenizer}


@dataclass
class WenetTokenizerKeys:
    """``tokenizer_conf`` keys of WeNet configs that no tokenizer class here takes: ``special_tokens`` is read by
    the model builder; the Whisper options and a null ``bpe_path`` of a char setup have no effect."""
    special_tokens: Optional[Dict[str, int]] = None
    is_multilingual: bool = False
    num_languages: int = 1
    bpe_path: Optional[str] = None


def _default_tokenizer(conf: Mapping[str, Any]) -> str:
    """Without a ``tokenizer`` key: ``bpe`` when ``tokenizer_conf.bpe_path`` is set, else ``char``."""
    return "bpe" if conf.get("bpe_path") else "char"


@dataclass
class TokenizerConfig:
    """The train.yaml keys of the tokenizer."""
    tokenizer: Optional[str] = None
    tokenizer_conf: Optional[dict] = section(WenetTokenizerKeys, choice="tokenizer", registry=TOKENIZER_CLASSES,
                                             default=_default_tokenizer)


def init_tokenizer(config: Dict[str, Any]) -> BaseTokenizer:
    """Build the tokenizer of a train.yaml dict (``tokenizer``: char|bpe, ``tokenizer_conf``: its options).

    Raises:
        ConfigError: an unknown ``tokenizer_conf`` key or a missing ``symbol_table_path`` (units file).
    """
    checked = check_section(route(config, TokenizerConfig), TokenizerConfig, "")
    conf = checked.get("tokenizer_conf") or {}
    name = checked.get("tokenizer") or _default_tokenizer(conf)
    cls = TOKENIZER_CLASSES[name]
    return call_with(cls, route(conf, cls), "tokenizer_conf")


__all__ = ["init_tokenizer", "TOKENIZER_CLASSES", "TokenizerConfig", "BaseTokenizer", "CharTokenizer",
           "BpeTokenizer", "read_symbol_table", "write_symbol_table", "BLANK", "UNK", "SOS_EOS", "SPACE"]
