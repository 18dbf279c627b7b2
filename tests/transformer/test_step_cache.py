"""StepCache: entries written in place into a pool per group, rows holding columns, hold through many steps of beam
search reordering what concatenating every step's entries to a per-row copy of the prefix (reordered with the rows)
holds; hypotheses with a common parent keep its entries once, and pruned ones are compacted away."""
import pytest
import torch

from wenet_udps.transformer.step_cache import MIN_DEAD_COLUMNS, StepCache

H, C, VOCAB = 2, 5, 3


def entries_of(tokens: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """A function of each whole prefix, as a decoder's entries are: (N, L) tokens -> (N, H, L, C)."""
    return torch.cumsum(tokens[:, :, None, None].float() * weights[:tokens.size(1)], dim=1).transpose(1, 2)


def beam_steps(cache, groups, group, steps, seed, first=1):
    """Run a simulated beam search, its first step over ``first`` positions, then ``steps`` steps of one: survivors
    picked within each group (often one parent for all, or two parents for all: branches that live side by side),
    tokens from a small vocabulary. Checks every row's entries after each step; returns the most pooled columns
    of a group seen and the final reference."""
    gen = torch.Generator().manual_seed(seed)
    weights = torch.randn(first + steps, 2, H, C, generator=gen)  # per position and block
    n = groups * group
    tokens, reference, most_columns = torch.randint(0, VOCAB, (n, first), generator=gen), [None, None], 0
    for step in range(steps):
        for block in range(2):
            new = entries_of(tokens, weights[:, block])[:, :, cache.length:]
            pool, member, pos = cache.extend(block, new)
            assert pool.shape[:3] == (groups, H, C) and member.shape == (n, pool.size(-1)) and pos.shape[0] == groups
            reference[block] = new if reference[block] is None else torch.cat((reference[block], new), dim=2)
        cache.commit(new.size(2))
        for block in range(2):
            assert torch.equal(cache.entries(block), reference[block])
        most_columns = max(most_columns, cache.columns)
        parents = 1 + (step % 3 == 0)  # one parent or two, picked at random in each group
        pick = torch.randint(0, group, (groups, parents), generator=gen)[:, torch.arange(group) % parents]
        src = (torch.arange(groups).unsqueeze(1) * group + pick).reshape(-1)
        cache.reorder(src)
        reference = [r.index_select(0, src) for r in reference]
        tokens = torch.cat((tokens[src], torch.randint(0, VOCAB, (n, 1), generator=gen)), dim=1)
    return most_columns, reference


@pytest.mark.parametrize("groups,group,first", [(1, 4, 1), (3, 2, 3), (2, 1, 1), (2, 5, 2)])
def test_pooled_cache_equals_concatenating_and_reordering(groups, group, first):
    """300 steps (compactions, growth past the first capacity): each row's entries equal the concatenated reference
    exactly (the same numbers are kept, never recomputed), and the pool stays near the tree's size, not
    group x length."""
    cache = StepCache(2, group)
    steps = 300
    most_columns, _ = beam_steps(cache, groups, group, steps, seed=groups * 10 + group, first=first)
    length = first + steps
    # The live columns: a tree of <= 2 branches per step (one or two parents) ~ 2 x length; dead ones add at most
    # a quarter of that, the minimum and one step's columns.
    assert most_columns <= 2 * length * 1.25 + MIN_DEAD_COLUMNS + 2 * group * first
    if group > 2:
        assert most_columns < group * length  # the hypotheses' common positions are kept once


def test_select_keeps_whole_groups():
    cache = StepCache(2, 2)
    _, reference = beam_steps(cache, 3, 2, 12, seed=7)
    rows = torch.tensor([0, 1, 4, 5])  # groups 0 and 2
    cache.select(rows)
    assert cache.rows == 4
    for block in range(2):
        assert torch.equal(cache.entries(block), reference[block].index_select(0, rows))


def test_reordering_across_groups_and_wrong_rows_are_refused():
    cache = StepCache(1, 2)
    cache.extend(0, torch.zeros(4, H, 1, C))
    cache.commit(1)
    with pytest.raises(ValueError, match="reorders rows within their group of 2"):
        cache.reorder(torch.tensor([0, 2, 2, 3]))
    with pytest.raises(ValueError, match="3 prefixes do not split into groups of 2"):
        StepCache(1, 2).extend(0, torch.zeros(3, H, 1, C))
    with pytest.raises(ValueError, match="a step cache of 4 prefixes got entries of 6"):
        cache.extend(0, torch.zeros(6, H, 1, C))


def test_truncate_lets_a_step_run_again_but_not_past_a_compaction():
    cache = StepCache(2, 2)
    _, reference = beam_steps(cache, 2, 2, 12, seed=3)
    length, columns = cache.length, cache.columns
    cache.truncate(length - 1)
    cache.extend(0, reference[0][:, :, -1:])
    cache.extend(1, reference[1][:, :, -1:])
    cache.commit(1)
    assert (cache.length, cache.columns) == (length, columns)
    assert all(torch.equal(cache.entries(b), reference[b]) for b in range(2))
    for wrong in (length + 2, 0):  # past the end; before a compaction moved the columns
        with pytest.raises(ValueError, match=f"a step cache of {length} positions cannot go back to {wrong}"):
            cache.truncate(wrong)
    assert cache.live > 0  # (12 steps of 2 rows x 2 groups did compact: 0 would need columns it moved)
