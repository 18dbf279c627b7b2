"""The LM's held-out check, once for every entry point (``wenet_udps.bin.build_lm``, run.sh stage 2 through it,
``tools/make_lm_book_text.py``): an LM that has seen a dev or test sentence makes the dev-tuned weights and the test
WER meaningless.

Sentences are compared as a reader sees them, in :func:`wenet_udps.utils.text_norm.match_form` (NFKC, format
characters such as a zero-width space removed, lower case, punctuation removed, white space collapsed: ``The cat
ran.`` and fullwidth ``ＴＨＥ ＣＡＴ`` are the dev sentences ``THE CAT RAN`` and ``THE CAT``), as tokens: words,
each CJK character a token of its own as a character LM learns it (Mandarin has no spaces; a Mandarin text built
without ``--char_lm`` is a character LM all the same; a code-switch LM's English words stay words), non-language
symbols (``<noise>``) dropped by the scorer's tag rule (:func:`tokens_of`). Held-out texts are Kaldi texts read by the
one reader (``wenet_udps.utils.kaldi_files``: a byte-order mark dropped, a line that is not UTF-8 an error naming
it). A letter that only looks like the recipe's (a Cyrillic ``А`` in English text) is no match;
:meth:`HeldOut.refuse` refuses an LM text line holding a letter of a script that is not the recipe's
(``text_norm.foreign_letter``).

An LM text line is a held-out sentence when it equals one, or when it holds every n-gram of one at the LM's order
(``order``: 3 for a 3-gram LM). Why the order: an n-gram LM learns a text as its n-grams. A line holding every
n-gram of a held-out sentence (inside more words, or in two places of the line) gives the LM each of the
probabilities with which it scores that sentence's words after the first ``order - 1``, exactly as the sentence
itself would, less only the n-grams at its start and end (AN4's 6-word test sentence inside a longer line gave a
3-gram LM all 4 of its inner trigrams). A held-out sentence shorter than the order has no such n-gram (every
n-gram of it holds the sentence start or end), so it is refused as a whole line only: inside a line, ``YES`` or
``ENTER ONE FIVE`` (for a 4-gram LM) is a phrase any text may use, learned as any text's. The n-grams of a line are
looked up in an index of the held-out sentences' n-grams: linear in the LM text.

The LM text is also read as one stream of words across line breaks (:class:`Stream`, issue 80 H): a held-out
sentence of ``order`` tokens or more is refused when the LM text lines of a window of adjacent lines, at most as many
lines as the sentence has tokens, hold every one of its n-grams at the LM's order, the n-grams across the breaks
between them included (``MOTHER CAT WHITE EAT`` and then ``WHITE EAT FATHER`` give a 3-gram LM each of the trigrams
of ``MOTHER CAT WHITE EAT FATHER``, its first and its last with the lines' start and end; a sentence wrapped over two
lines is in the text, as it is with a line put between its parts). The window is what keeps the rule from being
over-strict: it is the room a sentence takes when each of its words is on a line of its own, so the n-grams common
in any text, met far apart in a long text (``I DON'T KNOW`` on one line, ``DON'T KNOW WHAT`` a page later), are no
leak, and a sentence shorter than the order has no n-gram to look for, as above.
"""
import collections
from collections import defaultdict
from dataclasses import dataclass
from typing import Counter, Deque, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from wenet_udps.lm.arpa import LmError, char_lm_tokens
from wenet_udps.lm.options import DEFAULT_ORDER
from wenet_udps.utils.kaldi_files import read_table
from wenet_udps.utils.text_norm import foreign_letter, is_symbol, match_form, strip_tags, text_scripts


@dataclass(frozen=True)
class Match:
    """Where a held-out sentence was found: ``where`` is ``path:line`` of the held-out text."""
    where: str
    sentence: str
    contained: bool


