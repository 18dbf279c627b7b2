"""Context biasing (hotwords): phrases of unit ids as an Aho-Corasick automaton that gives a bonus per matched unit.

A search hypothesis carries two numbers for it: its graph state (an int; 0 is the root, no phrase begun) and the
bonus it has so far (a float). Extending the hypothesis by a unit is :meth:`ContextGraph.step`; ending it (the
utterance is over, or the hypothesis emits eos) is :meth:`ContextGraph.end`. The rules:

- ``node_score[n]``: the open match's bonus at node ``n``: its paid units (its depth, less the free units on its
  path, below) times the best per-unit score of the phrases through ``n`` (a phrase's score is its own
  `` :score``, else ``context_score``), what the match would keep if it went on to the best phrase it may still
  become.
- ``completed[n]``: what reaching ``n`` locks in: over every phrase that ends at ``n``'s string (``n`` itself and the
  nodes of its failure chain), that phrase's own score times its paid length. A phrase is paid by its own score,
  never by that of a longer phrase sharing its prefix (issue 82, F1: "AB :5" inside "ABC :1" paid 5 a unit to
  "ABC").
- Free units (``free_units``: the bare word boundary ``▁`` of units that write it apart) are matched like any other
  but earn nothing: every word of every hypothesis begins with one, so it is no evidence of a phrase, and paying it
  gave every word start a bonus, drawing the beam toward more words (issue 82: on AN4, whose units are letters,
  ``▁`` and a few words, 100 unrelated words at score 3 raised ``ctc_prefix_beam_search_lm``'s insertions from 2
  to 11).
- ``step(s, u) -> (n, delta)``: ``n`` is the node of the longest phrase prefix that ends the hypothesis (found
  through the failure arcs: a mismatch falls back to the longest proper suffix that is still a phrase prefix);
  ``delta = node_score[n] - node_score[s] + completed[n]``. So a unit that continues a match earns its score (a free
  unit nothing);
  leaving a partial match takes back what it earned; completing a phrase adds the phrase's bonus once more, which
  nothing takes back.
- ``end(s) = -node_score[s]``: the partial match still open when the hypothesis ends is taken back.

A hypothesis's final bonus is therefore the sum, over the phrase occurrences it completed (overlapping and nested
ones too), of their own score times their paid length; a phrase it began but did not complete earned nothing. While the
search runs, the open partial match counts, which is what draws the beam toward a phrase (WeNet's and icefall's
design; the code is written from that description).

Memory grows with the phrases' total length (one node per distinct unit prefix; tests/transformer/
test_context_graph.py ``test_memory_grows_linearly_with_the_phrases_total_length``). The graph is read-only once
built, so one graph may serve any number of searches at once; a search keeps the steps it asked for in its own
:class:`Steps` (a hot loop's step is then one dictionary look-up).
"""
import sys
from collections import deque
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from wenet_udps.transformer.context_table import GraphArrays, StepTable


MEMO_PER_STATE = 8  # (a search extends a state by its beam's few likely units, not by every unit)


