"""The hotwords' bonus (``transformer.context_graph``) in the lexicon search of ``ctc_prefix_beam_search_lm``: the
bonus of a hypothesis ``(words, trie node, ...)`` (``lexicon_search``) is that of the units it stands for, the
words' spellings (with the space unit between words where the units have one, as ``LmSearch.units`` writes them)
and then the trie path to its node.

A trie node that spells no word's prefix (a word followed by a boundary unit, or with its last unit doubled:
``search.trie_spellings``, which let a word end however many frames its last unit lasts) counts as its parent: those
units are not in the text. What depends on the lexicon alone is made once per search (:class:`TriePaths`); what a
search call asks is kept for the call (one :class:`WordContext` per call), so a hypothesis that lasts many frames
costs dictionary look-ups after its first.
"""
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from wenet_udps.transformer.context_graph import ContextGraph

ROOT = 0


class TriePaths:
    """What the bonus needs of the lexicon trie, made once per search (``LmSearch.trie_paths``), not per
    utterance: each node's parent and unit, and whether its path is a prefix of some word's spelling (``real``).

    Args:
        spelling: word index -> unit ids (``LmSearch.spelling``).
        children: the lexicon trie's nodes, ``children[node]`` {unit: child} (``LexiconTrie.children``).
    """

    def __init__(self, spelling: Mapping[int, Sequence[int]], children: List[Dict[int, int]]):
        prefixes = {tuple(ids[:i]) for ids in spelling.values() for i in range(1, len(ids) + 1)}
        self.parent, self.unit = [ROOT] * len(children), [-1] * len(children)
        self.real = [True] * len(children)
        paths: Dict[int, Tuple[int, ...]] = {ROOT: ()}
        for node, kids in enumerate(children):  # a child is always added after its parent
            for unit, child in kids.items():
                self.parent[child], self.unit[child] = node, unit
                paths[child] = paths[node] + (unit,)
                self.real[child] = paths[child] in prefixes


class WordContext:
    """The bonus of lexicon-search hypotheses under ``graph``, for one search call (its memos are the call's).

    Args:
        spelling: word index -> unit ids (``LmSearch.spelling``); a word not in it (``<unk>``) writes nothing.
        paths: the lexicon trie's :class:`TriePaths`.
        space: the unit written between words, or None.
    """

    def __init__(self, graph: ContextGraph, spelling: Mapping[int, Sequence[int]], paths: TriePaths,
                 space: Optional[int]):
        self.graph, self.spelling, self.space, self.paths = graph, spelling, space, paths
        self.steps = graph.memo
        # words -> (graph state, bonus, a word with units written: the next one is spaced)
        self._words: Dict[Any, Tuple[int, float, bool]] = {}
        self._nodes: Dict[Tuple[int, int, bool], Tuple[int, float]] = {}
        self._expansions: Dict[Tuple[Any, int], Tuple[np.ndarray, np.ndarray]] = {}

    def after(self, words: Any) -> Tuple[int, float]:
        """(graph state, bonus) after the spellings of ``words``."""
        return self._after(words)[:2]

    def _after(self, words: Any) -> Tuple[int, float, bool]:
        got = self._words.get(words)
        if got is None:
            if words.parent is None:  # the empty history
                return 0, 0.0, False
            state, bonus, spaced = self._after(words.parent)
            ids = self.spelling.get(words.word, ())
            if ids and self.space is not None and spaced:
                state, delta = self.steps[state, self.space]
                bonus += delta
            for unit in ids:
                state, delta = self.steps[state, unit]
                bonus += delta
            got = self._words[words] = (state, bonus, spaced or bool(ids))
        return got

    def _through(self, state: int, node: int, spaced: bool) -> Tuple[int, float]:
        """(state, bonus added) of the trie path to ``node`` from ``state`` (``spaced``: the space unit first)."""
        key = (state, node, spaced)
        got = self._nodes.get(key)
        if got is None:
            paths = self.paths
            if node == ROOT:
                got = (state, 0.0)
            elif not paths.real[node]:
                got = self._through(state, paths.parent[node], spaced)
            else:
                state_up, bonus = self._through(state, paths.parent[node], spaced)
                if paths.parent[node] == ROOT and spaced:
                    state_up, delta = self.steps[state_up, self.space]
                    bonus += delta
                state_up, delta = self.steps[state_up, paths.unit[node]]
                got = (state_up, bonus + delta)
            self._nodes[key] = got
        return got

    def expansion(self, words: Any, node: int, ex: Any) -> Tuple[np.ndarray, np.ndarray]:
        """What the bonus adds to each extension of a hypothesis that has written ``words`` and is at trie
        ``node`` (``ex`` its ``lexicon_search._Children``): (moving to each child (C,), ending each of the words
        that end at the children (W,)). Once a call per (words, node): a hypothesis lasts many frames,
        and the word ends' exact bonus is what lets the search ask the LM only of those that can pass its cut."""
        key = (words, node)
        got = self._expansions.get(key)
        if got is None:
            here = self.bonus(words, node)
            got = self._expansions[key] = (
                np.array([self.bonus(words, child) - here for child in ex.nodes.tolist()]),
                np.array([self.after(words.then(word))[1] - here for word in ex.label_word.tolist()]))
        return got

    def bonus(self, words: Any, node: int) -> float:
        """The bonus of a hypothesis that has written ``words`` and is at trie ``node`` (its open match counted)."""
        state, bonus, spaced = self._after(words)
        return bonus + self._through(state, node, self.space is not None and spaced)[1]

    def final(self, words: Any) -> float:
        """The bonus ``words`` keep when the hypothesis ends (the open match taken back; a word not ended writes
        nothing)."""
        state, bonus = self.after(words)
        return bonus + self.graph.end(state)
