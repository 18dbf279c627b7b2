"""The word n-gram LM of ``joint_ctc_attention_lm``: each prefix of the joint CTC/attention search carries the LM's
state and the word it is spelling, and a word is scored when it ends, as the lexicon search of the other ``*_lm``
modes scores it (``lm.search.LmSearch``: the same KenLM model, lexicon, ``lm_weight`` and ``word_score``): on its
end, lm_weight x the LM's log-probability (KenLM's, base 10, as flashlight's decoder adds it) + word_score; at the
end of the sentence lm_weight x the LM's end-of-sentence score. As in that search only the LM's words can be
spelled: a prefix may take only the units that continue some word of the lexicon, or end one.

Where a word ends depends on the units (:func:`word_rule`): the space unit '▁' of a character model of spaced text
(letters or whole words) ends the word before it; a BPE piece starting with '▁' starts a word and so ends the one
before; in a Mandarin character LM (or units that are whole words, without a space unit) every unit is a word, and
where such an LM also holds English words (code-switch: ``build_lm --char_lm`` keeps them whole) with the space unit,
'▁' ends each word and the next CJK character ends a CJK character, so that two words join without '▁' only when
both are CJK (the lexicon search's rule, ``LmSearch.units``) and an English word may be spelled by several units
(letters). The end of the sentence ends the last word. The search thus emits a sentence's words as
``LmSearch.units`` spells them, and its text is the tokenizer's ``detokenize`` of them, as every mode's is
(``LmSearch`` checks that the one detokeniser reads such units back as the words).
"""
import math
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from wenet_udps.text.base_tokenizer import SPACE
from wenet_udps.utils.cli import UserError

RULES = ("space", "piece", "whole")
# A prefix's state: (KenLM state, the units of the word it is spelling; None at the start of the sentence).
State = Tuple[Any, Optional[Tuple[int, ...]]]


def word_rule(spellings: Mapping[Any, List[int]], symbols: Mapping[str, int], space: Optional[int],
              char_lm: bool) -> str:
    """"space" (``space`` is the word boundary unit), "piece" (units starting with '▁' start words) or "whole"
    (every unit is a word); UserError for units that do not say where a word ends.

    What the units say comes first, in this order: a separate space unit (``space``: the boundary unit of the
    lexicon search, ``LmSearch.sil_id``) ends every word, even where every word is one unit (word units with '▁'
    between them, as tiny_en's: read as "whole", the words were glued together, issue 80), and the next CJK character
    ends a character LM's CJK character (the scorer's ``joining``); else a Mandarin character LM's words are its
    characters; else units that are all words are words; else '▁'-prefixed BPE pieces start words."""
    if space is not None:
        return "space"
    if char_lm:
        return "whole"
    if all(len(ids) == 1 for ids in spellings.values()):
        return "whole"
    if any(s.startswith(SPACE) for s in symbols):
        return "piece"
    raise UserError("joint_ctc_attention_lm scores a word when it ends, and these units do not mark the ends: they "
                    "have no space unit '▁' and no BPE pieces starting with '▁'")


