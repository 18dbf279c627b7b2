"""The C++ UDPS CPU kernel (blockwise, lse saved, backward recomputes P) gives the reference's values and gradients."""
import pytest
import torch

from wenet_udps.kernels.cpu_ext import ext_available, udps_attention_ext
from wenet_udps.kernels.cpu_fused import udps_attention_fused
from wenet_udps.kernels.reference import udps_attention_reference

from tests.kernels.udps_inputs import CASES, assert_same, make_inputs, padding_mask, run_kernel

if not ext_available():
    pytest.skip("the C++ UDPS CPU kernel does not build here (see the warning)", allow_module_level=True)


def _chunk_mask(batch: int, t: int, chunk: int) -> torch.Tensor:
    """U2 streaming: query i sees every key of its own chunk and of the chunks before it, (B, T, T)."""
    pos = torch.arange(t)
    return ((pos.unsqueeze(0) // chunk) <= (pos.unsqueeze(1) // chunk)).expand(batch, t, t)


# Beyond the shared cases: more than one 64-row query block, key counts that are not a multiple of the 16-key chunk,
# key ranges that differ per block (causal, chunk), and a decoding step.
EXT_CASES = dict(CASES, **{
    "chunk (B, T1, T2)": (2, 3, 21, 21, lambda: _chunk_mask(2, 21, 4)),
    "decoding step, T1 = 1": (3, 2, 1, 17, lambda: padding_mask([17, 9, 4], 17)),
    "3 query blocks, padding": (3, 2, 150, 133, lambda: padding_mask([133, 70, 5], 133)),
    "3 query blocks, causal": (2, 2, 150, 150, lambda: torch.tril(torch.ones(150, 150, dtype=torch.bool)).expand(
        2, 150, 150)),
    "3 query blocks, chunk": (2, 2, 140, 140, lambda: _chunk_mask(2, 140, 16)),
    "3 query blocks, no mask": (2, 2, 131, 77, None),
})


@pytest.mark.parametrize("case", list(EXT_CASES))
def test_ext_matches_reference(case):
    batch, heads, t1, t2, make_mask = EXT_CASES[case]
    mask = make_mask() if make_mask else None
    # A batch-1 key tensor (as the rel-pos term gives) must broadcast like the reference, gradients summed.
    k_batch = 1 if case in ("no mask", "3 query blocks, padding") else None
    q, k, v, alpha = make_inputs(batch, heads, t1, t2, 8, k_batch=k_batch)
    assert_same(run_kernel(udps_attention_reference, q, k, v, alpha, mask),
                run_kernel(udps_attention_ext, q, k, v, alpha, mask))


def test_inference_forward_equals_training_forward():
    """Without grad the forward skips the autograd Function; it must be the same computation, bit for bit."""
    q, k, v, alpha = make_inputs(2, 3, 70, 70, 8)
    k_num, k_norm, mask = 4.0 * alpha * k, torch.linalg.vector_norm(k, dim=-1), padding_mask([70, 7], 70)
    with torch.no_grad():
        inference = udps_attention_ext(q, k_num, k_norm, v, mask=mask)
    training = udps_attention_ext(q.requires_grad_(True), k_num, k_norm, v, mask=mask)
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
                run_kernel(udps_attention_ext, q, k, v, alpha, mask, eps=1e-3))


def test_fully_masked_rows_are_zero_with_zero_gradient():
    q, k, v, _ = make_inputs(2, 2, 8, 8, 4)
    mask = torch.ones(2, 8, 8, dtype=torch.bool)
    mask[1, 3] = False
    q.requires_grad_(True)
    out = udps_attention_ext(q, 2 * k, torch.linalg.vector_norm(k, dim=-1), v, mask=mask)
    out.sum().backward()
    assert torch.equal(out[1, :, 3], torch.zeros_like(out[1, :, 3]))
    assert torch.equal(q.grad[1, :, 3], torch.zeros_like(q.grad[1, :, 3]))
    assert out[0].abs().sum() > 0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs_close_to_float32(dtype):
    q, k, v, alpha = make_inputs(2, 2, 70, 70, 16)
    mask = padding_mask([70, 50], 70)
    ref = run_kernel(udps_attention_reference, q, k, v, alpha, mask)
    got = run_kernel(udps_attention_ext, q.to(dtype), k.to(dtype), v.to(dtype), alpha.to(dtype), mask)
    assert got[0].dtype == dtype
    assert all(torch.isfinite(g.float()).all() for g in got)
    torch.testing.assert_close(got[0].float(), ref[0], atol=5e-2, rtol=5e-2)
    torch.testing.assert_close(got[1].float(), ref[1], atol=5e-2, rtol=5e-2)


def test_float64_runs_the_fused_kernel():
    q, k, v, alpha = make_inputs(2, 2, 20, 20, 8, dtype=torch.float64)
    mask = padding_mask([20, 11], 20)
    got = run_kernel(udps_attention_ext, q, k, v, alpha, mask)
    assert got[0].dtype == torch.float64
    assert all(torch.equal(a, b) for a, b in zip(got, run_kernel(udps_attention_fused, q, k, v, alpha, mask)))


def test_same_inputs_give_bitwise_same_gradients():
    """Training with this kernel must be reproducible: two runs, the same bits."""
    q, k, v, alpha = make_inputs(3, 2, 140, 140, 8)
    mask = padding_mask([140, 91, 12], 140)
    first = run_kernel(udps_attention_ext, q, k, v, alpha, mask)
    second = run_kernel(udps_attention_ext, q, k, v, alpha, mask)
    assert all(torch.equal(a, b) for a, b in zip(first, second))


def test_thread_count_does_not_change_the_bits():
    """Each (batch, head) is computed by one thread in the same order whatever the thread count."""
    q, k, v, alpha = make_inputs(3, 2, 100, 100, 8)
    mask = padding_mask([100, 61, 12], 100)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = run_kernel(udps_attention_ext, q, k, v, alpha, mask)
        torch.set_num_threads(2)
        two = run_kernel(udps_attention_ext, q, k, v, alpha, mask)
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(a, b) for a, b in zip(one, two))


def test_unavailable_extension_warns_with_the_reason(monkeypatch):
    from wenet_udps.kernels import cpu_ext

    monkeypatch.setattr(cpu_ext, "_load", lambda: OSError("ninja not found (a test)"))
    with pytest.warns(RuntimeWarning, match="ninja not found"):
        assert not cpu_ext.ext_available()
