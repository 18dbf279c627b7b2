"""The decoder's self-attention cache for incremental decoding: each block's entries of the prefixes' positions.

A position's entries (its key and value; UDPS also the key's norm, ``step_entries`` of the attention) are made once,
at the step that adds the position, and written in place into a buffer that grows by doubling, so a step neither
copies the prefix (``torch.cat``) nor allocates it again.

The prefixes come in groups of ``group`` consecutive rows, one utterance's hypotheses. A group's entries form one
pool of columns, (B, H, C, capacity) per block (feature-major: a step's products q.k and p v read rows of contiguous
columns), and each row says which columns are its prefix's positions (``member``, (N, capacity) bool). A beam
search's survivors take their parents' rows of ``member`` (:meth:`reorder`: N x capacity booleans, no entry moves),
so hypotheses that descend from one parent keep its positions once, however long ago they branched: the prefixes of
a group are a tree, and the pool holds each of its nodes once. A step's attention then reads every pooled column
once for all the rows of its group, masked by membership
(:func:`~wenet_udps.kernels.prefix_pool.prefix_pool_attention`). (Keeping only the group's common prefix once and
copying the rest per row at each reordering was O(prefix) per step again whenever two branches survived side by
side: a 5-minute utterance's search spent half its time in those copies, docs/kernels.md.)

Columns that no row holds any more (pruned hypotheses) are dropped by compacting each group's live columns to the
front, once the pool has a quarter of its live size in dead columns: a copy of the live columns every O(live / group)
steps. The order of a row's columns is not its positions' order (``pos`` holds each column's position; attention
does not depend on the order).
"""
from typing import List, Optional, Tuple

import torch

# Dead columns tolerated before compacting: at least this many, and a quarter of the live ones (see the docstring).
MIN_DEAD_COLUMNS = 64


