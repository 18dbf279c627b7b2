"""The C++ UDPS CPU kernel (blockwise, lse saved, backward recomputes P): float64 routing, bits across thread counts,
its threads (torch's over batch x heads, one MKL thread per GEMM), the warning when it does not build. Parity and
the rest it shares with cpu_fused: test_cpu_kernels.py."""
import pytest
import torch

from wenet_udps.kernels.cpu_ext import ext_available, thread_use, udps_attention_ext
from wenet_udps.kernels.cpu_fused import udps_attention_fused

from tests.kernels.udps_inputs import make_inputs, padding_mask, run_kernel

if not ext_available():
    pytest.skip("the C++ UDPS CPU kernel does not build here (see the warning)", allow_module_level=True)


def test_float64_runs_the_fused_kernel():
    q, k, v, alpha = make_inputs(2, 2, 20, 20, 8, dtype=torch.float64)
    mask = padding_mask([20, 11], 20)
    got = run_kernel(udps_attention_ext, q, k, v, alpha, mask)
    assert got[0].dtype == torch.float64
    assert all(torch.equal(a, b) for a, b in zip(got, run_kernel(udps_attention_fused, q, k, v, alpha, mask)))


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


def test_an_all_true_mask_gives_the_bits_of_no_mask():
    """A batch of equal lengths passes an all-True mask (issue 49): the kernel skips the mask there, and the result
    must be the unmasked one, forward and gradients, over several query and key blocks."""
    q, k, v, alpha = make_inputs(2, 2, 300, 600, 8)
    none = run_kernel(udps_attention_ext, q, k, v, alpha, None)
    every = run_kernel(udps_attention_ext, q, k, v, alpha, torch.ones(2, 1, 600, dtype=torch.bool))
    assert all(torch.equal(a, b) for a, b in zip(none, every))


def test_batch_and_heads_share_torch_threads_and_each_gemm_runs_on_one():
    """Issue 49: the loop over (batch, head) runs on torch's threads (it ran on one: the build lacked -fopenmp), and
    a GEMM inside it opens no parallel region of MKL's own (one each made thousands per training step, which
    collapse on busy cores)."""
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        two = thread_use(8)
        torch.set_num_threads(1)
        one = thread_use(8)
    finally:
        torch.set_num_threads(threads)
    assert two[0] == 2 and one[0] == 1
    assert two[1] in (0, 1) and one[1] in (0, 1)  # 0: a torch without MKL (at::mm, no MKL threads)


def test_unavailable_extension_warns_with_the_reason(monkeypatch):
    from wenet_udps.kernels import cpu_ext

    monkeypatch.setattr(cpu_ext, "_load", lambda: OSError("ninja not found (a test)"))
    with pytest.warns(RuntimeWarning, match="ninja not found"):
        assert not cpu_ext.ext_available()
