"""The CPU fused UDPS kernel (hand-derived backward, eager) gives the reference's values and gradients."""
import pytest
import torch

from wenet_udps.kernels.cpu_fused import UDPSFusedFunction, udps_attention_fused
from wenet_udps.kernels.reference import udps_attention_reference

from tests.kernels.udps_inputs import CASES, assert_same, make_inputs, padding_mask, run_kernel


def _chunk_mask(batch: int, t: int, chunk: int) -> torch.Tensor:
    """U2 streaming: query i sees every key of its own chunk and of the chunks before it, (B, T, T)."""
    pos = torch.arange(t)
    return ((pos.unsqueeze(0) // chunk) <= (pos.unsqueeze(1) // chunk)).expand(batch, t, t)


FUSED_CASES = dict(CASES, **{"chunk (B, T1, T2)": (2, 3, 21, 21, lambda: _chunk_mask(2, 21, 4)),
                             "decoding step, T1 = 1": (3, 2, 1, 17, lambda: padding_mask([17, 9, 4], 17))})


@pytest.mark.parametrize("case", list(FUSED_CASES))
def test_fused_matches_reference(case):
    batch, heads, t1, t2, make_mask = FUSED_CASES[case]
    mask = make_mask() if make_mask else None
    # A batch-1 key tensor (as the rel-pos term gives) must broadcast like the reference, gradients summed.
    q, k, v, alpha = make_inputs(batch, heads, t1, t2, 8, k_batch=1 if case == "no mask" else None)
    assert_same(run_kernel(udps_attention_reference, q, k, v, alpha, mask),
                run_kernel(udps_attention_fused, q, k, v, alpha, mask))


def test_inference_forward_equals_training_forward():
    """Without grad the forward skips the autograd Function; it must be the same computation, bit for bit."""
    q, k, v, alpha = make_inputs(2, 3, 20, 20, 8)
    k_num, k_norm, mask = 4.0 * alpha * k, torch.linalg.vector_norm(k, dim=-1), padding_mask([20, 7], 20)
    with torch.no_grad():
        inference = udps_attention_fused(q, k_num, k_norm, v, mask=mask)
    training = udps_attention_fused(q.requires_grad_(True), k_num, k_norm, v, mask=mask)
    assert training.grad_fn is not None
    assert torch.equal(inference, training.detach())


@pytest.mark.parametrize("zero_query", [False, True])
def test_eps_floor_matches_reference(zero_query):
    """Near-zero queries and keys hit the eps floor of the denominator; its gradient must stop there too."""
    q, k, v, alpha = make_inputs(2, 2, 12, 12, 4)
    q[:, :, :4] *= 1e-5
    k[:, :, :5] *= 1e-5
    if zero_query:
        q[0, 0, 0] = 0.0
    mask = padding_mask([12, 9], 12)
    assert_same(run_kernel(udps_attention_reference, q, k, v, alpha, mask, eps=1e-3),
                run_kernel(udps_attention_fused, q, k, v, alpha, mask, eps=1e-3))


def test_fully_masked_rows_are_zero_with_zero_gradient():
    q, k, v, _ = make_inputs(2, 2, 8, 8, 4)
    mask = torch.ones(2, 8, 8, dtype=torch.bool)
    mask[1, 3] = False
    q.requires_grad_(True)
    out = udps_attention_fused(q, 2 * k, torch.linalg.vector_norm(k, dim=-1), v, mask=mask)
    out.sum().backward()
    assert torch.equal(out[1, :, 3], torch.zeros_like(out[1, :, 3]))
    assert torch.equal(q.grad[1, :, 3], torch.zeros_like(q.grad[1, :, 3]))
    assert out[0].abs().sum() > 0


def test_gradcheck_float64():
    """The hand-derived backward against finite differences, with every mask kind and the eps floor active."""
    q, k, v, _ = make_inputs(2, 2, 5, 6, 3, dtype=torch.float64)
    k_norm = torch.linalg.vector_norm(k, dim=-1)
    pad = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool).view(2, 1, 1, 6)
    holes = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 0, 1, 1, 1, 1]], dtype=torch.bool).view(2, 1, 1, 6)
    causal = torch.tril(torch.ones(5, 6, dtype=torch.bool)).expand(2, 1, 5, 6)
    empty_row = causal.clone()
    empty_row[1, 0, 2] = False
    for keep, eps in ((None, 1e-6), (pad, 1e-6), (holes, 1e-6), (causal, 1e-6), (empty_row, 1e-6), (pad, 0.5)):
        # eps = 0.5: the floor (|q| + |k|)^2 >= 0.5 is active for some pairs after scaling q down.
        scale = 0.3 if eps == 0.5 else 1.0
        inputs = [x.clone().requires_grad_(True) for x in (scale * q, 3 * k, scale * k_norm, v)]
        assert torch.autograd.gradcheck(lambda *x, keep=keep, eps=eps: UDPSFusedFunction.apply(*x, keep, eps),
                                        inputs, eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs_close_to_float32(dtype):
    q, k, v, alpha = make_inputs(2, 2, 70, 70, 16)
    mask = padding_mask([70, 50], 70)
    ref = run_kernel(udps_attention_reference, q, k, v, alpha, mask)
    got = run_kernel(udps_attention_fused, q.to(dtype), k.to(dtype), v.to(dtype), alpha.to(dtype), mask)
    assert got[0].dtype == dtype
    assert all(torch.isfinite(g.float()).all() for g in got)
    torch.testing.assert_close(got[0].float(), ref[0], atol=5e-2, rtol=5e-2)
    torch.testing.assert_close(got[1].float(), ref[1], atol=5e-2, rtol=5e-2)


def test_same_inputs_give_bitwise_same_gradients():
    """Training with this kernel must be reproducible: two runs, the same bits."""
    q, k, v, alpha = make_inputs(3, 2, 40, 40, 8)
    mask = padding_mask([40, 31, 12], 40)
    first = run_kernel(udps_attention_fused, q, k, v, alpha, mask)
    second = run_kernel(udps_attention_fused, q, k, v, alpha, mask)
    assert all(torch.equal(a, b) for a, b in zip(first, second))