class ContextGraph:
    """The automaton of ``phrases``: (unit ids, per-unit score > 0) pairs, each non-empty; a phrase given twice
    keeps its highest score (the hotword reader merges duplicates before, naming them). ``texts``: the phrases as
    text (``decode.hotwords`` gives them; ``LmSearch`` names the words its LM lacks). ``free_units``: unit ids that
    earn no bonus (module docstring)."""

    def __init__(self, phrases: Sequence[Tuple[Sequence[int], float]], texts: Sequence[str] = (),
                 free_units: Iterable[int] = ()):
        free = frozenset(free_units)
        self.texts = tuple(texts)  # the phrases as text, where known: what an LM search checks its words against
        self.children: List[Dict[int, int]] = [{}]
        unit_score: List[float] = [0.0]   # the best per-unit score of the phrases through the node
        own: List[float] = [0.0]          # the score of the phrase ending at the node (0: none does)
        ends: List[bool] = [False]
        parent: List[int] = [0]
        unit_of: List[int] = [-1]
        for units, score in phrases:
            if not units:
                raise ValueError("a context phrase needs at least one unit")
            if not score > 0.0:
                raise ValueError(f"a context phrase's score must be > 0, got {score}")
            node = 0
            for unit in units:
                child = self.children[node].get(unit)
                if child is None:
                    child = self.children[node][unit] = len(self.children)
                    self.children.append({})
                    unit_score.append(0.0)
                    own.append(0.0)
                    ends.append(False)
                    parent.append(node)
                    unit_of.append(unit)
                unit_score[child] = max(unit_score[child], float(score))
                node = child
            ends[node] = True
            own[node] = max(own[node], float(score))
        size = len(self.children)
        self.phrases = sum(ends)
        self.node_score = [0.0] * size
        self.fail = [0] * size
        self.completed = [0.0] * size   # bonus locked in on reaching the node (phrases ending at its string)
        self.matches = [0] * size       # how many phrases end at the node's string (itself and its suffixes)
        queue = deque(self.children[0].values())  # breadth first: a node's failure target is shallower
        self.depth = [0] * size
        paid = [0] * size  # the node's depth, less the free units on its path
        by_depth = [0]  # the nodes breadth first
        while queue:
            node = queue.popleft()
            by_depth.append(node)
            self.depth[node] = self.depth[parent[node]] + 1
            paid[node] = paid[parent[node]] + (unit_of[node] not in free)
            self.node_score[node] = paid[node] * unit_score[node]
            up = parent[node]
            if up != 0:
                self.fail[node] = self._goto(self.fail[up], unit_of[node])
            target = self.fail[node]
            self.completed[node] = paid[node] * own[node] + self.completed[target]
            self.matches[node] = int(ends[node]) + self.matches[target]
            queue.extend(self.children[node].values())
        self.is_end = ends
        self.memo = Steps(self)
        self.arrays = GraphArrays(self.fail, parent, unit_of, self.depth, by_depth, self.node_score, self.completed)

    def __str__(self) -> str:  # (how an option's value reads in a message)
        return f"<{self.phrases} hotword phrases>"

    def __len__(self) -> int:
        """The number of states (nodes of the trie, the root included)."""
        return len(self.children)

    @property
    def nbytes(self) -> int:
        """The graph's memory, about: its containers (each node's children, the per-node lists and their numbers),
        its arrays and rows (``context_table``), and its step memo as filled so far."""
        lists = (self.node_score, self.fail, self.completed, self.matches, self.is_end, self.depth)
        own = sum(sys.getsizeof(kids) for kids in self.children) + sys.getsizeof(self.children)
        own += sum(sys.getsizeof(values) for values in lists) + 24 * 2 * len(self)  # (the float objects)
        memo = sys.getsizeof(self.memo) + 150 * len(self.memo)  # (each pair: its key and value tuples)
        return own + self.arrays.nbytes + memo

    def _goto(self, state: int, unit: int) -> int:
        """The state after ``unit`` from ``state``: its child, else the child of the longest suffix that has one."""
        children = self.children
        while True:
            child = children[state].get(unit)
            if child is not None:
                return child
            if state == 0:
                return 0
            state = self.fail[state]

    def step(self, state: int, unit: int) -> Tuple[int, float]:
        """(next state, bonus added) of a hypothesis in ``state`` extended by ``unit`` (module docstring)."""
        if state == 0 and unit not in self.children[0]:  # (most extensions: cheap)
            return 0, 0.0
        nxt = self._goto(state, unit)
        return nxt, self.node_score[nxt] - self.node_score[state] + self.completed[nxt]

    def table(self, end_unit: Optional[int] = None) -> StepTable:
        """A new ``context_table.StepTable`` for one search call (whole arrays of steps at once); ``end_unit``
        (eos) ends the hypothesis instead (:meth:`end`)."""
        return StepTable(self, end_unit)

    def end(self, state: int) -> float:
        """The bonus added when a hypothesis in ``state`` ends: its open partial match taken back (<= 0)."""
        return -self.node_score[state]

    def final_bonus(self, units: Sequence[int]) -> float:
        """The bonus a whole hypothesis ``units`` keeps: its steps and its end."""
        state, bonus = 0, 0.0
        for unit in units:
            state, delta = self.step(state, unit)
            bonus += delta
        return bonus + self.end(state)


class Steps(dict):
    """``steps[state, unit]`` is ``graph.step(state, unit)``, worked out once per pair and kept for every search that
    asks (the graph's ``memo``: a search's hot loop then costs one dictionary look-up). It holds at most
    :data:`MEMO_PER_STATE` pairs per state of the graph, so its memory grows with the graph's; past that a pair is
    worked out each time. Filling it from several threads at once is safe: a pair's value is the same whoever
    computes it."""

    def __init__(self, graph: ContextGraph):
        super().__init__()
        self.graph = graph
        self.limit = MEMO_PER_STATE * len(graph)

    def __missing__(self, key: Tuple[int, int]) -> Tuple[int, float]:
        got = self.graph.step(*key)
        if len(self) < self.limit:
            self[key] = got
        return got