def tokens_of(text: str) -> Tuple[str, ...]:
    """The comparison tokens of a sentence: the words of its match form, each CJK character a token of its own.

    Non-language symbols (``<noise>``, ``[laughter]``, ``{NOISE}``) are dropped and ``<...>`` tags cut out of words,
    by the scorer's rule (``text_norm.strip_tags``): they are no words of the sentence, and a dev line ``<noise> SHE
    SELLS ...`` is the sentence ``SHE SELLS ...`` of an LM text. Each word is split as a character LM splits it
    (``arpa.char_lm_tokens``, the char tokenizer's split: CJK characters, other words whole), in a word LM too:
    ``我们 今天`` and ``我 们 今 天`` are one sentence to a reader (and to a character LM, which a Mandarin text built
    without ``--char_lm`` is), and a character LM's English words are words (issue 80): ``IPHONE APP`` is not
    ``IPHONEAPP``. Word and character LMs are thus compared by one rule."""
    words = [strip_tags(w) for w in match_form(text).split() if not is_symbol(w)]
    return tuple(t for w in words if w for t in char_lm_tokens(w))


def _ngrams(tokens: Sequence[str], n: int) -> Set[Tuple[str, ...]]:
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


class HeldOut:
    """The sentences of held-out (dev, test) Kaldi texts, for :meth:`find`.

    order: the n-gram order of the LM the text is for (the containment rule of the module docstring).
    """

    def __init__(self, paths: Sequence[str], *, order: int = DEFAULT_ORDER):
        self.order = order
        self.whole: Dict[Tuple[str, ...], Match] = {}
        self.grams: List[Tuple[int, Match]] = []  # per sentence of >= order tokens: its distinct n-grams, its match
        self.index: Dict[Tuple[str, ...], List[int]] = defaultdict(list)  # n-gram -> the sentences holding it
        self.sentences: List[str] = []
        self.longest = 1  # tokens of the longest held-out sentence: the widest stream window
        for path in paths:
            for sentence, lineno in read_table(path, key_name="utterance key", allow_empty_value=True).values():
                self.sentences.append(sentence)
                tokens = tokens_of(sentence)
                self.longest = max(self.longest, len(tokens))
                if not tokens or tokens in self.whole:
                    continue
                match = Match(f"{path}:{lineno}", sentence, False)
                self.whole[tokens] = match
                grams = _ngrams(tokens, order)
                if grams:
                    for gram in grams:
                        self.index[gram].append(len(self.grams))
                    self.grams.append((len(grams), Match(match.where, sentence, True)))

    def __len__(self) -> int:
        return len(self.whole)

    def scripts(self) -> List[str]:
        """The scripts of the held-out sentences' letters (``text_norm.text_scripts``)."""
        return text_scripts(self.sentences)

    def find(self, text: str) -> Optional[Match]:
        """The held-out sentence that ``text`` is, or holds every ``order``-gram of, or None."""
        tokens = tokens_of(text)
        if tokens in self.whole:
            return self.whole[tokens]
        shared: Dict[int, int] = defaultdict(int)
        for gram in _ngrams(tokens, self.order):
            for i in self.index.get(gram, ()):
                shared[i] += 1
        held = [i for i, n in shared.items() if n == self.grams[i][0]]
        return self.grams[min(held)][1] if held else None  # the first held-out line: the same in every run

    def stream(self) -> "Stream":
        """An empty :class:`Stream` of LM text lines for this check."""
        return Stream(self)

    def matches(self, sources: Iterable[Tuple[str, Iterable[Tuple[int, str]]]]
                ) -> Iterable[Tuple[str, Match, str]]:
        """(``path:line`` of the LM text, the held-out match, the LM text line) of every line of ``sources`` (path,
        its (line number, sentence) rows) that is or holds a held-out sentence, in order."""
        for path, rows in sources:
            for lineno, sentence in rows:
                match = self.find(sentence)
                if match is not None:
                    yield f"{path}:{lineno}", match, sentence

    def refuse(self, sources: Iterable[Tuple[str, Iterable[Tuple[int, str]]]],
               scripts: Optional[Sequence[str]] = None) -> None:
        """LmError naming the first LM text line that is, or holds every ``order``-gram of, a held-out sentence,
        and that sentence's line; with ``scripts`` (the recipe's: ``text_norm.text_scripts`` of its transcripts),
        first the first line holding a letter of another script, naming the letter."""
        if scripts:
            sources = [(path, list(rows)) for path, rows in sources]
            for path, rows in sources:
                for lineno, sentence in rows:
                    letter = foreign_letter(sentence, scripts)
                    if letter is not None:
                        raise LmError(f"{path}:{lineno}: this LM text line holds {letter}, a letter of none of the "
                                      f"recipe's scripts ({', '.join(scripts)}, those of its transcripts): a "
                                      f"look-alike hides a sentence from the held-out check, and the units cannot "
                                      f"spell it; correct or remove the line ({sentence[:50]!r})")
        sources = [(path, list(rows)) for path, rows in sources]
        for line, match, sentence in self.matches(sources):
            how = f"holds every {self.order}-gram of" if match.contained else "is"
            raise LmError(f"{line}: this LM text line {how} the held-out sentence of {match.where} "
                          f"({match.sentence[:50]!r}; line {sentence[:50]!r}): remove every dev and test sentence "
                          "from the LM text")
        # One stream over every file, in the order the LM learns them; the last lines kept to name a window's first.
        stream, recent = self.stream(), collections.deque(maxlen=self.longest)
        for path, rows in sources:
            for lineno, sentence in rows:
                across = stream.add(sentence)
                if across is not None:
                    first, match = across
                    start, at = recent[first - stream.lines] if first < stream.lines else (path, lineno)
                    lines = f"{path}:{at}-{lineno}" if start == path else f"{start}:{at} to {path}:{lineno}"
                    raise LmError(f"{lines}: these LM text lines hold, across their line breaks, every "
                                  f"{self.order}-gram of the held-out sentence of {match.where} "
                                  f"({match.sentence[:50]!r}): remove every dev and test sentence from the LM text")
                recent.append((path, lineno))


