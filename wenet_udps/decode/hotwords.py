"""Hotword lists for context biasing: read, normalise, spell with the model's units, and build the context graph.

A hotword file holds one phrase a line, with an optional per-unit score at its end after `` :`` (sherpa-onnx's
format)::

    ZEBRA CROSSING :4.5
    MARMALADE
    阿里巴巴

Blank lines are skipped. :func:`read_lines` is the one reader of the format (the decoder's and
``tools/compute-biased-wer.py``'s). Each phrase goes through the one text normaliser (``wenet_udps.utils.text_norm``:
punctuation refused, naming the line) in the case of the model's units (:func:`units_case`: upper-case units, an
upper-cased phrase; lower-case ones, lower-cased), and is spelled with the model's own units by its tokenizer
(characters, BPE pieces, Mandarin characters; a phrase of several words carries the word-boundary unit where the
units have one). Refused, each naming the file and line: a phrase that the units cannot spell (WeNet maps such a
unit to ``<unk>`` silently, which biases toward ``<unk>``), among them a word that whole-word units lack, which
their characters would spell as other words; a typed ``▁`` (the units' word boundary: write a space); a score that
is not an ASCII decimal in range; an empty file; more than :data:`PHRASES_MAX` phrases. A phrase given twice (the
same units) is kept once with its highest score, with a warning naming both lines.
"""
import logging
import math
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from wenet_udps.scoring.context_lists import check_keys, read_context_lists
from wenet_udps.text.base_tokenizer import SPACE
from wenet_udps.text.char_tokenizer import CharTokenizer
from wenet_udps.transformer.context_graph import ContextGraph
from wenet_udps.transformer.decode_options import CONTEXT_SCORE_MAX
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.kaldi_files import utf8_lines
from wenet_udps.utils.text_norm import BRACKETED, CJK, NormCounts, TextNorm

# Le et al.'s largest LibriSpeech biasing list holds 2,000 distractors per utterance (3,838 biased words in all on
# test-other); a list far beyond that biases nearly every word of the language, and its graph (a node per distinct
# unit prefix, built at every load) grows with it.
PHRASES_MAX = 20000
PHRASES_WHY = (f"a list of more than {PHRASES_MAX} phrases biases nearly every word (Le et al.'s largest LibriSpeech "
               f"list holds 2,000 per utterance); split it by topic or keep the phrases that matter")

Hotwords = Union[str, "os.PathLike[str]", Sequence[str]]
SCORED = re.compile(r"^(.*\S)\s+:(\S+)$")  # a hotword line "phrase :score" (sherpa-onnx's format)
DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?")  # ASCII digits: float() also reads 1e400, nan, ١ and 1_0


def split_line(raw: str, where: str) -> Tuple[str, Optional[float]]:
    """(phrase, its own `` :score`` or None) of one hotword line, stripped; UserError naming ``where`` for a score
    that is not an ASCII decimal in (0, CONTEXT_SCORE_MAX] or a typed ``▁``."""
    text, given = raw.strip(), None
    match = SCORED.match(text)
    if match:
        text, given = match.groups()
    if SPACE in text:
        raise UserError(f"{where}: the phrase {text!r} holds {SPACE!r}, the units' word boundary; write a space "
                        f"between words")
    if given is None:
        return text, None
    own = float(given) if DECIMAL.fullmatch(given) else math.nan
    if not (math.isfinite(own) and 0.0 < own <= CONTEXT_SCORE_MAX):
        raise UserError(f"{where}: score {given!r} after ' :' must be a decimal number (ASCII digits, e.g. 1.5) in "
                        f"(0, {CONTEXT_SCORE_MAX:g}] (a bonus per unit)")
    return text, own


