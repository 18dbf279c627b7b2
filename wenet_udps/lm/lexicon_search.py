"""The lexicon-constrained CTC beam search with a word LM: flashlight-text's ``LexiconDecoder`` (CTC criterion, no
log-add, max smearing) step for step, with one difference: hypotheses of equal score are ranked by what they are,
never by where they lie in memory.

Why not flashlight's own loop: its beam keeps the ``beam_size`` best candidates of a frame with ``nth_element``
after ordering them by the addresses of their LM state and trie node, so among candidates of exactly equal score
the ones kept depend on the heap. Equal scores are common here, not a rounding accident: a word's trie node holds
its unigram score after ``<s>`` as look-ahead, so at the start of a sentence (and with ``word_score`` 0) "the word
is emitted" and "the word is still being spelled" score exactly alike; with ``lm_weight`` 0 every such pair ties.
Which of them a full beam kept decided the n-best, so ``attention_rescoring_lm`` gave different text from call to
call (issue 66, case 1: 4 or 5 hypotheses in the n-best of one utterance).

Here a hypothesis is the key ``(words, node, token, after_blank)`` with a score (``words``: a :class:`History`,
ordered as the tuple of its words). The key is exactly what
flashlight merges on (its LM states are cached per word history, so equal states are equal word histories) and it
orders ties: candidates are ranked by (score descending, at a word boundary first, key), a total order, so the
beam, the n-best and their order are a function of the emissions alone. Scores are computed with flashlight's
arithmetic (doubles, the trie's and LM's float32 values), so without ties the result is flashlight's (checked on
the 270 utterances of issue 66's tiny_en model at five settings: equal wherever flashlight gave one answer in 8
calls, and one of its answers where it did not).
"""
import math
from dataclasses import dataclass
from heapq import nsmallest
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

END = -1  # the word history's mark of a finished sentence (KenLM's </s> scored)
ROOT = 0


class History:
    """A word history, interned per search call (:meth:`then` gives the one object of each history): hashing and
    equality are an object's own, O(1), and ordering (tuples' order of the words) walks back only to where two
    histories part. As a tuple, every candidate of every frame hashed its whole history and every word end copied
    it, so a frame cost the number of words so far (issue 80, F12)."""
    __slots__ = ("parent", "word", "depth", "children")

    def __init__(self, parent: Optional["History"] = None, word: int = END):
        self.parent, self.word = parent, word
        self.depth = 0 if parent is None else parent.depth + 1
        self.children: Dict[int, "History"] = {}

    def then(self, word: int) -> "History":
        """This history followed by ``word``."""
        got = self.children.get(word)
        if got is None:
            got = self.children[word] = History(self, word)
        return got

    def words(self) -> Tuple[int, ...]:
        out, node = [], self
        while node.parent is not None:
            out.append(node.word)
            node = node.parent
        return tuple(reversed(out))

    def __lt__(self, other: "History") -> bool:
        if self is other:
            return False
        a, b = self, other
        while a.depth > b.depth:
            a = a.parent
        while b.depth > a.depth:
            b = b.parent
        if a is b:  # one is the other's start: the shorter first, as tuples
            return self.depth < other.depth
        while a.parent is not b.parent:
            a, b = a.parent, b.parent
        return a.word < b.word

    def __gt__(self, other: "History") -> bool:
        return other < self


Key = Tuple[History, int, int, bool]  # (word history, trie node, last unit, last unit was blank)


@dataclass
class _Children:
    """A trie node's children as arrays (one expansion of a hypothesis is a few vector operations)."""
    units: np.ndarray                     # (C,) unit id of each child
    nodes: np.ndarray                     # (C,) child node
    inner: np.ndarray                     # (C,) the child has children (a hypothesis may stay inside a word there)
    look_ahead: np.ndarray                # (C,) float64: the child's smeared score less this node's (float32 math)
    label_pos: np.ndarray                 # (W,) the child position of each word ending at a child ...
    label_word: np.ndarray                # (W,) ... and the word


class LexiconTrie:
    """Unit spellings of words (``insert``), then :meth:`smear` (each node's look-ahead: the best score of the words
    below it, a node's own words log-added, as flashlight's ``SmearingMode.MAX``) and the per-node arrays."""

    def __init__(self) -> None:
        self.children: List[Dict[int, int]] = [{}]
        self.words: List[List[Tuple[int, float]]] = [[]]  # node -> (word, unigram score) of words ending there
        self.max_score = np.zeros(1, dtype=np.float32)
        self.expansions: List[_Children] = []

    def insert(self, units: Sequence[int], word: int, score: float) -> None:
        node = ROOT
        for unit in units:
            if unit not in self.children[node]:
                self.children[node][unit] = len(self.children)
                self.children.append({})
                self.words.append([])
            node = self.children[node][unit]
        self.words[node].append((word, score))

    def smear(self) -> None:
        scores = np.full(len(self.children), -np.inf, dtype=np.float32)
        for node in reversed(range(len(self.children))):  # a child is always added after its parent
            best = -math.inf
            for _, score in self.words[node]:  # a float32 in flashlight's node, after each word
                best = float(np.float32(_log_add(best, float(np.float32(score)))))
            for child in self.children[node].values():
                best = max(best, float(scores[child]))
            scores[node] = best
        self.max_score = scores
        self.expansions = [self._expansion(node) for node in range(len(self.children))]

    def _expansion(self, node: int) -> _Children:
        items = sorted(self.children[node].items())
        units = np.array([u for u, _ in items], dtype=np.int64)
        nodes = np.array([c for _, c in items], dtype=np.int64)
        own = np.float32(0.0) if node == ROOT else self.max_score[node]  # the root's look-ahead counts as 0
        look_ahead = (self.max_score[nodes] - own).astype(np.float64) if items else np.zeros(0)
        inner = np.array([bool(self.children[c]) for c in nodes.tolist()], dtype=bool)
        labels = [(pos, word) for pos, c in enumerate(nodes.tolist()) for word, _ in self.words[c]]
        return _Children(units, nodes, inner, look_ahead, np.array([p for p, _ in labels], dtype=np.int64),
                         np.array([w for _, w in labels], dtype=np.int64))


