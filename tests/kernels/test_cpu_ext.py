"""The C++ UDPS CPU kernel (blockwise, lse saved, backward recomputes P): float64 routing, bits across thread counts,
the warning when it does not build. Parity and the rest it shares with cpu_fused: test_cpu_kernels.py."""
import pytest
import torch

from wenet_udps.kernels.cpu_ext import ext_available, udps_attention_ext
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


def test_unavailable_extension_warns_with_the_reason(monkeypatch):
    from wenet_udps.kernels import cpu_ext

    monkeypatch.setattr(cpu_ext, "_load", lambda: OSError("ninja not found (a test)"))
    with pytest.warns(RuntimeWarning, match="ninja not found"):
        assert not cpu_ext.ext_available()
