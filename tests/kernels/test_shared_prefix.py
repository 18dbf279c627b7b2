"""shared_prefix: attention over keys kept once per group of query rows (a beam's common prefix) plus each row's own
keys gives what scaled-dot SDPA and the UDPS reference give over every row's whole key sequence."""
import math

import pytest
import torch

from wenet_udps.kernels.reference import udps_attention_reference
from wenet_udps.kernels.scaled_dot import scaled_dot_attention
from wenet_udps.kernels.shared_prefix import shared_prefix_attention

pytestmark = pytest.mark.usefixtures("one_thread")

H, D = 3, 8


def inputs(groups, g, t1, s, r, seed=0):
    gen = torch.Generator().manual_seed(seed)
    n = groups * g
    q = torch.randn(n, H, t1, D, generator=gen)
    shared_k, shared_v = torch.randn(groups, H, s, D, generator=gen), torch.randn(groups, H, s, D, generator=gen)
    own_k, own_v = torch.randn(n, H, r, D, generator=gen), torch.randn(n, H, r, D, generator=gen)
    # Every row's whole key sequence: its group's shared keys, then its own.
    k = torch.cat((shared_k.repeat_interleave(g, 0), own_k), dim=2)
    v = torch.cat((shared_v.repeat_interleave(g, 0), own_v), dim=2)
    return q, shared_k, shared_v, own_k, own_v, k, v


def masks(n, t1, length):
    gen = torch.Generator().manual_seed(5)
    none_kept = torch.ones(n, t1, length, dtype=torch.bool)
    none_kept[1] = False
    return {"none": None, "all kept": torch.ones(n, 1, length, dtype=torch.bool),
            "causal rows": torch.ones(n, t1, length, dtype=torch.bool).tril(length - t1),
            "random": torch.rand(n, 1, length, generator=gen) > 0.3, "a row with no kept key": none_kept}


SHAPES = [(2, 3, 1, 9, 2), (1, 4, 1, 0, 5), (3, 1, 1, 6, 1), (2, 2, 3, 5, 4)]  # groups, g, T1, S, R


@pytest.mark.parametrize("groups,g,t1,s,r", SHAPES)
@pytest.mark.parametrize("case", ["none", "all kept", "causal rows", "random", "a row with no kept key"])
def test_scaled_dot_matches_sdpa_over_the_whole_keys(groups, g, t1, s, r, case):
    q, shared_k, shared_v, own_k, own_v, k, v = inputs(groups, g, t1, s, r)
    mask = masks(groups * g, t1, s + r)[case]
    got = shared_prefix_attention(q, shared_k, shared_v, own_k, own_v, mask, 1.0 / math.sqrt(D))
    want = scaled_dot_attention(q, k, v, torch.empty(0, dtype=torch.bool) if mask is None else mask, 0.0)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    if case == "a row with no kept key":
        assert torch.equal(got[1], torch.zeros_like(got[1]))


@pytest.mark.parametrize("groups,g,t1,s,r", SHAPES)
@pytest.mark.parametrize("case", ["none", "causal rows", "random", "a row with no kept key"])
def test_udps_matches_the_reference_over_the_whole_keys(groups, g, t1, s, r, case):
    q, shared_k, shared_v, own_k, own_v, k, v = inputs(groups, g, t1, s, r, seed=1)
    q[0, 0, 0] = 0.0  # a zero query: the eps floor of the denominator
    mask = masks(groups * g, t1, s + r)[case]
    scale = 4.0 * torch.tensor([2.0, 5.0, 0.5]).view(1, H, 1, 1)
    got = shared_prefix_attention(q, shared_k, shared_v, own_k, own_v, mask, scale,
                                  shared_norm=shared_k.norm(dim=-1), own_norm=own_k.norm(dim=-1), eps=1e-6)
    want = udps_attention_reference(q, scale * k, k.norm(dim=-1), v, mask=mask, eps=1e-6)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_rows_that_do_not_split_into_the_groups_are_refused():
    q, shared_k, shared_v, own_k, own_v, _, _ = inputs(2, 3, 1, 4, 2)
    with pytest.raises(ValueError, match="5 query rows do not split into the 2 groups"):
        shared_prefix_attention(q[:5], shared_k, shared_v, own_k[:5], own_v[:5], None, 1.0)
