"""The dispatch picks the implementation by device, size, bias/dropout and export, and gives the reference's
numbers whichever it picks."""
import pytest
import torch

from wenet_udps.kernels import cpu_ext
from wenet_udps.kernels.cpu_fused import UDPSFusedFunction
from wenet_udps.kernels.cpu_tiled import UDPSTiledFunction
from wenet_udps.kernels import dispatch
from wenet_udps.kernels.dispatch import TILED_MIN_LEN, TILED_MIN_SCORES, choose_udps_kernel, udps_attention
from wenet_udps.kernels.reference import udps_attention_reference

from tests.kernels.udps_inputs import assert_same, make_inputs, padding_mask, run_kernel


@pytest.fixture
def no_ext(monkeypatch):
    """The dispatch as on a machine where the C++ extension does not build (no compiler, WENET_UDPS_COMPILE=0)."""
    monkeypatch.setattr(dispatch.cpu_ext, "ext_available", lambda: False)


@pytest.mark.skipif(not cpu_ext.ext_available(), reason="the C++ extension does not build here")
def test_cpu_calls_run_the_extension_except_one_query_row(monkeypatch):
    q, k, v, alpha = make_inputs(2, 2, 30, 30, 8)
    mask = padding_mask([30, 21], 30)
    assert choose_udps_kernel(q, k, None, 0.0, True) == "cpu_ext"
    assert choose_udps_kernel(q[:, :, :1], k, None, 0.0, False) == "cpu_fused"
    # Keys stored feature-major (the decoder's memory cache, queried by all hypotheses of an utterance at once) are
    # read in place by cpu_fused; the extension would copy them at every decoding step.
    feature_major = k.transpose(-2, -1).contiguous().transpose(-2, -1)
    assert choose_udps_kernel(q[:, :, :10], feature_major, None, 0.0, False) == "cpu_fused"
    monkeypatch.setattr(dispatch, "FEATURE_MAJOR_MIN_ROWS", 10)  # many rows (rescoring): the copy pays
    assert choose_udps_kernel(q[:, :, :10], feature_major, None, 0.0, False) == "cpu_ext"
    calls = []
    real = cpu_ext.UDPSExtFunction.apply
    monkeypatch.setattr(cpu_ext.UDPSExtFunction, "apply", lambda *a: calls.append(1) or real(*a))
    got = run_kernel(udps_attention, q, k, v, alpha, mask)
    assert calls, "udps_attention did not take the extension"
    assert_same(run_kernel(udps_attention_reference, q, k, v, alpha, mask), got)
    # Compiling nothing (docs/reproducibility.md's portable mode) also means no extension.
    monkeypatch.setenv("WENET_UDPS_COMPILE", "0")
    assert choose_udps_kernel(q, k, None, 0.0, True) == "cpu_fused"


def test_dispatch_uses_fast_path_and_matches_reference(monkeypatch, no_ext):
    t = TILED_MIN_LEN
    # Lower the size threshold so that a small input takes the tiled path (cheap to run here).
    monkeypatch.setattr(dispatch, "TILED_MIN_SCORES", 2 * 2 * t * t)
    q, k, v, alpha = make_inputs(2, 2, t, t, 8)
    mask = padding_mask([t, t - 9], t)
    assert choose_udps_kernel(q, k, None, 0.0, False) == "cpu_tiled"
    calls = []
    real = UDPSTiledFunction.apply
    monkeypatch.setattr(UDPSTiledFunction, "apply", lambda *a: calls.append(1) or real(*a))
    got = run_kernel(udps_attention, q, k, v, alpha, mask)
    assert calls, "udps_attention did not take the tiled path"
    assert_same(run_kernel(udps_attention_reference, q, k, v, alpha, mask), got)
    # An empty mask means no mask.
    empty = torch.ones((0, 0, 0), dtype=torch.bool)
    torch.testing.assert_close(run_kernel(udps_attention, q, k, v, alpha, empty)[0],
                               run_kernel(udps_attention_reference, q, k, v, alpha, None)[0], atol=2e-5, rtol=1e-4)


def test_small_calls_run_the_fused_kernel_so_nothing_compiles(no_ext):
    """Calls below TILED_MIN_SCORES (the main job's short utterances, decoding) never pay the compile cost."""
    q = torch.empty(8, 4, 100, 32)
    assert 8 * 4 * 100 * 100 < TILED_MIN_SCORES
    assert choose_udps_kernel(q, q, None, 0.0, True) == "cpu_fused"
    big = torch.empty(8, 4, 400, 32)
    assert 8 * 4 * 400 * 400 >= TILED_MIN_SCORES
    assert choose_udps_kernel(big, big, None, 0.0, True) == "cpu_tiled"
    assert choose_udps_kernel(big[:, :, :TILED_MIN_LEN - 1], big, None, 0.0, True) == "cpu_fused"


