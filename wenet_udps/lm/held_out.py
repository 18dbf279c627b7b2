"""The LM's held-out check, once for every entry point (``wenet_udps.bin.build_lm``, run.sh stage 2 through it,
``tools/make_lm_book_text.py``): an LM that has seen a dev or test sentence makes the dev-tuned weights and the test
WER meaningless.

Sentences are compared in :func:`wenet_udps.utils.text_norm.match_form` (lower case, punctuation removed, white
space collapsed: ``The cat ran.`` is the dev sentence ``THE CAT RAN``), as tokens: words, or characters for a
character LM (Mandarin has no spaces). Held-out texts are Kaldi texts read by the one reader
(``wenet_udps.utils.kaldi_files``: a byte-order mark dropped, a line that is not UTF-8 an error naming it).

An LM line is a held-out sentence when it equals one, or when it *contains* one of at least
:data:`CONTAINED_MIN` tokens (8 words, 12 characters) as a run of whole tokens. Shorter held-out sentences (AN4's
``YES``, ``ENTER ONE FIVE``, mini LibriSpeech test's ``I RETURNED TO THE DRAWING ROOM``) are refused only as whole
lines: books hold such phrases by chance, and a 3-gram LM learns no more from them there than from any text. The
containment check is linear in the LM text: each held-out sentence is indexed by its first :data:`CONTAINED_MIN`
tokens, and each position of a line is one look-up of the tokens starting there (a whole comparison only where that
anchor matches).
"""
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from wenet_udps.lm.arpa import LmError
from wenet_udps.utils.kaldi_files import read_table
from wenet_udps.utils.text_norm import match_form

CONTAINED_MIN = {"words": 8, "chars": 12}


@dataclass(frozen=True)
class Match:
    """Where a held-out sentence was found: ``where`` is ``path:line`` of the held-out text."""
    where: str
    sentence: str
    contained: bool


def tokens_of(text: str, char: bool) -> Tuple[str, ...]:
    """The comparison tokens of a sentence: words of its match form, or its characters (spaces dropped)."""
    form = match_form(text)
    return tuple(form.replace(" ", "")) if char else tuple(form.split())


class HeldOut:
    """The sentences of held-out (dev, test) Kaldi texts, for :meth:`find`.

    char: compare characters (a character LM) instead of words.
    """

    def __init__(self, paths: Sequence[str], *, char: bool = False):
        self.char = char
        self.min_tokens = CONTAINED_MIN["chars" if char else "words"]
        self.whole: Dict[Tuple[str, ...], Match] = {}
        self.anchors: Dict[Tuple[str, ...], List[Tuple[Tuple[str, ...], Match]]] = {}
        for path in paths:
            for sentence, lineno in read_table(path, key_name="utterance key", allow_empty_value=True).values():
                tokens = tokens_of(sentence, char)
                if not tokens or tokens in self.whole:
                    continue
                match = Match(f"{path}:{lineno}", sentence, False)
                self.whole[tokens] = match
                if len(tokens) >= self.min_tokens:
                    self.anchors.setdefault(tokens[:self.min_tokens], []).append(
                        (tokens, Match(match.where, sentence, True)))

    def __len__(self) -> int:
        return len(self.whole)

    def find(self, text: str) -> Optional[Match]:
        """The held-out sentence that ``text`` is, or contains (one of at least ``min_tokens`` tokens), or None."""
        tokens = tokens_of(text, self.char)
        if tokens in self.whole:
            return self.whole[tokens]
        n = self.min_tokens
        for i in range(len(tokens) - n + 1):
            for sentence, match in self.anchors.get(tokens[i:i + n], ()):
                if tokens[i:i + len(sentence)] == sentence:
                    return match
        return None

    def matches(self, sources: Iterable[Tuple[str, Iterable[Tuple[int, str]]]]
                ) -> Iterable[Tuple[str, Match, str]]:
        """(``path:line`` of the LM text, the held-out match, the LM text line) of every line of ``sources`` (path,
        its (line number, sentence) rows) that is or contains a held-out sentence, in order."""
        for path, rows in sources:
            for lineno, sentence in rows:
                match = self.find(sentence)
                if match is not None:
                    yield f"{path}:{lineno}", match, sentence

    def refuse(self, sources: Iterable[Tuple[str, Iterable[Tuple[int, str]]]]) -> None:
        """LmError naming the first LM text line that is, or contains, a held-out sentence, and that sentence's
        line."""
        for line, match, sentence in self.matches(sources):
            how = "contains" if match.contained else "is"
            raise LmError(f"{line}: this LM text line {how} the held-out sentence of {match.where} "
                          f"({match.sentence[:50]!r}; line {sentence[:50]!r}): remove every dev and test sentence "
                          "from the LM text")