class _Run:
    """A held-out sentence's n-grams met in a :class:`Stream`'s last lines: (its first line, n-gram) per hit."""

    def __init__(self) -> None:
        self.hits: Deque[Tuple[int, Tuple[str, ...]]] = collections.deque()
        self.grams: Counter[Tuple[str, ...]] = collections.Counter()

    def copy(self) -> "_Run":
        run = _Run()
        run.hits, run.grams = collections.deque(self.hits), collections.Counter(self.grams)
        return run


class Stream:
    """LM text lines in order, read as one stream of words across their breaks (the module docstring's window).

    :meth:`add` takes the next line and tells whether it completes a window of adjacent lines holding every n-gram
    of a held-out sentence; such a line is not added, so that a caller who leaves it out (``make_lm_book_text``) goes
    on with the lines it keeps. Linear in the text: each n-gram is looked up once in the held-out index."""

    def __init__(self, held: HeldOut):
        self.held = held
        self.tail: List[Tuple[str, int]] = []  # the last order - 1 tokens of the stream, with their line
        self.lines = 0  # lines added
        self.runs: Dict[int, _Run] = {}  # held-out sentence (index of HeldOut.grams) -> its last run

    def add(self, text: str) -> Optional[Tuple[int, Match]]:
        """None, and ``text`` added as the next line; or (the window's first line, counted from 0 as added, the
        held-out sentence's match) when this line completes a window, and nothing added."""
        line, order = self.lines, self.held.order
        tokens = self.tail + [(t, line) for t in tokens_of(text)]
        touched: Dict[int, _Run] = {}
        for p in range(len(tokens) - order + 1):
            gram = tuple(t for t, _ in tokens[p:p + order])
            first = tokens[p][1]
            for i in self.held.index.get(gram, ()):
                run = touched.get(i)
                if run is None:
                    old = self.runs.get(i)
                    run = touched[i] = old.copy() if old is not None else _Run()
                run.hits.append((first, gram))
                run.grams[gram] += 1
                size = self.held.grams[i][0]
                # the window: at most as many lines as the sentence has tokens (its n-grams, and order - 1)
                while run.hits and run.hits[0][0] < line - size - order + 2:
                    _, dropped = run.hits.popleft()
                    run.grams[dropped] -= 1
                    if not run.grams[dropped]:
                        del run.grams[dropped]
                if len(run.grams) == size:
                    return run.hits[0][0], self.held.grams[i][1]
        self.runs.update(touched)
        self.tail = tokens[len(tokens) - order + 1:] if order > 1 else []
        self.lines += 1
        return None
