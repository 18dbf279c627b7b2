"""ARPA n-gram files: checked while read (a corrupt one is one line naming file and line), identified by path,
order, n-gram counts, size and SHA-256 (written beside every LM result so that no result mixes LMs silently),
and their vocabulary compared with a text (the out-of-vocabulary rate that shows an LM built for another corpus:
:func:`check_oov`, run by check_lm and by every decode with an LM).
KenLM binaries (:mod:`.binary`) are identified the same way."""
import logging
import math
import os
import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Set, Tuple

from wenet_udps.text.char_tokenizer import char_split
from wenet_udps.text.text_utils import is_cjk
from wenet_udps.utils.cli import UserError, open_input
from wenet_udps.utils.source_info import file_sha256
from wenet_udps.utils.text_norm import CJK, read_form

SPECIAL_WORDS = ("<s>", "</s>", "<unk>")  # KenLM's sentence marks and unknown word: not spellable words
_COUNT = re.compile(r"^ngram\s+(\d+)\s*=\s*(\d+)\s*$")
_SECTION = re.compile(r"^\\(\d+)-grams:\s*$")
_FIELDS = re.compile(r"[ \t]+")  # KenLM's separators within an ARPA line
MAX_OOV = 0.1  # above this share of a text's words missing from the LM, check_oov warns


class LmError(UserError):
    """A missing, corrupt or unusable LM."""


@dataclass
class LmInfo:
    """An LM file's identity and vocabulary (its unigrams). counts[n - 1] = number of n-grams; kind: "ARPA" or
    "KenLM binary"; words_sha256: a KenLM binary's words file's SHA-256 (``binary.lm_content``), "" for ARPA."""
    path: str
    order: int
    counts: List[int]
    size: int
    sha256: str
    words: List[str]
    kind: str = "ARPA"
    words_sha256: str = ""

    def source(self) -> Dict[str, str]:
        """The ``lm*`` lines of a result's decode.info."""
        return {"lm": self.path, "lm_order": str(self.order), "lm_ngrams": ",".join(map(str, self.counts)),
                "lm_size": str(self.size), "lm_sha256": self.sha256}

    def describe(self) -> str:
        return (f"{self.path} ({self.kind}, {self.order}-gram, {len(self.words)} words, {self.size} bytes, "
                f"sha256 {self.sha256[:12]})")


