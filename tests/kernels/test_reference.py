"""The UDPS similarity's properties (docs/udps.md)."""
import pytest
import torch

from wenet_udps.kernels.reference import udps_similarity


def test_similarity_examples_from_the_doc():
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([2.0, 4.0])
    assert udps_similarity(a, b).item() == pytest.approx(40 / 45)
    assert udps_similarity(b, b).item() == pytest.approx(1.0)
    assert udps_similarity(a, a).item() == pytest.approx(1.0)
    # cosine would say 1 for parallel vectors of different length
    assert udps_similarity(a, 3 * a).item() < 1.0


def test_similarity_range_identity_opposite_and_scale():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(1000, 16, generator=g, dtype=torch.float64)
    b = torch.randn(1000, 16, generator=g, dtype=torch.float64) * torch.rand(1000, 1, generator=g, dtype=torch.float64) * 3
    s = udps_similarity(a, b)
    assert s.shape == (1000,)
    assert (s >= -1).all() and (s <= 1).all()
    assert torch.allclose(udps_similarity(a, a), torch.ones(1000, dtype=torch.float64))
    assert torch.allclose(udps_similarity(a, -a), -torch.ones(1000, dtype=torch.float64))
    # -1 only when the norms match: a and -2a are opposite but of different length
    assert (udps_similarity(a, -2 * a) > -1 + 1e-6).all()
    # 1 only when equal
    assert (udps_similarity(a, a + 1e-3 * b) < 1).all()
    for k in (0.01, 7.0, 1e4):
        assert torch.allclose(udps_similarity(k * a, k * b), s)


def test_similarity_zero_vectors_and_broadcast():
    z = torch.zeros(3, requires_grad=True)
    w = torch.zeros(3, requires_grad=True)
    s = udps_similarity(z, w)
    assert s.item() == 0.0
    s.backward()
    assert torch.isfinite(z.grad).all() and torch.isfinite(w.grad).all()
    a = torch.randn(4, 1, 5)
    b = torch.randn(1, 6, 5)
    out = udps_similarity(a, b)
    assert out.shape == (4, 6)
    assert torch.allclose(out[2, 3], udps_similarity(a[2, 0], b[0, 3]))
    # one zero vector against a non-zero one: dot is 0, so S is 0
    assert udps_similarity(torch.zeros(5), torch.randn(5)).item() == 0.0


@pytest.mark.parametrize("with_bias", [False, True])
def test_decoding_path_in_place_gives_the_training_path_bits(with_bias):
    """Without autograd the formula reuses its intermediates in place: the same ops, so the same bits as the
    recorded (training) path, and the inputs are left untouched."""
    from wenet_udps.kernels.reference import udps_attention_reference
    torch.manual_seed(3)
    q, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8)
    k = torch.randn(1, 3, 7, 8)
    k_norm = k.norm(dim=-1)
    mask = torch.rand(2, 5, 7) > 0.4
    mask[0, 1] = False  # a fully masked row
    bias = torch.randn(1, 3, 5, 7) if with_bias else None
    before = [t.clone() for t in (q, k, k_norm, v, mask)]
    with torch.no_grad():
        fast = udps_attention_reference(q, k, k_norm, v, mask=mask, bias=bias)
    recorded = udps_attention_reference(q.requires_grad_(), k, k_norm, v, mask=mask, bias=bias)
    assert recorded.requires_grad and torch.equal(fast, recorded.detach())
    assert torch.count_nonzero(fast[0, :, 1]) == 0
    assert all(torch.equal(a, b) for a, b in zip(before, (q.detach(), k, k_norm, v, mask)))
