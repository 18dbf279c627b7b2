"""Hotword lists for context biasing: read, normalise, spell with the model's units, and build the context graph.

A hotword file holds one phrase a line, with an optional per-unit score at its end after `` :`` (sherpa-onnx's
format)::

    ZEBRA CROSSING :4.5
    MARMALADE
    阿里巴巴

Blank lines are skipped. Each phrase goes through the one text normaliser (``wenet_udps.utils.text_norm``: its
case, punctuation refused, naming the line) and is spelled with the model's own units by its tokenizer (characters,
BPE pieces, Mandarin characters; a phrase of several words carries the word-boundary unit where the units have
one). Refused, each naming the file and line: a phrase that the units cannot spell (WeNet maps such a unit to
``<unk>`` silently, which biases toward ``<unk>``), a bad score, an empty file, more than :data:`PHRASES_MAX`
phrases. A phrase given twice (the same units) is kept once with its highest score, with a warning naming both
lines.
"""
import logging
import math
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from wenet_udps.scoring.biasing import split_score
from wenet_udps.scoring.context_lists import check_keys, read_context_lists
from wenet_udps.transformer.context_graph import ContextGraph
from wenet_udps.transformer.decode_options import CONTEXT_SCORE_MAX
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.kaldi_files import utf8_lines
from wenet_udps.utils.text_norm import NormCounts, TextNorm

# Le et al.'s largest LibriSpeech biasing list holds 2,000 distractors per utterance (3,838 biased words in all on
# test-other); a list far beyond that biases nearly every word of the language, and its graph (a node per distinct
# unit prefix, built at every load) grows with it.
PHRASES_MAX = 20000
PHRASES_WHY = (f"a list of more than {PHRASES_MAX} phrases biases nearly every word (Le et al.'s largest LibriSpeech "
               f"list holds 2,000 per utterance); split it by topic or keep the phrases that matter")

Hotwords = Union[str, "os.PathLike[str]", Sequence[str]]


def _lines(hotwords: Hotwords) -> Tuple[str, List[Tuple[int, str]]]:
    """(what the phrases are called in messages, [(line number, text)]) of a file path or a list of phrases."""
    if isinstance(hotwords, (list, tuple)):
        return "hotwords", [(i, text) for i, text in enumerate(hotwords)]
    path = os.fspath(hotwords)
    return path, list(utf8_lines(path))


def _where(name: str, lineno: int, listed: bool) -> str:
    return f"{name}[{lineno}]" if listed else f"{name}:{lineno}"


def read_phrases(hotwords: Hotwords, tokenizer: Any, score: float, reserved: Iterable[int] = (),
                 norm: Optional[TextNorm] = None, dropped: Optional[List[str]] = None
                 ) -> List[Tuple[List[int], float]]:
    """[(unit ids, per-unit score)] of a hotword file or list (module docstring); UserError naming the line.

    Args:
        tokenizer: the model's (``text2tokens`` and ``symbol_table``, ``unk_id``).
        score: the per-unit score of a phrase without its own (``--context_score``).
        reserved: unit ids no phrase may hold (the blank, sos/eos) besides ``<unk>``.
        norm: the normaliser (default: case kept, punctuation refused).
        dropped: where given, a phrase the units cannot spell is left out, its message appended here, instead of
            refused (``recognize --context_unspellable drop``: a public list may hold a character that the
            training transcripts lack).
    """
    name, rows = _lines(hotwords)
    listed = isinstance(hotwords, (list, tuple))
    norm = norm or TextNorm(case="keep", punctuation="refuse")
    banned = set(reserved) | {tokenizer.unk_id}
    seen: dict = {}
    out: List[Tuple[List[int], float]] = []
    for lineno, raw in rows:
        where = _where(name, lineno, listed)
        phrase = _phrase(raw, where, tokenizer, score, banned, norm, dropped)
        if phrase is None:
            continue
        units, own = phrase
        key = tuple(units)
        if key in seen:
            first, index = seen[key]
            logging.warning("%s: the phrase %r is the same units as %s; merged (keeping the higher score)", where,
                            split_score(raw)[0], first)
            out[index] = (units, max(out[index][1], own))
            continue
        seen[key] = (where, len(out))
        out.append((units, own))
        if len(out) > PHRASES_MAX:
            raise UserError(f"{name}: more than {PHRASES_MAX} phrases: {PHRASES_WHY}")
    if not out and dropped:
        raise UserError(f"{name}: the units spell none of its phrases ({dropped[0]})")
    if not out:
        raise UserError(f"{name}: no phrase (empty, or blank lines only); give one phrase a line, or leave the "
                        f"hotwords out to decode without biasing")
    return out


