"""The hotword graph's steps (``context_graph.ContextGraph.step``) over whole arrays, for a search that scores a beam's
candidates as tensors (``joint_search``): a lookup is two gathers, the same numbers ``step`` gives.

A row holds the step from one state by every unit of the phrases, one column more for any other unit (it leads to
the root, taking the open match back) and one for the end (``ContextGraph.end``, next state the root). The row of a
state is that of its failure target with the state's own children put in (``step``'s goto: the longest suffix
that has the unit wins), so rows are made breadth first, a whole depth of states at once.

A graph over few units (at most :data:`FULL_WIDTH` columns: letters, not BPE pieces) whose rows fit in
:data:`FULL_CELLS` (1,000 phrases of letters: about 2,500 states x 28 columns) makes every state's row once, when a
search first asks for them; they are only read after, by every search at once, and cost a fixed number of bytes
per state, so the graph's memory still grows linearly with the phrases' total length. Any other graph has none of
its own: each search call makes the rows of the states it meets (and of their failure targets) as it meets them,
and past :data:`CALL_CELLS` starts afresh, so a call's memory is bounded however long it runs.
"""
import threading
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

FULL_WIDTH = 64  # columns (units + 2) of a graph that keeps every state's row: 1 KB a state at most
FULL_CELLS = 1 << 20  # 16 MB of rows at most (int64 next state + float64 bonus per cell)
CALL_CELLS = 1 << 20