class StepCache:
    """Per block, the self-attention entries of ``length`` positions of N = B * ``group`` prefixes.

    Made by the decoder's first step (``TransformerDecoder.forward_one_step`` with no cache) and updated in place by
    each later one; a search calls :meth:`reorder` with its surviving rows and :meth:`select` to drop utterances.
    """

    def __init__(self, blocks: int, group: int):
        if group < 1:
            raise ValueError(f"a step cache needs groups of at least one row, got {group}")
        self.group = group
        self.length = 0     # positions in every prefix
        self.columns = 0    # pool columns in use (live or dead), the same for every group
        self.live = 0       # the most live columns of a group at the last compaction
        self.pool: List[Optional[torch.Tensor]] = [None] * blocks  # (B, H, C, capacity)
        self.member: Optional[torch.Tensor] = None  # (N, capacity) bool: row n's prefix holds column c
        self.pos: Optional[torch.Tensor] = None     # (B, capacity) long: the position of each column
        self._own: Optional[torch.Tensor] = None    # see _own_column

    @property
    def rows(self) -> int:
        """N, the number of prefixes (0 before the first entries)."""
        return 0 if self.member is None else self.member.size(0)

    def extend(self, block: int, entries: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Write ``entries`` (N, H, T_new, C), block ``block``'s entries of the positions after ``length``, into new
        columns (row r's position j at column ``columns + (r % group) * T_new + j`` of its group), and return that
        block's pool (B, H, C, P), ``member`` (N, P) and ``pos`` (B, P) over the P columns now in use (views).
        Block 0 makes the columns; ``length`` and ``columns`` move on in :meth:`commit`, after the last block."""
        n, heads, t_new, width = entries.shape
        if n % self.group:
            raise ValueError(f"{n} prefixes do not split into groups of {self.group}")
        groups = n // self.group
        if block == 0:
            self._make_columns(entries, t_new)
        end = self.columns + self.group * t_new
        pool = self.pool[block]
        if pool is None:  # (the first step; later, _compact resizes every block's pool)
            pool = self.pool[block] = entries.new_empty(groups, heads, width, self.member.size(1))
        # (N, H, T_new, C) -> (B, H, C, g * T_new): a group's rows one after the other, as _make_columns numbered them
        pool[..., self.columns:end] = entries.reshape(groups, self.group, heads, t_new, width).permute(0, 2, 4, 1, 3) \
            .reshape(groups, heads, width, self.group * t_new)
        return pool[..., :end], self.member[:, :end], self.pos[:, :end]

    def _make_columns(self, entries: torch.Tensor, t_new: int) -> None:
        """Room for the step's ``group * t_new`` new columns of each group (compacting or growing first), each new
        column kept by its own row only."""
        n, end = entries.size(0), self.columns + self.group * t_new
        if self.member is None:
            self.member = torch.zeros(n, max(end, 16), dtype=torch.bool, device=entries.device)
            self.pos = torch.zeros(n // self.group, max(end, 16), dtype=torch.long, device=entries.device)
        elif n != self.rows:
            raise ValueError(f"a step cache of {self.rows} prefixes got entries of {n}")
        if self.columns - self.live > max(MIN_DEAD_COLUMNS, self.live // 4) or end > self.member.size(1):
            self._compact(self.group * t_new)
            end = self.columns + self.group * t_new
        if t_new == 1:  # (every step after the first: row r's column is the group's r-th new one)
            self.member[:, self.columns:end] = self._own_column(n, entries.device)
            self.pos[:, self.columns:end] = self.length
            return
        cols = torch.arange(end - self.columns, device=entries.device)
        self.member[:, self.columns:end] = cols.div(t_new, rounding_mode="floor") \
            == (torch.arange(n, device=entries.device) % self.group).unsqueeze(1)
        self.pos[:, self.columns:end] = self.length + cols % t_new

    def _own_column(self, n: int, device: torch.device) -> torch.Tensor:
        """(N, group) bool: row r holds the group's (r % group)-th new column (made once per row count)."""
        if self._own is None or self._own.size(0) != n:
            self._own = torch.eye(self.group, dtype=torch.bool, device=device).repeat(n // self.group, 1)
        return self._own

    def _compact(self, room: int) -> None:
        """Move each group's live columns to its front (in their order), then make room for ``room`` more columns,
        doubling the capacity if the live ones need more than half of it."""
        groups = self.pos.size(0)
        live = self.member[:, :self.columns].view(groups, self.group, self.columns).any(dim=1)  # (B, columns)
        # A stable sort of "dead" puts each group's live columns first, in order; the dead ones follow.
        order = torch.sort((~live).to(torch.uint8), dim=1, stable=True).indices
        self.live = int(live.sum(dim=1).max()) if self.columns else 0
        capacity = self.member.size(1)
        if self.live + room > capacity // 2:
            capacity = max(2 * capacity, 2 * (self.live + room))
        keep = order[:, :self.live]
        member = self.member.new_zeros(self.rows, capacity)
        member[:, :self.live] = self.member.gather(1, keep.repeat_interleave(self.group, 0))
        pos = self.pos.new_zeros(groups, capacity)
        pos[:, :self.live] = self.pos.gather(1, keep)
        for block, pool in enumerate(self.pool):
            if pool is not None:
                moved = pool.new_empty(*pool.shape[:3], capacity)
                moved[..., :self.live] = pool.gather(3, keep[:, None, None, :].expand(*pool.shape[:3], self.live))
                self.pool[block] = moved
        self.member, self.pos, self.columns = member, pos, self.live

    def commit(self, new_positions: int) -> None:
        """The step's ``new_positions`` are in every block now."""
        self.length += new_positions
        self.columns += self.group * new_positions

    def truncate(self, length: int) -> None:
        """Forget the positions from ``length`` on, if no compaction has moved columns since they were added, so
        that a step can be run again (``bench/decode_speed.py`` times one step over the same cache)."""
        cut = self.columns - self.group * (self.length - length)
        if not 0 <= length <= self.length or cut < self.live or bool((self.pos[:, cut:self.columns] < length).any()):
            raise ValueError(f"a step cache of {self.length} positions cannot go back to {length}")
        self.member[:, cut:self.columns] = False
        self.length, self.columns = length, cut

    def reorder(self, src: torch.Tensor) -> None:
        """Row i takes the prefix of row ``src[i]`` (N,), a row of the same group: what a beam search's survivors
        do. Moves N rows of booleans, no entries."""
        group_of = torch.arange(src.size(0), device=src.device) // self.group
        if src.size(0) != self.rows or not bool((src // self.group == group_of).all()):
            raise ValueError(f"a step cache reorders rows within their group of {self.group}, of {self.rows} rows; "
                             f"got {src.tolist()}")
        self.member = self.member.index_select(0, src)

    def select(self, rows: torch.Tensor) -> None:
        """Keep the rows ``rows`` (whole groups, in order): a search dropping its finished utterances."""
        groups = rows[::self.group] // self.group
        self.pool = [None if p is None else p.index_select(0, groups) for p in self.pool]
        self.member, self.pos = self.member.index_select(0, rows), self.pos.index_select(0, groups)

    def entries(self, block: int) -> torch.Tensor:
        """Block ``block``'s entries of every row's whole prefix in position order, (N, H, length, C) (a copy, for
        checks); each position must be held exactly once."""
        pool = self.pool[block]
        out = pool.new_zeros(self.rows, pool.size(1), self.length, pool.size(2))
        for row in range(self.rows):
            cols = self.member[row, :self.columns].nonzero().squeeze(1)
            positions = self.pos[row // self.group, cols]
            if not torch.equal(positions.sort().values, torch.arange(self.length, device=positions.device)):
                raise AssertionError(f"row {row} holds positions {positions.tolist()}, not 0..{self.length - 1}")
            out[row, :, positions] = pool[row // self.group][..., cols].transpose(1, 2)
        return out
