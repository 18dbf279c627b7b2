"""What every CPU UDPS kernel with a hand-derived backward must do (``cpu_fused`` eager, ``cpu_ext`` C++): the
reference's values and gradients for every mask kind, the eps floor, zero rows, half precision, the same bits with
and without autograd and run to run. Kernel-specific checks live in test_cpu_fused.py / test_cpu_ext.py."""
import pytest
import torch

from wenet_udps.kernels.cpu_ext import ext_available, udps_attention_ext
from wenet_udps.kernels.cpu_fused import udps_attention_fused
from wenet_udps.kernels.reference import udps_attention_reference

from tests.kernels.udps_inputs import CASES, assert_same, chunk_mask, make_inputs, padding_mask, run_kernel

KERNELS = [
    pytest.param(udps_attention_fused, id="cpu_fused"),
    pytest.param(udps_attention_ext, id="cpu_ext", marks=pytest.mark.skipif(
        not ext_available(), reason="the C++ UDPS CPU kernel does not build here (see the warning)")),
]


def late_keys_mask(t1: int, t2: int) -> torch.Tensor:
    """(1, T1, T2): odd rows keep keys only from 600 on (past the C++ forward's first 512-key block), even rows keep
    random keys, the last row none."""
    gen = torch.Generator().manual_seed(6)
    mask = torch.rand(1, t1, t2, generator=gen) > 0.5
    mask[:, 1::2, :600] = False
    mask[:, -1] = False
    return mask


# Beyond the shared cases: streaming chunks, a decoding step, more than one query block (the C++ kernel's: 64 rows,
# 256 in its forward without a per-row mask), key counts that are not a multiple of its 16-key chunk, key ranges
# that differ per block, more than one 512-key block (its forward's online softmax), rows whose first such block has
# no kept key.
CPU_CASES = dict(CASES, **{
    "chunk (B, T1, T2)": (2, 3, 21, 21, lambda: chunk_mask(2, 21, 4)),
    "decoding step, T1 = 1": (3, 2, 1, 17, lambda: padding_mask([17, 9, 4], 17)),
    "3 query blocks, padding": (3, 2, 150, 133, lambda: padding_mask([133, 70, 5], 133)),
    "3 query blocks, causal": (2, 2, 150, 150, lambda: torch.tril(torch.ones(150, 150, dtype=torch.bool)).expand(
        2, 150, 150)),
    "3 query blocks, chunk": (2, 2, 140, 140, lambda: chunk_mask(2, 140, 16)),
    "3 query blocks, no mask": (2, 2, 131, 77, None),
    "key blocks, 2 query blocks of 256, padding": (2, 2, 300, 1100, lambda: padding_mask([1100, 530], 1100)),
    "key blocks, rows kept only in a later block": (2, 2, 70, 1100, lambda: late_keys_mask(70, 1100)),
})


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", list(CPU_CASES))
def test_matches_reference(kernel, case):
    batch, heads, t1, t2, make_mask = CPU_CASES[case]
    mask = make_mask() if make_mask else None
    # A batch-1 key tensor (as the rel-pos term gives) must broadcast like the reference, gradients summed.
    k_batch = 1 if case in ("no mask", "3 query blocks, padding") else None
    q, k, v, alpha = make_inputs(batch, heads, t1, t2, 8, k_batch=k_batch)
    assert_same(run_kernel(udps_attention_reference, q, k, v, alpha, mask), run_kernel(kernel, q, k, v, alpha, mask))


@pytest.mark.parametrize("kernel", KERNELS)
def test_inference_forward_equals_training_forward(kernel):
    """Without grad the forward skips the autograd Function; it must be the same computation, bit for bit."""
    q, k, v, alpha = make_inputs(2, 3, 70, 70, 8)
    k_num, k_norm, mask = 4.0 * alpha * k, torch.linalg.vector_norm(k, dim=-1), padding_mask([70, 7], 70)
    with torch.no_grad():
        inference = kernel(q, k_num, k_norm, v, mask=mask)
    training = kernel(q.requires_grad_(True), k_num, k_norm, v, mask=mask)
    assert training.grad_fn is not None
    assert torch.equal(inference, training.detach())


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("zero_query", [False, True])
def test_eps_floor_matches_reference(kernel, zero_query):
    """Near-zero queries and keys hit the eps floor of the denominator; its gradient must stop there too."""
    q, k, v, alpha = make_inputs(2, 2, 12, 12, 4)
    q[:, :, :4] *= 1e-5
    k[:, :, :5] *= 1e-5
    if zero_query:
        q[0, 0, 0] = 0.0
    mask = padding_mask([12, 9], 12)
    assert_same(run_kernel(udps_attention_reference, q, k, v, alpha, mask, eps=1e-3),
                run_kernel(kernel, q, k, v, alpha, mask, eps=1e-3))


@pytest.mark.parametrize("kernel", KERNELS)
def test_fully_masked_rows_are_zero_with_zero_gradient(kernel):
    q, k, v, _ = make_inputs(2, 2, 8, 8, 4)
    mask = torch.ones(2, 8, 8, dtype=torch.bool)
    mask[1, 3] = False
    q.requires_grad_(True)
    out = kernel(q, 2 * k, torch.linalg.vector_norm(k, dim=-1), v, mask=mask)
    out.sum().backward()
    assert torch.equal(out[1, :, 3], torch.zeros_like(out[1, :, 3]))
    assert torch.equal(q.grad[1, :, 3], torch.zeros_like(q.grad[1, :, 3]))
    assert out[0].abs().sum() > 0


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs_close_to_float32(kernel, dtype):
    q, k, v, alpha = make_inputs(2, 2, 70, 70, 16)
    mask = padding_mask([70, 50], 70)
    ref = run_kernel(udps_attention_reference, q, k, v, alpha, mask)
    got = run_kernel(kernel, q.to(dtype), k.to(dtype), v.to(dtype), alpha.to(dtype), mask)
    assert got[0].dtype == dtype
    assert all(torch.isfinite(g.float()).all() for g in got)
    torch.testing.assert_close(got[0].float(), ref[0], atol=5e-2, rtol=5e-2)
    torch.testing.assert_close(got[1].float(), ref[1], atol=5e-2, rtol=5e-2)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("t1, t2", [(140, 140), (300, 1100)])
def test_same_inputs_give_bitwise_same_gradients(kernel, t1, t2):
    """Training with these kernels must be reproducible: two runs, the same bits."""
    q, k, v, alpha = make_inputs(3, 2, t1, t2, 8)
    mask = padding_mask([t2, t2 * 2 // 3, 12], t2)
    first = run_kernel(kernel, q, k, v, alpha, mask)
    second = run_kernel(kernel, q, k, v, alpha, mask)
    assert all(torch.equal(a, b) for a, b in zip(first, second))
