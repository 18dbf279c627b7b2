"""The UDPS kernels: the blocked fast path and the dispatch give the reference's values and gradients."""
import pytest
import torch

from wenet_udps.transformer.udps_fused import UDPSBlockedFunction, udps_attention_blocked
from wenet_udps.transformer.udps_ops import (BLOCKED_MIN_LEN, fast_path_available, udps_attention,
                                             udps_attention_reference)


def _inputs(batch, heads, t1, t2, d, k_batch=None, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, t1, d, generator=gen, dtype=torch.float64).to(dtype)
    k = torch.randn(k_batch or batch, heads, t2, d, generator=gen, dtype=torch.float64).to(dtype)
    v = torch.randn(batch, heads, t2, d, generator=gen, dtype=torch.float64).to(dtype)
    alpha = torch.tensor([3.0, 7.0, -2.0][:heads], dtype=dtype).view(1, -1, 1, 1)
    return q, k, v, alpha


def _run(kernel, q, k, v, alpha, mask, grad_seed=1, **kwargs):
    """Output and gradients w.r.t. q, k (through both k_num and k_norm), v and alpha, as the attention module calls."""
    leaves = [x.detach().clone().requires_grad_(True) for x in (q, k, v, alpha)]
    q_, k_, v_, a_ = leaves
    k_norm = torch.linalg.vector_norm(k_.float() if k_.dtype != torch.float64 else k_, dim=-1)
    out = kernel(q_, 4.0 * a_ * k_, k_norm, v_, mask=mask, **kwargs)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_seed), dtype=out.dtype)
    out.backward(grad)
    return [out.detach()] + [x.grad for x in leaves]


def _padding_mask(lengths, t):
    return (torch.arange(t).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).unsqueeze(1)


def _assert_same(ref, got, atol=2e-5, rtol=1e-4):
    for name, r, g in zip(["out", "dq", "dk", "dv", "dalpha"], ref, got):
        assert torch.isfinite(g).all(), name
        torch.testing.assert_close(g, r, atol=atol, rtol=rtol, msg=lambda m, n=name: f"{n}: {m}")