def test_small_calls_take_the_fused_kernel_and_match_reference(monkeypatch, no_ext):
    q, k, v, alpha = make_inputs(2, 2, 30, 30, 8)
    mask = padding_mask([30, 21], 30)
    calls = []
    real = UDPSFusedFunction.apply
    monkeypatch.setattr(UDPSFusedFunction, "apply", lambda *a: calls.append(1) or real(*a))
    got = run_kernel(udps_attention, q, k, v, alpha, mask)
    assert calls, "udps_attention did not take the fused path"
    assert_same(run_kernel(udps_attention_reference, q, k, v, alpha, mask), got)


def test_dispatch_falls_back_for_bias_and_dropout_and_short_inputs_skip_tiles(monkeypatch, no_ext):
    t = TILED_MIN_LEN
    monkeypatch.setattr(dispatch, "TILED_MIN_SCORES", 0)
    q, k, _, _ = make_inputs(1, 2, t, t, 4)
    assert choose_udps_kernel(q, k, torch.zeros(1, 2, t, t), 0.0, False) == "reference"
    assert choose_udps_kernel(q, k, None, 0.1, True) == "reference"
    assert choose_udps_kernel(q, k, None, 0.1, False) == "cpu_tiled"
    assert choose_udps_kernel(q[:, :, :1], k, None, 0.0, False) == "cpu_fused"
    # With a bias the dispatch still gives the reference's numbers.
    q, k, v, alpha = make_inputs(1, 2, t, t, 4)
    bias = torch.randn(1, 2, t, t)
    torch.testing.assert_close(run_kernel(udps_attention, q, k, v, alpha, None, bias=bias)[0],
                               run_kernel(udps_attention_reference, q, k, v, alpha, None, bias=bias)[0])


def test_tracing_records_the_reference_formula(monkeypatch, no_ext):
    """torch.jit.trace / ONNX export must not record the tiled kernel (a Python autograd Function)."""
    t = TILED_MIN_LEN
    monkeypatch.setattr(dispatch, "TILED_MIN_SCORES", 0)
    q, k, v, _ = make_inputs(1, 2, t, t, 4)
    traced = torch.jit.trace(udps_attention, (q, k, torch.linalg.vector_norm(k, dim=-1), v))
    assert "UDPSTiled" not in str(traced.graph) and "UDPSFused" not in str(traced.graph)
    q, k, v, _ = make_inputs(1, 2, t + 16, t + 16, 4, seed=5)
    k_norm = torch.linalg.vector_norm(k, dim=-1)
    torch.testing.assert_close(traced(q, k, k_norm, v), udps_attention_reference(q, k, k_norm, v))



NO_TRITON = '''
import sys


class NoTriton:
    """Any import of triton fails, as in a CPU install (triton is in the gpu and test extras only, issue 57)."""
    def find_spec(self, name, path=None, target=None):
        if name == "triton" or name.startswith("triton."):
            raise ModuleNotFoundError("No module named 'triton' (blocked by the test)")
        return None


sys.meta_path.insert(0, NoTriton())
import torch
import wenet_udps
from wenet_udps.kernels import dispatch
from wenet_udps.kernels.reference import udps_attention_reference
assert not dispatch.triton_available()
# On CUDA (a meta tensor stands in for it) a missing triton means no Triton kernel: the reference serves.
dispatch.TRITON_DEVICES = ("meta",)
q = torch.zeros(1, 2, 8, 4, device="meta")
assert dispatch.choose_udps_kernel(q, q, None, 0.0, True) == "reference"
# The CPU path: forward and backward give the reference's numbers.
q, k, v = (torch.randn(2, 2, 70, 8, requires_grad=True) for _ in range(3))
out = dispatch.udps_attention(q, 4.0 * k, k.norm(dim=-1), v)
out.sum().backward()
ref = udps_attention_reference(q.detach(), 4.0 * k.detach(), k.detach().norm(dim=-1), v.detach())
assert torch.allclose(out, ref, atol=1e-5)
print("triton loaded:", "triton" in sys.modules)
'''


def test_without_triton_the_cpu_path_works_and_cuda_gets_the_reference():
    """A CPU install has no triton (issue 57): importing the package, the dispatch and a UDPS call must not need it."""
    import subprocess
    import sys
    from pathlib import Path
    proc = subprocess.run([sys.executable, "-c", NO_TRITON], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "triton loaded: False" in proc.stdout
