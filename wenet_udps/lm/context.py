"""The hotwords' bonus (``transformer.context_graph``) in the lexicon search of ``ctc_prefix_beam_search_lm``: the
bonus of a hypothesis ``(words, trie node, ...)`` (``lexicon_search``) is that of the units it stands for, the
words' spellings (with the space unit between words where the units have one, as ``LmSearch.units`` writes them)
and then the trie path to its node.

A trie node that spells no word's prefix (a word followed by a boundary unit, or with its last unit doubled:
``search.trie_spellings``, which let a word end however many frames its last unit lasts) counts as its parent: those
units are not in the text. Cached per utterance (one object per search call), so a step costs dictionary look-ups.
"""
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from wenet_udps.transformer.context_graph import ContextGraph

ROOT = 0


class WordContext:
    """The bonus of lexicon-search hypotheses under ``graph``.

    Args:
        spelling: word index -> unit ids (``LmSearch.spelling``); a word not in it (``<unk>``) writes nothing.
        children: the lexicon trie's nodes, ``children[node]`` {unit: child} (``LexiconTrie.children``).
        space: the unit written between words, or None.
    """

    def __init__(self, graph: ContextGraph, spelling: Mapping[int, Sequence[int]], children: List[Dict[int, int]],
                 space: Optional[int]):
        self.graph, self.spelling, self.space = graph, spelling, space
        prefixes = {tuple(ids[:i]) for ids in spelling.values() for i in range(1, len(ids) + 1)}
        self.parent, self.unit = [ROOT] * len(children), [-1] * len(children)
        self.real = [True] * len(children)  # the node's path is a prefix of some word's spelling
        paths: Dict[int, Tuple[int, ...]] = {ROOT: ()}
        for node, kids in enumerate(children):  # a child is always added after its parent
            for unit, child in kids.items():
                self.parent[child], self.unit[child] = node, unit
                paths[child] = paths[node] + (unit,)
                self.real[child] = paths[child] in prefixes
        self._words: Dict[Tuple[int, ...], Tuple[int, float]] = {(): (0, 0.0)}
        self._nodes: Dict[Tuple[int, int, bool], Tuple[int, float]] = {}
        # The most one unit can add from any state: it lands on a node it leads to (or the root, adding <= 0).
        self._step_max: Dict[int, float] = {}
        for kids in graph.children:
            for unit, node in kids.items():
                gain = graph.node_score[node] + graph.completed[node]
                self._step_max[unit] = max(self._step_max.get(unit, 0.0), gain)
        self._gain: Dict[int, float] = {}

    def after(self, words: Tuple[int, ...]) -> Tuple[int, float]:
        """(graph state, bonus) after the spellings of ``words``."""
        got = self._words.get(words)
        if got is None:
            state, bonus = self.after(words[:-1])
            ids = self.spelling.get(words[-1], ())
            if ids and self.space is not None and any(w in self.spelling for w in words[:-1]):
                state, delta = self.graph.step(state, self.space)
                bonus += delta
            for unit in ids:
                state, delta = self.graph.step(state, unit)
                bonus += delta
            got = self._words[words] = (state, bonus)
        return got

    def _through(self, state: int, node: int, spaced: bool) -> Tuple[int, float]:
        """(state, bonus added) of the trie path to ``node`` from ``state`` (``spaced``: the space unit first)."""
        key = (state, node, spaced)
        got = self._nodes.get(key)
        if got is None:
            if node == ROOT:
                got = (state, 0.0)
            elif not self.real[node]:
                got = self._through(state, self.parent[node], spaced)
            else:
                state_up, bonus = self._through(state, self.parent[node], spaced)
                if self.parent[node] == ROOT and spaced:
                    state_up, delta = self.graph.step(state_up, self.space)
                    bonus += delta
                state_up, delta = self.graph.step(state_up, self.unit[node])
                got = (state_up, bonus + delta)
            self._nodes[key] = got
        return got

    def gain_bound(self, words: np.ndarray) -> np.ndarray:
        """(W,) an upper bound of what writing each of ``words`` (after a space unit) can add, from any state: so
        the lexicon search asks the exact bonus only of the word ends that can pass its cut."""
        out = np.empty(len(words))
        for i, word in enumerate(words.tolist()):
            gain = self._gain.get(word)
            if gain is None:
                units = list(self.spelling.get(word, ())) + ([self.space] if self.space is not None else [])
                gain = self._gain[word] = sum(self._step_max.get(u, 0.0) for u in units)
            out[i] = gain
        return out

    def bonus(self, words: Tuple[int, ...], node: int) -> float:
        """The bonus of a hypothesis that has written ``words`` and is at trie ``node`` (its open match counted)."""
        state, bonus = self.after(words)
        spaced = self.space is not None and any(w in self.spelling for w in words)
        return bonus + self._through(state, node, spaced)[1]

    def final(self, words: Tuple[int, ...]) -> float:
        """The bonus ``words`` keep when the hypothesis ends (the open match taken back; a word not ended writes
        nothing)."""
        state, bonus = self.after(words)
        return bonus + self.graph.end(state)