def read_lines(hotwords: Hotwords) -> Tuple[str, List[Tuple[str, str, Optional[float]]]]:
    """(what the phrases are called in messages, [(where, phrase, its own score or None)]) of a hotword file's
    path or a list of phrases, blank lines skipped (:func:`split_line`'s refusals naming the line)."""
    listed = isinstance(hotwords, (list, tuple))
    if listed:
        name, rows = "hotwords", list(enumerate(hotwords))
    else:
        name = os.fspath(hotwords)
        rows = list(utf8_lines(name))
    out = []
    for lineno, raw in rows:
        where = f"{name}[{lineno}]" if listed else f"{name}:{lineno}"
        if listed and isinstance(raw, str) and any(end in raw.rstrip("\r\n") for end in "\r\n"):
            # a file's reader ends a line there (utf8_lines): the same text must not be one phrase in a list (an
            # item's own line end, as readlines() leaves it, is fine)
            raise UserError(f"{where}: {raw!r} holds a line break: a list item is one phrase (a file, one a line)")
        text, own = split_line(raw, where)
        if text:
            out.append((where, text, own))
    return name, out


def units_case(tokenizer: Any) -> str:
    """The case phrases are put in before spelling: a BPE model's own (``tokenizer.case``), else that of the units'
    letters: "upper" where every cased letter of the units is upper case, "lower" where every one is lower case,
    else "keep" (issue 82, F5: lower-case units and an upper-case list)."""
    own = getattr(tokenizer, "case", None)
    if own is not None:
        return own
    letters = "".join(t for t in tokenizer.symbol_table if not BRACKETED.fullmatch(t))
    upper, lower = letters != letters.lower(), letters != letters.upper()
    return "upper" if upper and not lower else "lower" if lower and not upper else "keep"


def read_phrases(hotwords: Hotwords, tokenizer: Any, score: float, reserved: Iterable[int] = (),
                 norm: Optional[TextNorm] = None, dropped: Optional[List[str]] = None,
                 texts: Optional[List[str]] = None) -> List[Tuple[List[int], float]]:
    """[(unit ids, per-unit score)] of a hotword file or list (module docstring); UserError naming the line.

    Args:
        tokenizer: the model's (``text2tokens`` and ``symbol_table``, ``unk_id``).
        score: the per-unit score of a phrase without its own (``--context_score``).
        reserved: unit ids no phrase may hold (the blank, sos/eos) besides ``<unk>``.
        norm: the normaliser (default: the units' case, :func:`units_case`; punctuation refused).
        dropped: where given, a phrase the units cannot spell is left out, its message appended here, instead of
            refused (``recognize --context_unspellable drop``: a public list may hold a character that the
            training transcripts lack).
        texts: where given, each phrase kept is appended here as text (normalised, as spelled).
    """
    name, rows = read_lines(hotwords)
    speller = Speller(tokenizer, score, reserved, norm, dropped)
    seen: dict = {}
    out: List[Tuple[List[int], float]] = []
    for where, text, given in rows:
        phrase = speller(text, given, where)
        if phrase is None:
            continue
        units, own, text = phrase
        key = tuple(units)
        if key in seen:
            first, index = seen[key]
            logging.warning("%s: the phrase %r is the same units as %s; merged (keeping the higher score)", where,
                            text, first)
            out[index] = (units, max(out[index][1], own))
            continue
        seen[key] = (where, len(out))
        out.append((units, own))
        if texts is not None:
            texts.append(text)
        if len(out) > PHRASES_MAX:
            raise UserError(f"{name}: more than {PHRASES_MAX} phrases: {PHRASES_WHY}")
    if not out and dropped:
        raise UserError(f"{name}: the units spell none of its phrases ({dropped[0]})")
    if not out:
        raise UserError(f"{name}: no phrase (empty, or blank lines only); give one phrase a line, or leave the "
                        f"hotwords out to decode without biasing")
    return out


