"""The prefixes of a CTC prefix beam search as nodes of a trie, so that extending a prefix by a token and finding it
again cost the same at the thousandth token as at the first (issue 80, F12).

A prefix is an integer node: its parent node, its last unit, and a table ``child`` from ``parent * vocab + unit``
to the child, so "this prefix followed by s" is one dictionary look-up on an integer, whatever the prefix's length.
Before, a prefix was a tuple used as a dictionary key: each extension copied it and each look-up hashed it, both
O(length), and 10 minutes of audio took minutes in the search. The tokens of a prefix are read by walking its parents
(:meth:`PrefixTrie.tokens`), once per n-best hypothesis at the end.

Nodes are reference counted (one for each child in the table, one while in the beam), so a prefix that left the beam
and has no descendant in it is released and its node reused: the trie holds the beam's prefixes and their common
ancestors, not every prefix the search ever tried.
"""
from itertools import chain
from typing import Dict, List, Sequence, Tuple

ROOT = 0  # the empty prefix


class PrefixTrie:
    """Prefixes over units ``0 .. vocab - 1``; node :data:`ROOT` is the empty prefix (unit -1, never released)."""

    def __init__(self, vocab: int):
        self.vocab = vocab
        self.parent: List[int] = [-1]
        self.unit: List[int] = [-1]     # a node's last unit; -1 for the root and for a released node
        self.refs: List[int] = [1]      # children in ``child`` + 1 while in the beam (the root: never released)
        self.child: Dict[int, int] = {}  # parent * vocab + unit -> node
        self.free: List[int] = []
        self.fresh: List[int] = []      # the nodes made since the last :meth:`keep`

    def __len__(self) -> int:
        """How many nodes are held (the root included)."""
        return len(self.parent) - len(self.free)

    def make(self, node: int, unit: int, key: int) -> int:
        """The new child of ``node`` by ``unit``; ``key`` is ``node * vocab + unit`` (the caller has looked it up
        in ``child`` and not found it)."""
        if self.free:
            new = self.free.pop()
            self.parent[new], self.unit[new], self.refs[new] = node, unit, 0
        else:
            new = len(self.parent)
            self.parent.append(node)
            self.unit.append(unit)
            self.refs.append(0)
        self.child[key] = new
        self.refs[node] += 1
        self.fresh.append(new)
        return new

    def keep(self, before: Sequence[int], after: Sequence[int]) -> None:
        """The beam went from ``before`` to ``after``: the nodes made since the last call that are not in it, and
        the ones that left it, are released where nothing in the beam descends from them, and so on upwards."""
        refs, parent, unit, child, vocab = self.refs, self.parent, self.unit, self.child, self.vocab
        for node in after:
            refs[node] += 1
        for node in before:
            refs[node] -= 1
        stack = [node for node in chain(before, self.fresh) if refs[node] == 0]
        self.fresh = []
        while stack:
            node = stack.pop()
            if refs[node] or unit[node] < 0:  # held again, or already released (a node may be listed twice)
                continue
            up = parent[node]
            del child[up * vocab + unit[node]]
            unit[node] = -1
            self.free.append(node)
            refs[up] -= 1
            if refs[up] == 0:
                stack.append(up)

    def tokens(self, node: int) -> Tuple[int, ...]:
        """The units of the prefix ``node``, first to last."""
        out = []
        while node != ROOT:
            out.append(self.unit[node])
            node = self.parent[node]
        return tuple(reversed(out))