CASES = {
    "no mask": (2, 3, 20, 20, None),
    "padding": (3, 3, 20, 20, lambda: _padding_mask([20, 13, 1], 20)),
    "padding with an empty utterance": (3, 3, 20, 20, lambda: _padding_mask([20, 13, 0], 20)),
    "non-prefix key mask": (2, 3, 20, 20, lambda: torch.rand(2, 1, 20, generator=torch.Generator().manual_seed(3))
                            > 0.4),
    "causal (B, T1, T2)": (2, 3, 20, 20, lambda: torch.tril(torch.ones(20, 20, dtype=torch.bool)).expand(2, 20, 20)),
    "T1 != T2, fully masked rows": (2, 2, 9, 23, lambda: torch.cat(
        [torch.rand(2, 7, 23, generator=torch.Generator().manual_seed(4)) > 0.5,
         torch.zeros(2, 2, 23, dtype=torch.bool)], dim=1)),
    "mask batch 1": (3, 2, 20, 20, lambda: _padding_mask([11], 20)),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("k_batch_one", [False, True])
def test_blocked_matches_reference(case, k_batch_one):
    batch, heads, t1, t2, make_mask = CASES[case]
    mask = make_mask() if make_mask else None
    q, k, v, alpha = _inputs(batch, heads, t1, t2, 8, k_batch=1 if k_batch_one else None)
    ref = _run(udps_attention_reference, q, k, v, alpha, mask)
    # A tiny tile forces several query blocks per batch item.
    got = _run(udps_attention_blocked, q, k, v, alpha, mask, tile_elems=16)
    _assert_same(ref, got)


def test_eps_floor_matches_reference():
    """Near-zero queries and keys hit the eps floor of the denominator; its gradient must stop there too."""
    q, k, v, alpha = _inputs(2, 2, 12, 12, 4)
    q[:, :, :4] *= 1e-5
    k[:, :, :5] *= 1e-5
    q[0, 0, 0] = 0.0
    kwargs = dict(eps=1e-3)
    ref = _run(udps_attention_reference, q, k, v, alpha, None, **kwargs)
    got = _run(udps_attention_blocked, q, k, v, alpha, None, tile_elems=16, **kwargs)
    _assert_same(ref, got)


def test_fully_masked_rows_are_zero():
    q, k, v, _ = _inputs(2, 2, 8, 8, 4)
    mask = torch.ones(2, 8, 8, dtype=torch.bool)
    mask[1, 3] = False
    out = udps_attention_blocked(q, 2 * k, torch.linalg.vector_norm(k, dim=-1), v, mask=mask)
    assert torch.equal(out[1, :, 3], torch.zeros_like(out[1, :, 3]))
    assert out[0].abs().sum() > 0


def test_gradcheck_float64():
    q, k, v, _ = _inputs(2, 2, 5, 6, 3, dtype=torch.float64)
    k_norm = torch.linalg.vector_norm(k, dim=-1)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 0, 1, 1, 1, 1]], dtype=torch.bool).unsqueeze(1)
    for m in (None, mask, torch.tril(torch.ones(5, 6, dtype=torch.bool)).expand(2, 5, 6)):
        def fn(q_, k_, n_, v_, m=m):
            return UDPSBlockedFunction.apply(q_, k_, n_, v_, m, 1e-6, 8)
        inputs = [x.clone().requires_grad_(True) for x in (q, 3 * k, k_norm, v)]
        assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs_close_to_float32(dtype):
    q, k, v, alpha = _inputs(2, 2, 70, 70, 16)
    mask = _padding_mask([70, 50], 70)
    ref = _run(udps_attention_reference, q, k, v, alpha, mask)
    got = _run(udps_attention, q.to(dtype), k.to(dtype), v.to(dtype), alpha.to(dtype), mask)
    assert got[0].dtype == dtype
    for r, g in zip(ref, got):
        assert torch.isfinite(g.float()).all()
    torch.testing.assert_close(got[0].float(), ref[0], atol=5e-2, rtol=5e-2)
    torch.testing.assert_close(got[1].float(), ref[1], atol=5e-2, rtol=5e-2)


def test_dispatch_uses_fast_path_and_matches_reference(monkeypatch):
    t = BLOCKED_MIN_LEN
    q, k, v, alpha = _inputs(2, 2, t, t, 8)
    mask = _padding_mask([t, t - 9], t)
    assert fast_path_available(q, k, None, 0.0, False)
    calls = []
    real = UDPSBlockedFunction.apply
    monkeypatch.setattr(UDPSBlockedFunction, "apply", lambda *a: calls.append(1) or real(*a))
    got = _run(udps_attention, q, k, v, alpha, mask)
    assert calls, "udps_attention did not take the blocked path"
    _assert_same(_run(udps_attention_reference, q, k, v, alpha, mask), got)
    # An empty mask means no mask.
    empty = torch.ones((0, 0, 0), dtype=torch.bool)
    torch.testing.assert_close(_run(udps_attention, q, k, v, alpha, empty)[0],
                               _run(udps_attention_reference, q, k, v, alpha, None)[0], atol=2e-5, rtol=1e-4)


def test_dispatch_falls_back_for_bias_dropout_and_short_inputs():
    t = BLOCKED_MIN_LEN
    q, k, _, _ = _inputs(1, 2, t, t, 4)
    assert not fast_path_available(q, k, torch.zeros(1, 2, t, t), 0.0, False)
    assert not fast_path_available(q, k, None, 0.1, True)
    assert fast_path_available(q, k, None, 0.1, False)
    assert not fast_path_available(q[:, :, :1], k, None, 0.0, False)
    # With a bias the dispatch still gives the reference's numbers.
    q, k, v, alpha = _inputs(1, 2, t, t, 4)
    bias = torch.randn(1, 2, t, t)
    torch.testing.assert_close(_run(udps_attention, q, k, v, alpha, None, bias=bias)[0],
                               _run(udps_attention_reference, q, k, v, alpha, None, bias=bias)[0])