class Speller:
    """``speller(phrase, its own score or None, where)`` -> (unit ids, per-unit score, the phrase normalised), or,
    with ``dropped``, None for a phrase the units cannot spell (its message appended there); UserError naming
    ``where``. What depends on the units alone (their case, whether they are whole words) is found once, here."""

    def __init__(self, tokenizer: Any, score: float, reserved: Iterable[int] = (), norm: Optional[TextNorm] = None,
                 dropped: Optional[List[str]] = None):
        self.tokenizer, self.score, self.dropped = tokenizer, score, dropped
        self.norm = norm or TextNorm(case=units_case(tokenizer), punctuation="refuse")
        self.banned = set(reserved) | {tokenizer.unk_id}
        # Whole-word character units without their letters (tiny_en's): a word they lack falls back to its
        # characters, and where those are units at all they are one-letter words ("A", "I"), so the spelling is
        # another text. Units that also hold the letters of their words (a code-switch table) spell it by letters.
        words = [t for t in tokenizer.symbol_table if len(t) > 1 and not BRACKETED.fullmatch(t) and SPACE not in t
                 and not CJK.search(t) and t not in getattr(tokenizer, "non_lang_syms", ())]
        self.word_units = (isinstance(tokenizer, CharTokenizer) and bool(words)
                           and not all(c in tokenizer.symbol_table for w in words for c in w))

    def __call__(self, raw: str, given: Optional[float], where: str) -> Optional[Tuple[List[int], float, str]]:
        counts = NormCounts()
        text = self.norm(raw, counts, 1)
        if counts.refused:
            raise UserError(f"{where}: punctuation {counts.refused[0][1]!r} in the phrase {raw!r}: "
                            f"the units spell no punctuation; remove it")
        try:
            return self._spell(text, where), self.score if given is None else given, text
        except UserError as e:
            if self.dropped is None:
                raise
            self.dropped.append(str(e))
            return None

    def _spell(self, text: str, where: str) -> List[int]:
        """The unit ids of ``text``; UserError naming ``where`` and the unit (or whole word) that is missing."""
        tok = self.tokenizer
        tokens = tok.text2tokens(text)
        if not tokens:
            raise UserError(f"{where}: the phrase {text!r} has no unit")
        lacking = self.word_units and next((w for w in text.split() if not CJK.search(w) and w not in
                                            tok.symbol_table and w not in tok.non_lang_syms), None)
        if lacking:
            raise UserError(f"{where}: the phrase {text!r} cannot be spelled with the units {tok.symbol_table_path}: "
                            f"they are whole words and {lacking!r} is not one of them (its characters would spell "
                            f"other words)")
        units = []
        for token in tokens:
            unit = tok.symbol_table.get(token)
            if unit is None or unit in self.banned:
                raise UserError(f"{where}: the phrase {text!r} cannot be spelled with the units "
                                f"{tok.symbol_table_path}: {token!r} is not one of them (case, script?)")
            units.append(unit)
        return units


def free_units(tokenizer: Any) -> Tuple[int, ...]:
    """The units that earn no bonus (``ContextGraph``): the word boundary, where the units write it alone."""
    return (tokenizer.symbol_table[SPACE],) if SPACE in tokenizer.symbol_table else ()


def context_graph(hotwords: Optional[Hotwords], tokenizer: Any, score: float,
                  reserved: Iterable[int] = (), dropped: Optional[List[str]] = None) -> Optional[ContextGraph]:
    """The context graph of ``hotwords`` (see :func:`read_phrases`), or None without hotwords (None, or an empty
    list: no biasing)."""
    if hotwords is None or (isinstance(hotwords, (list, tuple)) and not hotwords):
        return None
    texts: List[str] = []
    graph = ContextGraph(read_phrases(hotwords, tokenizer, score, reserved, dropped=dropped, texts=texts), texts,
                         free_units(tokenizer))
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
        speller = Speller(tokenizer, score, reserved, dropped=dropped)
        self.free = free_units(tokenizer)
        index: Dict[str, int] = {}
        self.table: List[Optional[Tuple[List[int], float, str]]] = []   # None: dropped (``dropped``)
        self.lists: Dict[str, List[int]] = {}
        for key, (lineno, phrases) in lists.items():
            for raw in phrases:
                if raw not in index:
                    index[raw] = len(self.table)
                    where = f"{path}:{lineno}"
                    self.table.append(speller(*split_line(raw, where), where))
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
        phrases = [self.table[i] for i in own]
        return ContextGraph([p[:2] for p in phrases], [p[2] for p in phrases], self.free) if own else None
