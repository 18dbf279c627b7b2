"""prefix_pool: attention over a pool of key columns kept once per group of query rows (a beam's hypotheses), each row
masked to the columns it holds, gives what scaled-dot SDPA and the UDPS reference give over each row's own keys."""
import math

import pytest
import torch

from wenet_udps.kernels.prefix_pool import prefix_pool_attention
from wenet_udps.kernels.reference import udps_attention_reference
from wenet_udps.kernels.scaled_dot import scaled_dot_attention

pytestmark = pytest.mark.usefixtures("one_thread")

H, D = 3, 8


def inputs(groups, g, t1, length, extra, seed=0):
    """A pool per group: ``length`` columns every row of the group holds plus ``extra`` columns per row that only it
    holds (positions length.. length + extra - 1), plus a column nobody holds, all in shuffled order; and each row's
    keys and values in position order, (N, H, length + extra, D)."""
    gen = torch.Generator().manual_seed(seed)
    n, total = groups * g, length + g * extra + 1
    q = torch.randn(n, H, t1, D, generator=gen)
    keys, values = torch.randn(groups, H, D, total, generator=gen), torch.randn(groups, H, D, total, generator=gen)
    member = torch.zeros(n, total, dtype=torch.bool)
    pos = torch.zeros(groups, total, dtype=torch.long)
    for b in range(groups):
        order = torch.randperm(total, generator=gen)  # columns in no particular order
        common, rest = order[:length], order[length:]
        pos[b, common] = torch.arange(length)
        for r in range(g):
            own = rest[r * extra:(r + 1) * extra]
            pos[b, own] = torch.arange(length, length + extra)
            member[b * g + r, common] = True
            member[b * g + r, own] = True
        pos[b, rest[-1]] = 0  # the dead column: nobody holds it
    # Each row's keys in position order (N, H, L, D), what the pool must be equivalent to.
    k = torch.zeros(n, H, length + extra, D)
    v = torch.zeros(n, H, length + extra, D)
    for row in range(n):
        cols = member[row].nonzero().squeeze(1)
        k[row][:, pos[row // g, cols]] = keys[row // g][:, :, cols].transpose(1, 2)
        v[row][:, pos[row // g, cols]] = values[row // g][:, :, cols].transpose(1, 2)
    return q, keys, values, member, pos, k, v


def masks(n, t1, length):
    gen = torch.Generator().manual_seed(5)
    none_kept = torch.ones(n, t1, length, dtype=torch.bool)
    none_kept[1] = False
    return {"none": None, "all kept": torch.ones(n, 1, length, dtype=torch.bool),
            "causal rows": torch.ones(n, t1, length, dtype=torch.bool).tril(length - t1),
            "random": torch.rand(n, 1, length, generator=gen) > 0.3, "a row with no kept key": none_kept}


SHAPES = [(2, 3, 1, 9, 2), (1, 4, 1, 0, 5), (3, 1, 1, 6, 1), (2, 2, 3, 5, 4)]  # groups, g, T1, common, own


@pytest.mark.parametrize("groups,g,t1,common,own", SHAPES)
@pytest.mark.parametrize("case", ["none", "all kept", "causal rows", "random", "a row with no kept key"])
def test_scaled_dot_matches_sdpa_over_each_rows_keys(groups, g, t1, common, own, case):
    q, keys, values, member, pos, k, v = inputs(groups, g, t1, common, own)
    mask = masks(groups * g, t1, common + own)[case]
    got = prefix_pool_attention(q, keys, values, member, pos, mask, 1.0 / math.sqrt(D))
    want = scaled_dot_attention(q, k, v, torch.empty(0, dtype=torch.bool) if mask is None else mask, 0.0)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    if case == "a row with no kept key":
        assert torch.equal(got[1], torch.zeros_like(got[1]))


@pytest.mark.parametrize("groups,g,t1,common,own", SHAPES)
@pytest.mark.parametrize("case", ["none", "causal rows", "random", "a row with no kept key"])
def test_udps_matches_the_reference_over_each_rows_keys(groups, g, t1, common, own, case):
    q, keys, values, member, pos, k, v = inputs(groups, g, t1, common, own, seed=1)
    q[0, 0, 0] = 0.0  # a zero query: the eps floor of the denominator
    mask = masks(groups * g, t1, common + own)[case]
    scale = 4.0 * torch.tensor([2.0, 5.0, 0.5]).view(1, H, 1, 1)
    got = prefix_pool_attention(q, keys, values, member, pos, mask, scale, norm=keys.norm(dim=2), eps=1e-6)
    want = udps_attention_reference(q, scale * k, k.norm(dim=-1), v, mask=mask, eps=1e-6)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_a_column_no_row_holds_changes_nothing():
    q, keys, values, member, pos, _, _ = inputs(2, 3, 1, 4, 2)
    before = prefix_pool_attention(q, keys, values, member, pos, None, 0.5)
    dead = ~member.view(2, 3, -1).any(dim=1)  # (B, P)
    keys[dead.unsqueeze(1).unsqueeze(1).expand_as(keys)] = 1e4
    assert torch.equal(prefix_pool_attention(q, keys, values, member, pos, None, 0.5), before)


def test_rows_that_do_not_split_into_the_groups_are_refused():
    q, keys, values, member, pos, _, _ = inputs(2, 3, 1, 4, 2)
    with pytest.raises(ValueError, match="5 query rows do not split into the 2 groups"):
        prefix_pool_attention(q[:5], keys, values, member[:5], pos, None, 1.0)