def _phrase(raw: str, where: str, tokenizer: Any, score: float, banned: set, norm: TextNorm,
            dropped: Optional[List[str]] = None) -> Optional[Tuple[List[int], float]]:
    """(unit ids, per-unit score) of one hotword line, None for a blank one (or, with ``dropped``, one the units
    cannot spell); UserError naming ``where``."""
    text, given = split_score(raw)
    if not text:
        return None
    own = score
    if given is not None:
        try:
            own = float(given)
        except ValueError:
            own = math.nan
        if not (math.isfinite(own) and 0.0 < own <= CONTEXT_SCORE_MAX):
            raise UserError(f"{where}: score {given!r} after ' :' must be a number in (0, "
                            f"{CONTEXT_SCORE_MAX:g}] (a bonus per unit)")
    counts = NormCounts()
    text = norm(text, counts, 1)
    if counts.refused:
        raise UserError(f"{where}: punctuation {counts.refused[0][1]!r} in the phrase {raw.strip()!r}: "
                        f"the units spell no punctuation; remove it")
    try:
        return _spell(text, tokenizer, banned, where), own
    except UserError as e:
        if dropped is None:
            raise
        dropped.append(str(e))
        return None


def _spell(text: str, tokenizer: Any, banned: set, where: str) -> List[int]:
    """The unit ids of ``text``; UserError naming ``where`` and the unit that is missing."""
    tokens = tokenizer.text2tokens(text)
    if not tokens:
        raise UserError(f"{where}: the phrase {text!r} has no unit")
    units = []
    for token in tokens:
        unit = tokenizer.symbol_table.get(token)
        if unit is None or unit in banned:
            raise UserError(f"{where}: the phrase {text!r} cannot be spelled with the units "
                            f"{tokenizer.symbol_table_path}: {token!r} is not one of them (case, script?)")
        units.append(unit)
    return units


def context_graph(hotwords: Optional[Hotwords], tokenizer: Any, score: float,
                  reserved: Iterable[int] = (), dropped: Optional[List[str]] = None) -> Optional[ContextGraph]:
    """The context graph of ``hotwords`` (see :func:`read_phrases`), or None without hotwords (None, or an empty
    list: no biasing)."""
    if hotwords is None or (isinstance(hotwords, (list, tuple)) and not hotwords):
        return None
    graph = ContextGraph(read_phrases(hotwords, tokenizer, score, reserved, dropped=dropped))
    logging.info("hotwords: %d phrases, %d graph states", graph.phrases, len(graph))
    return graph


class UtteranceContexts:
    """Each utterance's own hotword list, from a context list (``wenet_udps.scoring.context_lists``: a line per
    utterance, its key, then its phrases after tabs): ``recognize --context_list``.

    Every distinct phrase is spelled once, at construction, so a phrase the units cannot spell is refused naming the
    file and the first line holding it before any decoding; so is a key that ``keys`` (the utterances decoded) does
    not hold, or an utterance without a line. An utterance's list is kept as indices into the table of distinct
    phrases (Le et al.'s 2,000-word lists of 2,620 utterances repeat their words), and its graph is built as it is
    decoded (:meth:`graph`; 2,000 phrases take milliseconds); a phrase given twice for one utterance counts once,
    with its higher score (``ContextGraph``).
    """

    def __init__(self, path: str, tokenizer: Any, score: float, reserved: Iterable[int], keys: Iterable[str],
                 what: str, dropped: Optional[List[str]] = None):
        self.path = path
        lists = read_context_lists(path)
        check_keys(lists, path, keys, what)
        norm = TextNorm(case="keep", punctuation="refuse")
        banned = set(reserved) | {tokenizer.unk_id}
        index: Dict[str, int] = {}
        self.table: List[Optional[Tuple[List[int], float]]] = []   # None: dropped (``dropped``)
        self.lists: Dict[str, List[int]] = {}
        for key, (lineno, phrases) in lists.items():
            for raw in phrases:
                if raw not in index:
                    index[raw] = len(self.table)
                    self.table.append(_phrase(raw, f"{path}:{lineno}", tokenizer, score, banned, norm, dropped))
            own = list(dict.fromkeys(index[raw] for raw in phrases if self.table[index[raw]] is not None))
            if len(own) > PHRASES_MAX:
                raise UserError(f"{path}:{lineno}: more than {PHRASES_MAX} phrases for {key}: {PHRASES_WHY}")
            self.lists[key] = own
        self.phrases = sum(p is not None for p in self.table)
        sizes = [len(v) for v in self.lists.values()]
        logging.info("context list %s: %d utterances, %d to %d phrases each, %d distinct", path, len(sizes),
                     min(sizes), max(sizes), self.phrases)

    def graph(self, key: str) -> Optional[ContextGraph]:
        """The context graph of utterance ``key``'s list, None for an utterance without phrases."""
        own = self.lists[key]
        return ContextGraph([self.table[i] for i in own]) if own else None
