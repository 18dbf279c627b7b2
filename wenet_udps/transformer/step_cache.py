"""The decoder's self-attention cache for incremental decoding: each block's entries of the prefixes' positions.

A position's entries (its key and value; UDPS also the key's norm, ``step_entries`` of the attention) are made once,
at the step that adds the position, and written in place into buffers that grow by doubling, so a step neither
copies the prefix (``torch.cat``) nor allocates it again.

The prefixes come in groups of ``group`` consecutive rows, one utterance's hypotheses. The leading positions where
every row of a group has the same tokens (so the same entries) are kept once per group (``shared``); the rest per
row (``own``). A beam search's reordering of the hypotheses then copies only the own part, the few positions since
the group's hypotheses last had a common ancestor, not the whole prefix of every hypothesis, and a step's attention
reads the shared part once per group (:func:`~wenet_udps.kernels.shared_prefix.shared_prefix_attention`).
Both parts keep positions at their own column index: shared columns [0, shared_len), own columns [shared_len,
length). The shared buffer is feature-major, (B, H, C, capacity): a step's products q.k and p v then read rows of
contiguous positions (twice as fast as reading the keys out of (B, H, capacity, C), where keys and values
interleave); the own one, a few positions per row, is (N, H, capacity, C), whose small products are faster so.
"""
from typing import List, Optional, Tuple

import torch


class StepCache:
    """Per block, the self-attention entries of ``length`` positions of N = B * ``group`` prefixes.

    Made by the decoder's first step (``TransformerDecoder.forward_one_step`` with no cache) and updated in place by
    each later one; a search calls :meth:`reorder` with its surviving rows and :meth:`select` to drop utterances.
    """

    def __init__(self, blocks: int, group: int):
        if group < 1:
            raise ValueError(f"a step cache needs groups of at least one row, got {group}")
        self.group = group
        self.length = 0       # positions cached
        self.shared_len = 0   # leading positions kept once per group
        self.shared: List[Optional[torch.Tensor]] = [None] * blocks  # (B, H, C, capacity)
        self.own: List[Optional[torch.Tensor]] = [None] * blocks     # (N, H, capacity, C)

    @property
    def rows(self) -> int:
        """N, the number of prefixes (0 before the first entries)."""
        own = self.own[0]
        return 0 if own is None else own.size(0)

    def share(self, tokens: torch.Tensor) -> None:
        """Move the cached positions at which the prefixes of each group agree into the shared part.

        tokens (N, L >= length): the prefixes. A position's entries depend on the tokens up to it, so they are
        shared where all earlier tokens agree too; the shortest such run over the groups is kept per group.
        """
        if self.own[0] is None or self.shared_len == self.length:
            return
        n = tokens.size(0)
        groups = tokens[:, :self.length].reshape(n // self.group, self.group, self.length)
        agree = (groups == groups[:, :1]).all(dim=1).long().cumprod(dim=1)  # (B, length)
        common = int(agree.sum(dim=1).min())
        if common > self.shared_len:
            cols = slice(self.shared_len, common)
            for shared, own in zip(self.shared, self.own):
                shared[..., cols] = own[::self.group, :, cols].transpose(2, 3)
            self.shared_len = common

    def extend(self, block: int, entries: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Write ``entries`` (N, H, T_new, C), block ``block``'s entries of the positions after ``length``, and
        return that block's shared (B, H, shared_len, C) and own (N, H, length + T_new - shared_len, C) parts
        (views of the feature-major buffers). ``length`` itself moves on in :meth:`commit`, after the last block."""
        end = self.length + entries.size(2)
        own = self.own[block]
        if own is None or own.size(2) < end:
            self._grow(block, entries, end)
            own = self.own[block]
        own[:, :, self.length:end] = entries
        return self.shared[block][..., :self.shared_len].transpose(2, 3), own[:, :, self.shared_len:end]

    def commit(self, new_positions: int) -> None:
        """The step's ``new_positions`` are in every block now."""
        self.length += new_positions

    def _grow(self, block: int, entries: torch.Tensor, end: int) -> None:
        """Room for ``end`` positions at least, doubling: the copies over a search add up to O(final length)."""
        n, heads, _, width = entries.shape
        if n % self.group:
            raise ValueError(f"{n} prefixes do not split into groups of {self.group}")
        old_shared, old_own = self.shared[block], self.own[block]
        capacity = max(end, 16, 2 * (0 if old_own is None else old_own.size(2)))
        self.shared[block] = entries.new_empty(n // self.group, heads, width, capacity)
        self.own[block] = entries.new_empty(n, heads, capacity, width)
        if old_own is not None:
            self.shared[block][..., :self.shared_len] = old_shared[..., :self.shared_len]
            self.own[block][:, :, self.shared_len:self.length] = old_own[:, :, self.shared_len:self.length]

    def truncate(self, length: int) -> None:
        """Forget the positions from ``length`` on, so that a step can be run again (``bench/decode_speed.py``
        times one step over the same cache). The shared part cannot be cut: ``length`` >= ``shared_len``."""
        if not self.shared_len <= length <= self.length:
            raise ValueError(f"a step cache of {self.length} positions ({self.shared_len} shared) cannot keep {length}")
        self.length = length

    def reorder(self, src: torch.Tensor) -> None:
        """Row i takes the prefix of row ``src[i]`` (N,), a row of the same group: what a beam search's survivors
        do. Copies the own part only."""
        group_of = torch.arange(src.size(0), device=src.device) // self.group
        if src.size(0) != self.rows or not bool((src // self.group == group_of).all()):
            raise ValueError(f"a step cache reorders rows within their group of {self.group}, of {self.rows} rows; "
                             f"got {src.tolist()}")
        cols = slice(self.shared_len, self.length)
        for own in self.own:
            own[:, :, cols] = own[:, :, cols].index_select(0, src)

    def select(self, rows: torch.Tensor) -> None:
        """Keep the rows ``rows`` (whole groups, in order): a search dropping its finished utterances."""
        groups = rows[::self.group] // self.group
        self.shared = [s.index_select(0, groups) for s in self.shared]
        self.own = [o.index_select(0, rows) for o in self.own]

    def entries(self, block: int) -> torch.Tensor:
        """Block ``block``'s entries of every row's whole prefix, (N, H, length, C) (a copy, for checks)."""
        shared = self.shared[block][..., :self.shared_len].repeat_interleave(self.group, 0)
        return torch.cat((shared.transpose(2, 3), self.own[block][:, :, self.shared_len:self.length]), dim=2)