def read_arpa(path: str) -> LmInfo:
    """Read and check an ARPA file: its header, every section's count and its unigram vocabulary.

    Raises:
        LmError: the file is missing, not an ARPA file (:func:`.binary.read_lm` tells a KenLM binary apart), its
            sections do not match the header's counts (a truncated file) or come out of order, or an n-gram line is
            one KenLM would refuse (:func:`_read_ngram`: a NaN or positive log-probability, a word that is no
            unigram), each naming the file and line.
    """
    if not os.path.isfile(path):
        raise LmError(f"LM file {path} does not exist (build it with run.sh's LM stage or pass an ARPA file or "
                      f"KenLM binary)")
    counts: Dict[int, int] = {}
    seen: Dict[int, int] = {}
    words: List[str] = []
    vocab: Set[str] = set()
    section = None  # None: before \data\; 0: in the header; n: in the n-grams section
    ended = False
    with open_input(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise LmError(f"{path}:{lineno}: not UTF-8 text; an ARPA file is expected (a KenLM binary or a "
                              f"corrupt file?)") from None
            if not line:
                continue
            if section is None:
                if line != "\\data\\":
                    raise LmError(f"{path}:{lineno}: not an ARPA file (expected '\\data\\' first, got "
                                  f"{line[:40]!r})")
                section = 0
            elif line == "\\end\\":
                ended = True
                break
            elif (m := _SECTION.match(line)) is not None:
                if int(m.group(1)) not in counts:
                    raise LmError(f"{path}:{lineno}: section \\{m.group(1)}-grams: not announced in the header")
                if int(m.group(1)) != section + 1:  # KenLM reads the sections in order, the unigrams first
                    raise LmError(f"{path}:{lineno}: section \\{m.group(1)}-grams: out of order (expected "
                                  f"\\{section + 1}-grams:)")
                section = int(m.group(1))
                seen[section] = 0
            elif section == 0:
                m = _COUNT.match(line)
                if m is None:
                    raise LmError(f"{path}:{lineno}: bad header line {line[:40]!r} (expected 'ngram N=count')")
                counts[int(m.group(1))] = int(m.group(2))
            else:
                ngram = _read_ngram(path, lineno, line, section, vocab)
                seen[section] += 1
                if section == 1:
                    words.append(ngram[0])
                    vocab.add(ngram[0])
    if not ended:
        raise LmError(f"{path}: no '\\end\\' line: the file is truncated (rebuild it)")
    short = [f"{n}-grams {seen.get(n, 0)} of {c}" for n, c in sorted(counts.items()) if seen.get(n, 0) != c]
    if short or not counts:
        raise LmError(f"{path}: the sections do not match the header ({'; '.join(short) or 'no counts'}): the file "
                      f"is corrupt (rebuild it)")
    order = max(counts)
    if order < 2:
        raise LmError(f"{path}: a unigram LM; KenLM needs order 2 or more (rebuild it with --order 2 or more)")
    return LmInfo(path=os.path.abspath(path), order=order, counts=[counts[n] for n in range(1, order + 1)],
                    size=os.path.getsize(path), sha256=file_sha256(path), words=words)


def _read_ngram(path: str, lineno: int, line: str, order: int, vocab: Set[str]) -> List[str]:
    """The words of the ``order``-gram ``line`` (``log10 prob  w1 .. wn  [backoff]``, separated by spaces or
    tabs), checked as KenLM checks them when it loads the file (here the error names the file and line, and comes
    before any decoding or build_binary): a finite log-probability that is not positive (-inf allowed: a word
    never predicted), a backoff weight that is a number, and higher-order words that are all unigrams.

    vocab: the unigrams read so far (all of them once the higher sections start: they come in order)."""
    fields = _FIELDS.split(line)
    if len(fields) not in (order + 1, order + 2):
        raise LmError(f"{path}:{lineno}: bad {order}-gram line {line[:40]!r} (expected a log-probability, "
                      f"{order} word(s) and an optional backoff weight)")
    try:
        prob, backoff = float(fields[0]), float(fields[order + 1]) if len(fields) == order + 2 else 0.0
    except ValueError:
        raise LmError(f"{path}:{lineno}: bad {order}-gram line {line[:40]!r} (the log-probability and backoff "
                      f"weight must be numbers)") from None
    if math.isnan(prob) or prob > 0:
        raise LmError(f"{path}:{lineno}: log-probability {fields[0]} of {' '.join(fields[1:order + 1])!r}: a log10 "
                      f"probability must be a number <= 0 (KenLM refuses this file; rebuild it)")
    if math.isnan(backoff):
        raise LmError(f"{path}:{lineno}: backoff weight {fields[order + 1]} of {' '.join(fields[1:order + 1])!r} "
                      f"is not a number (KenLM refuses this file; rebuild it)")
    ngram = fields[1:order + 1]
    if order > 1:
        missing = [w for w in ngram if w not in vocab]
        if missing:
            raise LmError(f"{path}:{lineno}: the {order}-gram {' '.join(ngram)!r} has the word {missing[0]!r}, "
                          f"which is not among the unigrams (KenLM refuses this file; rebuild it)")
    return ngram


def char_lm_tokens(text: str) -> List[str]:
    """The words of ``text`` in a character LM: each CJK character, and each run of anything else between spaces
    and CJK characters whole (an English word, a number, ``<noise>``), in the read form (NFKC, no format
    characters). The char tokenizer's split (``text.char_tokenizer.char_split``), so that the LM's words are the
    units' tokens: a code-switch LM holds ``IPHONE``, not the letters I P H O N E (issue 80). The one rule of the
    LM text (``build.lm_lines``), its words in a text (:func:`words_of_text`) and the held-out check
    (``held_out.tokens_of``)."""
    return char_split(text, split_with_space=True)


def is_char_lm(words: List[str]) -> bool:
    """An LM whose Mandarin words are characters: of its words holding a CJK character, more than half are one CJK
    character (a character LM, which may also hold English words, as a code-switch one does, in any number; a word
    LM of segmented Mandarin holds mostly words of several characters)."""
    cjk = [w for w in words if w not in SPECIAL_WORDS and CJK.search(w)]
    return bool(cjk) and sum(is_cjk(w) for w in cjk) * 2 > len(cjk)


def words_of_text(lines: Iterable[str], char_lm: bool) -> List[str]:
    """The LM's words in ``lines`` of text: whitespace-separated words, or for a character LM its
    :func:`char_lm_tokens`; in the read form (NFKC, no format characters) in which the LM learnt them."""
    lines = [read_form(line) for line in lines]
    if char_lm:
        return [t for line in lines for t in char_lm_tokens(line)]
    return [w for line in lines for w in line.split()]


def oov_rate(vocab: Set[str], words: List[str]) -> float:
    """Share of ``words`` (running words, not types) not in ``vocab``; 0 for no words."""
    return sum(w not in vocab for w in words) / len(words) if words else 0.0


def check_oov(info: LmInfo, sentences: Iterable[str], text: str, max_oov: float = MAX_OOV) -> Tuple[float, int]:
    """(OOV rate, running words) of ``sentences`` (the transcripts of ``text``: a dev text, or the references of
    a list being decoded) under the LM ``info``, with one warning naming both above ``max_oov``: the LM's search
    can output LM words only, so such an LM (built for another corpus) cannot recognise that share of the words.
    The one check of check_lm and of every decode with an LM (``decode_dataset``)."""
    words = words_of_text(sentences, is_char_lm(info.words))
    rate = oov_rate(set(info.words), words)
    if rate > max_oov:
        logging.warning("%.1f %% of the %d words of %s are not in the LM %s (more than %.0f %%), and decoding with "
                        "it can output LM words only: was it built for another corpus?", 100 * rate, len(words),
                        text, info.path, 100 * max_oov)
    return rate, len(words)