def _log_add(a: float, b: float) -> float:
    """flashlight's TrieLogAdd (differences below e^-39.14 are dropped)."""
    if a < b:
        a, b = b, a
    return a if b - a < -39.14 else a + math.log1p(math.exp(b - a))


@dataclass
class SearchOptions:
    """flashlight's LexiconDecoderOptions that this search reads: the beam, the threshold below the frame's best
    score, the LM weight and the bonus per word."""
    beam_size: int
    beam_threshold: float
    lm_weight: float
    word_score: float


class LexiconBeamSearch:
    """``search(emissions (T, V) float32 log-probabilities) -> [(word history, score)]``, best first, at most
    ``beam_size``: the final beam after the LM's end of sentence, for the words of ``trie`` scored by ``lm``
    (flashlight's KenLM: ``start``, ``score``, ``finish``)."""

    def __init__(self, trie: LexiconTrie, lm: Any, sil: int, blank: int, options: SearchOptions):
        self.trie, self.lm, self.sil, self.blank, self.opt = trie, lm, sil, blank, options

    def search(self, emissions: np.ndarray, bias: Any = None) -> List[Tuple[Tuple[int, ...], float]]:
        """``bias``: the hotwords' bonus (``lm.context.WordContext``), added to a hypothesis's score as its units
        grow, before the beam is cut; the last frame's cut takes its open match back (``_step``'s ``last``)."""
        frames = np.asarray(emissions, dtype=np.float32).astype(np.float64)
        # The LM states and scores asked for are this call's own (_Memo): one search object serves every thread
        # that decodes with it, so nothing of an utterance may live on it (issue 80, item 3: with the memo on the
        # search, a thread's next utterance replaced the states another thread's search was still reading).
        memo = _Memo(self.lm, bias)
        beam: List[Tuple[Key, float]] = [((memo.root, ROOT, self.sil, False), 0.0)]
        for t, row in enumerate(frames):
            beam = self._step(memo, beam, row, last=t == len(frames) - 1)
        return [(tuple(w for w in key[0].words() if w != END), score) for key, score in self._end(memo, beam)]

    def _step(self, memo: "_Memo", beam: List[Tuple[Key, float]], row: np.ndarray, last: bool = False
              ) -> List[Tuple[Key, float]]:
        """One frame: every extension of every hypothesis (flashlight's decodeStep), then the beam.

        Of one hypothesis's extensions (all of different keys) only its ``beam_size`` best can be in the frame's
        beam, whatever the other hypotheses give: so only they are kept, and a word's LM score is asked only where
        the word could be among them (a log probability is <= 0, which bounds its score from above).

        ``last`` (the utterance's last frame) with hotwords: each candidate's open match is taken back before the
        cut, so the beam that ends the sentence is the best by the bonus it keeps (issue 82, F2: cut by the bonus
        of open matches, it could drop every hypothesis that had completed a phrase). The kept bonus is at most the
        open one, so only the frame's floor bounds which extensions are made."""
        cands = _Candidates(self.opt.beam_threshold)
        w, ws, size, trie, bias = self.opt.lm_weight, self.opt.word_score, self.opt.beam_size, self.trie, memo.bias
        for (words, node, token, after_blank), score in beam:
            ex = trie.expansions[node]
            base = score + row[ex.units]
            # (1) a child unit: stay inside the word (CTC: not the same unit again without a blank in between) ...
            inside = np.flatnonzero(ex.inner & (after_blank | (ex.units != token)))
            scores = base[inside] + w * ex.look_ahead[inside]
            if bias is not None:  # the bonus a unit adds, before any cut (and a word end, below)
                to_child, to_word = bias.expansion(words, node, ex)
                scores = scores + to_child[inside]
            group = [((words, node, self.blank, True), score + float(row[self.blank]))]  # (3) a blank
            if not after_blank or node == ROOT:  # (2) the boundary unit at the root, else the last unit again
                unit = self.sil if node == ROOT else token
                group.append(((words, node, unit, False), score + float(row[unit])))
            fixed = np.concatenate([scores, [s for _, s in group]])
            cutoff = cands.floor()
            if not (last and bias is not None):
                cutoff = max(cutoff, float(np.partition(fixed, -size)[-size]) if fixed.size >= size else -math.inf)
            keep = scores >= cutoff
            group += [((words, int(c), int(u), False), float(v))
                      for c, u, v in zip(ex.nodes[inside[keep]], ex.units[inside[keep]], scores[keep])]
            # ... or end a word there: the LM's word score replaces the look-ahead; not the same one-unit word twice
            # on one spike at the root
            own = np.float32(0.0) if node == ROOT else trie.max_score[node]
            bound = base[ex.label_pos] + (w * -float(own) + ws + 1e-6)
            ends = np.flatnonzero((bound if bias is None else bound + to_word) >= cutoff)
            if node == ROOT:
                ends = ends[ex.units[ex.label_pos[ends]] != token]
            if ends.size:
                lm = memo.word_scores(words, node, ex, ends)
                ended = base[ex.label_pos[ends]] + w * (lm[ends] - own).astype(np.float64) + ws
                if bias is not None:
                    ended = ended + to_word[ends]
                keep = ended >= cutoff
                group += [((words.then(int(word)), ROOT, int(u), False), float(v)) for word, u, v in
                          zip(ex.label_word[ends[keep]], ex.units[ex.label_pos[ends[keep]]], ended[keep])]
            if last and bias is not None:  # the open hotword match taken back
                group = [(key, value + (bias.final(key[0]) - bias.bonus(key[0], key[1]))) for key, value in group]
            for key, value in _ranked(group, size):
                cands.add(key, value)
        return cands.best(size)

    def _end(self, memo: "_Memo", beam: List[Tuple[Key, float]]) -> List[Tuple[Key, float]]:
        """The LM's end of sentence for the hypotheses at a word boundary (all of them when none is: flashlight's
        decodeEnd), then the final beam, best first."""
        cands = _Candidates(self.opt.beam_threshold)
        nice = any(node == ROOT for (_, node, _, _), _ in beam)
        for (words, node, _, _), score in beam:  # (the hotwords' open match was taken back by the last frame)
            if not nice or node == ROOT:
                cands.add((words.then(END), node, self.sil, False), score + self.opt.lm_weight
                          * memo.lm_score(words, END))
        return cands.best(self.opt.beam_size)