class GraphArrays:
    """The graph as arrays: its units (sorted), each node's children (by parent: their columns and nodes), failure
    targets, depths, and the node scores of ``ContextGraph``'s docstring; ``rows`` every state's :class:`Rows`, or
    None (``full`` false: more than :data:`FULL_WIDTH` columns, or more than :data:`FULL_CELLS` cells)."""

    def __init__(self, fail: Sequence[int], parent: Sequence[int], unit_of: Sequence[int], depth: Sequence[int],
                 by_depth: Sequence[int], node_score: Sequence[float], completed: Sequence[float]):
        size = len(fail)
        self.units = np.unique(np.array(unit_of[1:], dtype=np.int64))
        self.other, self.end = self.units.size, self.units.size + 1
        self.width = self.units.size + 2
        by_parent = np.argsort(np.array(parent[1:], dtype=np.int64), kind="stable") + 1
        self.child_node = by_parent
        self.child_col = np.searchsorted(self.units, np.array(unit_of, dtype=np.int64)[by_parent])
        self.first_child = np.searchsorted(np.array(parent, dtype=np.int64)[by_parent], np.arange(size + 1))
        self.fail_list = list(fail)
        self.fail = np.array(fail, dtype=np.int64)
        self.depth = np.array(depth, dtype=np.int64)
        self.node_score = np.array(node_score, dtype=np.float64)
        self.completed = np.array(completed, dtype=np.float64)
        self.full = self.width <= FULL_WIDTH and size * self.width <= FULL_CELLS
        self._by_depth = by_depth
        self._rows: Optional[Rows] = None
        self._lock = threading.Lock()

    @property
    def rows(self) -> Optional["Rows"]:
        """Every state's :class:`Rows` (made on first use: only the joint searches read them, and a graph built
        for one utterance by another search pays nothing), or None where they do not fit (``full`` false)."""
        if not self.full:
            return None
        with self._lock:
            if self._rows is None:
                rows = Rows(self, self.fail.size)
                order = np.array(self._by_depth, dtype=np.int64)
                rows.add(order, at=order)  # row n is state n's
                self._rows = rows
            return self._rows

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays (the rows included, once made)."""
        own = sum(a.nbytes for a in (self.units, self.child_node, self.child_col, self.first_child, self.fail,
                                     self.depth, self.node_score, self.completed))
        return own + (self._rows.nbytes if self._rows is not None else 0)


class Rows:
    """Rows of steps: ``next[r]`` (int64) and ``delta[r]`` (float64) over the columns, the row of state ``s`` at
    ``row_of[s]`` (-1: none yet)."""

    def __init__(self, arrays: GraphArrays, capacity: int):
        self.a = arrays
        self.next = np.zeros((capacity, arrays.width), dtype=np.int64)
        self.delta = np.zeros((capacity, arrays.width), dtype=np.float64)
        self.row_of = np.full(arrays.fail.size, -1, dtype=np.int64)
        self.count = 0

    @property
    def nbytes(self) -> int:
        return self.next.nbytes + self.delta.nbytes + self.row_of.nbytes

    def add(self, nodes: np.ndarray, at: Optional[np.ndarray] = None) -> None:
        """Rows for ``nodes`` (none has one; sorted by depth; each one's failure target has a row or is among them),
        at rows ``at`` (default: the next free ones)."""
        a = self.a
        if at is None:
            need = self.count + nodes.size
            if need > self.next.shape[0]:
                grown = max(need, 2 * self.next.shape[0])
                self.next = np.concatenate([self.next[:self.count], np.zeros((grown - self.count, a.width),
                                                                             dtype=np.int64)])
                self.delta = np.concatenate([self.delta[:self.count], np.zeros((grown - self.count, a.width))])
            at = np.arange(self.count, need)
            self.count = need
        depth = a.depth[nodes]
        for level in np.unique(depth).tolist():
            pick = np.flatnonzero(depth == level)
            group, rows = nodes[pick], at[pick]
            if level == 0:  # the root: nothing matched, no failure target
                self.next[rows] = 0
            else:
                self.next[rows] = self.next[self.row_of[a.fail[group]]]
            # each node's own children replace what its failure target gives
            first = a.first_child[group]
            count = a.first_child[group + 1] - first
            pos = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count - first, count)
            self.next[np.repeat(rows, count), a.child_col[pos]] = a.child_node[pos]
            self.row_of[group] = rows
        nxt = self.next[at]
        # ContextGraph.step's arithmetic, in its order: node_score[next] - node_score[state] + completed[next]
        delta = a.node_score[nxt] - a.node_score[nodes][:, None] + a.completed[nxt]
        delta[:, a.end] = -a.node_score[nodes]
        self.delta[at] = delta

    def cover(self, states: List[int]) -> None:
        """Rows for ``states`` and for their failure targets, those that have none (a search call's own rows);
        past :data:`CALL_CELLS` the rows start afresh (the states of one lookup always fit)."""
        new = self._missing(states)
        if self.count and (self.count + len(new)) * self.a.width > CALL_CELLS:
            self.row_of[:] = -1
            self.count = 0
            new = self._missing(states)
        if new:
            nodes = np.array(new, dtype=np.int64)
            self.add(nodes[np.argsort(self.a.depth[nodes], kind="stable")])

    def _missing(self, states: List[int]) -> List[int]:
        fail, have, new = self.a.fail_list, self.row_of, {}
        for state in states:
            node = state
            while node not in new and have[node] < 0:
                new[node] = None
                if node == 0:
                    break
                node = fail[node]
        return list(new)


class StepTable:
    """One search call's lookups: ``lookup(states, units)`` -> the next state and bonus of each pair, as
    ``ContextGraph.step`` gives them (``end_unit``: as ``ContextGraph.end``, next state the root)."""

    def __init__(self, graph: Any, end_unit: Optional[int] = None):
        a: GraphArrays = graph.arrays
        top = max(int(a.units[-1]) if a.units.size else 0, end_unit if end_unit is not None else 0)
        self.col_of = np.full(top + 2, a.other, dtype=np.int64)  # unit id -> column (the last: any larger id)
        self.col_of[a.units] = np.arange(a.units.size)
        if end_unit is not None:
            self.col_of[end_unit] = a.end
        shared = a.rows
        self.shared = shared is not None
        self.rows = shared if shared is not None else Rows(a, 64)
        self.width = a.width

    def lookup(self, states: np.ndarray, units: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """states (N,) int64, units (N, K) int64 (>= 0) -> (next states (N, K) int64, bonus added (N, K)
        float64)."""
        col = self.col_of.take(units, mode="clip")  # (a unit past the last id: the other units' column)
        if self.shared:  # row n is state n's
            row = states
        else:
            row = self.rows.row_of.take(states)
            if (row < 0).any():
                self.rows.cover(np.unique(states).tolist())
                row = self.rows.row_of.take(states)
        cell = row[:, None] * self.width + col
        return self.rows.next.take(cell), self.rows.delta.take(cell)