class WordScorer:
    """The ``words`` of ``transformer.joint_search.joint_beam_search`` (see the module docstring).

    Args:
        lm: flashlight's KenLM (``start``, ``score``, ``finish``); lexicon: spelling (unit ids) -> the LM's index of
            the word; rule: see :func:`word_rule`; space: the boundary unit of the "space" rule; starts: the units
            starting with '▁' of the "piece" rule; lm_weight, word_score: as the lexicon search's; joining: the
            words of one unit that the "space" rule ends without it, when the next such word starts (a character
            LM's CJK characters; any other word is followed by the space unit before a word: issue 80, a
            code-switch LM glued 'IPHONE APP', and its English words spelled by letters were never written).
    """

    def __init__(self, lm: Any, lexicon: Mapping[Tuple[int, ...], int], rule: str, space: Optional[int],
                 starts: Sequence[int], lm_weight: float, word_score: float, joining: Sequence[int] = ()):
        if rule not in RULES:
            raise ValueError(f"word rule {rule!r}: valid are {', '.join(RULES)}")
        self.lm, self.lexicon, self.rule, self.space = lm, dict(lexicon), rule, space
        self.lm_weight, self.word_score = lm_weight, word_score
        self.starts = frozenset(starts)
        self.joining = frozenset(joining)
        # Each proper prefix of a spelling -> the units that continue it (sorted: the order never depends on a set).
        nexts: Dict[Tuple[int, ...], set] = {}
        for ids in self.lexicon:
            for i in range(1, len(ids)):
                nexts.setdefault(ids[:i], set()).add(ids[i])
        self.nexts = {p: sorted(units) for p, units in nexts.items()}
        self.firsts = sorted({ids[0] for ids in self.lexicon})
        self.singles = sorted(ids[0] for ids in self.lexicon if len(ids) == 1)  # the words of one unit
        # the joining words of one unit that begin no longer word (so the next unit never both continues and ends it)
        self.joining_singles = [u for u in self.singles if u in self.joining and (u,) not in self.nexts]
        self.joining_words = frozenset((u,) for u in self.joining_singles)
        self._allowed: Dict[Optional[Tuple[int, ...]], Tuple[List[int], bool]] = {}
        self._allowed_lock = threading.Lock()  # one scorer serves every thread decoding with its LM

    def initial(self) -> State:
        return self.lm.start(False), None

    def allowed(self, state: State) -> Tuple[List[int], bool]:
        """(the units that may follow, whether the sentence may end here)."""
        word = state[1]
        with self._allowed_lock:
            if word not in self._allowed:
                self._allowed[word] = self._allowed_after(word)
            return self._allowed[word]

    def _allowed_after(self, word: Optional[Tuple[int, ...]]) -> Tuple[List[int], bool]:
        if self.rule == "whole":
            return self.singles, True
        if word is None:
            return self.firsts, True
        if not word:  # after the space unit: a word must follow
            return self.firsts, False
        complete = word in self.lexicon
        units = list(self.nexts.get(word, []))
        if complete:
            units += [self.space] if self.rule == "space" else [u for u in self.firsts if u in self.starts]
            units += self.joining_singles if self.rule == "space" and word in self.joining_words else []
        return sorted(set(units)), complete

    def _end_word(self, state: State) -> Tuple[Any, float]:
        """The LM state after the word ``state`` is spelling ends, and the score that adds (-inf for no word)."""
        lm_state, word = state
        if not word or self.rule == "whole":  # a "whole" word was scored on its unit
            return lm_state, 0.0
        index = self.lexicon.get(word)
        if index is None:
            return lm_state, -math.inf
        lm_state, score = self.lm.score(lm_state, index)
        return lm_state, self.lm_weight * score + self.word_score

    def extend(self, state: State, units: Sequence[int], eos: int) -> List[Tuple[State, float]]:
        """(state, score added) of the prefix extended by each of ``units``; ``eos`` ends the sentence."""
        out: List[Tuple[State, float]] = []
        ended: Optional[Tuple[Any, float]] = None  # the current word's end, scored once for all the units
        allowed, may_end = self.allowed(state)
        allowed = set(allowed)
        for unit in units:
            if unit == eos:
                out.append((state, self.finish(state) if may_end else -math.inf))
            elif unit not in allowed:
                out.append((state, -math.inf))
            elif self.rule == "whole":
                lm_state, score = self.lm.score(state[0], self.lexicon[(unit,)])
                out.append(((lm_state, None), self.lm_weight * score + self.word_score))
            elif self.rule == "space" and unit == self.space:
                ended = ended or self._end_word(state)
                out.append(((ended[0], ()), ended[1]))
            elif self.rule == "space" and state[1] in self.joining_words and (unit,) in self.joining_words:
                ended = ended or self._end_word(state)
                out.append(((ended[0], (unit,)), ended[1]))
            elif self.rule == "piece" and unit in self.starts and state[1]:
                ended = ended or self._end_word(state)
                out.append(((ended[0], (unit,)), ended[1]))
            else:
                out.append(((state[0], (state[1] or ()) + (unit,)), 0.0))
        return out

    def finish(self, state: State) -> float:
        """The score the end of the sentence adds after this prefix: its last word's, then the LM's end."""
        lm_state, score = self._end_word(state)
        if score == -math.inf:
            return score
        return score + self.lm_weight * self.lm.finish(lm_state)[1]
