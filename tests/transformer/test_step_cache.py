"""StepCache: entries written in place and shared per group hold, through many steps of beam-search reordering, what
concatenating every step's entries to a per-row copy of the prefix (reordered with the rows) holds."""
import pytest
import torch

from wenet_udps.transformer.step_cache import StepCache

H, C, VOCAB = 2, 5, 3


def entries_of(tokens: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """A function of each whole prefix, as a decoder's entries are: (N, L) tokens -> (N, H, L, C)."""
    return torch.cumsum(tokens[:, :, None, None].float() * weights[:tokens.size(1)], dim=1).transpose(1, 2)


def beam_steps(cache, groups, group, steps, seed):
    """Run ``steps`` steps of a simulated beam search: survivors picked within each group (often one for all, so
    prefixes merge), tokens from a small vocabulary (so rows also agree by chance). Returns the max shared length."""
    gen = torch.Generator().manual_seed(seed)
    weights = torch.randn(steps + 1, 2, H, C, generator=gen)  # per position and block
    n = groups * group
    tokens, reference, most_shared = torch.zeros(n, 1, dtype=torch.long), [None, None], 0
    for step in range(1, steps + 1):
        cache.share(tokens)
        for block in range(2):
            new = entries_of(tokens, weights[:, block])[:, :, cache.length:]
            shared, own = cache.extend(block, new)
            assert shared.shape == (groups, H, cache.shared_len, C) and own.shape[:3] == (n, H, step - cache.shared_len)
            reference[block] = new if reference[block] is None else torch.cat((reference[block], new), dim=2)
        cache.commit(1)
        for block in range(2):
            assert torch.equal(cache.entries(block), reference[block])
        most_shared = max(most_shared, cache.shared_len)
        pick = torch.randint(0, group, (groups, 1 if step % 4 else group), generator=gen).expand(groups, group)
        src = (torch.arange(groups).unsqueeze(1) * group + pick).reshape(-1)
        cache.reorder(src)
        reference = [r.index_select(0, src) for r in reference]
        tokens = torch.cat((tokens[src], torch.randint(0, VOCAB, (n, 1), generator=gen)), dim=1)
    return most_shared, tokens, reference


@pytest.mark.parametrize("groups,group", [(1, 4), (3, 2), (2, 1)])
def test_in_place_shared_cache_equals_concatenating_and_reordering(groups, group):
    """40 steps (past the first capacity of 16 twice): the shared part is used, and each row's entries equal the
    concatenated reference exactly (the same numbers are copied, never recomputed)."""
    cache = StepCache(2, group)
    most_shared, _, _ = beam_steps(cache, groups, group, 40, seed=groups * 10 + group)
    assert most_shared > 10
    assert cache.own[0].size(2) >= 40 and cache.shared[0].size(-1) >= 40


def test_select_keeps_whole_groups():
    cache = StepCache(2, 2)
    _, _, reference = beam_steps(cache, 3, 2, 12, seed=7)
    rows = torch.tensor([0, 1, 4, 5])  # groups 0 and 2
    cache.select(rows)
    assert cache.rows == 4
    for block in range(2):
        assert torch.equal(cache.entries(block), reference[block].index_select(0, rows))


def test_reordering_across_groups_is_refused():
    cache = StepCache(1, 2)
    cache.extend(0, torch.zeros(4, H, 1, C))
    cache.commit(1)
    with pytest.raises(ValueError, match="reorders rows within their group of 2"):
        cache.reorder(torch.tensor([0, 2, 2, 3]))
    with pytest.raises(ValueError, match="3 prefixes do not split into groups of 2"):
        StepCache(1, 2).extend(0, torch.zeros(3, H, 1, C))


def test_truncate_lets_a_step_run_again_and_keeps_the_shared_part():
    cache = StepCache(2, 2)
    _, tokens, reference = beam_steps(cache, 2, 2, 12, seed=3)
    shared, length = cache.shared_len, cache.length
    cache.truncate(length - 1)
    cache.extend(0, reference[0][:, :, -1:])
    cache.extend(1, reference[1][:, :, -1:])
    cache.commit(1)
    assert cache.length == length and all(torch.equal(cache.entries(b), reference[b]) for b in range(2))
    with pytest.raises(ValueError, match=f"cannot keep {shared - 1}"):
        cache.truncate(shared - 1)