class _Memo:
    """One :meth:`LexiconBeamSearch.search` call's LM states by word history (flashlight's KenLM states, grown from
    this call's own start state) and the LM scores asked for, so that each is computed once per utterance; and the
    call's hotwords' bonus (``bias``, or None), which is the call's as much as its states are."""

    def __init__(self, lm: Any, bias: Any = None):
        self.lm, self.bias = lm, bias
        self.root = History()  # this call's empty history
        self.states = {self.root: lm.start(False)}  # word history -> LM state
        self.scores: Dict[Tuple[History, int], np.ndarray] = {}  # see word_scores

    def lm_score(self, words: History, word: int) -> float:
        """The LM's log10 probability (float32) of ``word`` (or END) after ``words``; the new state is kept."""
        state, score = (self.lm.finish(self.states[words]) if word == END
                        else self.lm.score(self.states[words], word))
        self.states[words.then(word)] = state
        return score

    def word_scores(self, words: History, node: int, ex: _Children, ends: np.ndarray) -> np.ndarray:
        """(W,) float32: the LM scores after ``words`` of the words ending at ``node``'s children, filled in where
        ``ends`` asks (NaN where never asked)."""
        scores = self.scores.get((words, node))
        if scores is None:
            scores = self.scores[(words, node)] = np.full(ex.label_word.size, np.nan, dtype=np.float32)
        for i in ends[np.isnan(scores[ends])].tolist():
            scores[i] = self.lm_score(words, int(ex.label_word[i]))
        return scores


class _Candidates:
    """One frame's candidates: the best score of each key (flashlight merges equal states, keeping the best), the
    frame's best score so far, and the beam: candidates within ``threshold`` of the best, ranked by (score
    descending, key)."""

    def __init__(self, threshold: float):
        self.threshold, self.top, self.scores = threshold, -math.inf, {}

    def floor(self) -> float:
        return self.top - self.threshold

    def add(self, key: Key, score: float) -> None:
        if score > self.top:
            self.top = score
        if score >= self.top - self.threshold and score > self.scores.get(key, -math.inf):
            self.scores[key] = score

    def best(self, beam_size: int) -> List[Tuple[Key, float]]:
        floor = self.floor()
        return _ranked([(k, s) for k, s in self.scores.items() if s >= floor], beam_size)


def _ranked(items: List[Tuple[Key, float]], size: int) -> List[Tuple[Key, float]]:
    """The ``size`` best of ``items``, best first; of equal scores, those at a word boundary (every word scored by
    the LM) first, then in the order of their keys: a total order. (A word still being spelled ties with the same
    word emitted; keeping the spelling instead would lose the word where the utterance ends.)"""
    return nsmallest(size, items, key=lambda item: (-item[1], item[0][1] != ROOT, item[0]))
