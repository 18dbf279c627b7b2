"""The Triton kernel's self-check and fallback, with injected faults, under the Triton interpreter (CPU tensors).

The dispatch sends CPU tensors to Triton here (``TRITON_DEVICES`` patched), as it sends CUDA tensors on a GPU; fp32
only (the interpreter computes bf16 ``tl.dot`` wrongly).
"""
import os
import warnings

import pytest
import torch

pytest.importorskip("triton", minversion="3.9" if os.environ.get("TRITON_INTERPRET") == "1" else None)

from wenet_udps.kernels import dispatch, selfcheck, triton_udps  # noqa: E402
from wenet_udps.kernels.reference import udps_attention_reference  # noqa: E402

from tests.kernels.udps_inputs import assert_same, make_inputs, padding_mask, run_kernel  # noqa: E402


@pytest.fixture(autouse=True)
def triton_on_cpu(monkeypatch):
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs TRITON_INTERPRET=1 before triton is imported (tests/conftest.py sets it without CUDA)")
    monkeypatch.setattr(dispatch, "TRITON_DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(selfcheck, "CHECK_SHAPE", {"cpu": (1, 2, 21)})
    monkeypatch.delenv(selfcheck.KERNEL_ENV, raising=False)
    selfcheck.reset()
    yield
    selfcheck.reset()


@pytest.fixture
def counted(monkeypatch):
    """Calls into the Triton function, and a switch to make its forward wrong or raise."""
    real = triton_udps.UDPSTritonFunction.apply
    state = {"calls": 0, "fault": None}

    def apply(*args):
        state["calls"] += 1
        if state["fault"] == "launch":
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        out = real(*args)
        return out + 1e-2 if state["fault"] == "wrong" else out
    monkeypatch.setattr(triton_udps.UDPSTritonFunction, "apply", apply)
    return state


def _inputs():
    q, k, v, alpha = make_inputs(2, 2, 19, 19, 8)
    return q, k, v, alpha, padding_mask([19, 12], 19)


def test_passing_check_runs_triton_once_per_key(counted, caplog):
    q, k, v, alpha, mask = _inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("error", selfcheck.KernelFallbackWarning)
        with caplog.at_level("INFO"):
            got = run_kernel(dispatch.udps_attention, q, k, v, alpha, mask)
        after_first = counted["calls"]
        run_kernel(dispatch.udps_attention, q, k, v, alpha, mask)
    assert after_first == 2  # the check's run, then the call itself
    assert counted["calls"] == 3  # the second call is not checked again
    assert_same(run_kernel(udps_attention_reference, q, k, v, alpha, mask), got)
    results = selfcheck.self_check_results()
    assert list(results) == ["float32/d8/dv8/keys"]
    assert results["float32/d8/dv8/keys"]["ok"] and results["float32/d8/dv8/keys"]["max_rel_error"] < 1e-5
    assert "self-check" in caplog.text and "passed" in caplog.text
    # Another mask kind is another key: checked on its first call.
    run_kernel(dispatch.udps_attention, q, k, v, alpha, None)
    assert sorted(selfcheck.self_check_results()) == ["float32/d8/dv8/keys", "float32/d8/dv8/none"]


@pytest.mark.parametrize("fault,reason", [("wrong", "largest relative error"), ("launch", "RuntimeError")])
def test_fault_warns_once_and_falls_back_to_reference(counted, fault, reason):
    counted["fault"] = fault
    q, k, v, alpha, mask = _inputs()
    with pytest.warns(selfcheck.KernelFallbackWarning) as record:
        got = run_kernel(dispatch.udps_attention, q, k, v, alpha, mask)
    message = str(record[0].message)
    assert len(record) == 1
    assert reason in message and "torch " in message and "triton " in message and "CUDA" in message
    assert counted["calls"] == 1  # the check's run only: the call itself ran the reference
    ref = run_kernel(udps_attention_reference, q, k, v, alpha, mask)
    for r, g in zip(ref, got):
        torch.testing.assert_close(g, r, atol=0, rtol=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", selfcheck.KernelFallbackWarning)
        run_kernel(dispatch.udps_attention, q, k, v, alpha, mask)  # no second warning, no second check
    assert counted["calls"] == 1
    verdict = selfcheck.self_check_results()["float32/d8/dv8/keys"]
    assert not verdict["ok"] and "FAILED" in selfcheck.summary()


def test_each_gradient_is_checked(monkeypatch):
    """A kernel with a right output but a wrong gradient (here: of the norms) fails the check."""
    real = triton_udps.UDPSTritonFunction.backward

    def backward(ctx, grad_out):
        dq, dk, dn, dv, *rest = real(ctx, grad_out)
        return (dq, dk, dn * 1.01, dv, *rest)
    monkeypatch.setattr(triton_udps.UDPSTritonFunction, "backward", staticmethod(backward))
    verdict = selfcheck.check_triton(torch.float32, 8, 8, "rows", torch.device("cpu"))
    assert not verdict["ok"] and verdict["rel_errors"]["out"] < 1e-5
    assert verdict["worst"] in ("q", "k", "p", "alpha", "beta"), verdict


def test_env_forces_each_kernel(counted, monkeypatch):
    q, k, v, alpha, mask = _inputs()
    counted["fault"] = "wrong"
    monkeypatch.setenv(selfcheck.KERNEL_ENV, "triton")  # unchecked: the (wrong) kernel runs
    with warnings.catch_warnings():
        warnings.simplefilter("error", selfcheck.KernelFallbackWarning)
        got = run_kernel(dispatch.udps_attention, q, k, v, alpha, mask)
    ref = run_kernel(udps_attention_reference, q, k, v, alpha, mask)
    assert counted["calls"] == 1 and not selfcheck.self_check_results()
    torch.testing.assert_close(got[0], ref[0] + 1e-2, atol=2e-5, rtol=1e-4)
    # Forced Triton also serves calls the automatic choice keeps off it (CPU, here with the device gate closed).
    monkeypatch.setattr(dispatch, "TRITON_DEVICES", ("cuda",))
    assert dispatch.choose_udps_kernel(q, k, None, 0.0, True) == "triton"
    monkeypatch.setenv(selfcheck.KERNEL_ENV, "reference")
    monkeypatch.setattr(dispatch, "TRITON_DEVICES", ("cuda", "cpu"))
    assert dispatch.choose_udps_kernel(q, k, None, 0.0, True) == "reference"
    got = run_kernel(dispatch.udps_attention, q, k, v, alpha, mask)
    assert counted["calls"] == 1 and not selfcheck.self_check_results()
    assert_same(ref, got)


def test_unknown_env_value_lists_choices(monkeypatch):
    monkeypatch.setenv(selfcheck.KERNEL_ENV, "flash")
    q = torch.zeros(1, 1, 4, 8)
    with pytest.raises(ValueError, match="WENET_UDPS_KERNEL='flash'.*triton, reference"):
        dispatch.choose_udps_kernel(q, q, None, 0.0, False)


def test_check_under_no_grad_and_inference_mode(counted):
    """Decoding calls the kernel without autograd: the check still compares gradients."""
    q, k, v, alpha, mask = _inputs()
    with torch.inference_mode():
        out = dispatch.udps_attention(q, 4.0 * alpha * k, torch.linalg.vector_norm(k, dim=-1), v, mask=mask)
    verdict = selfcheck.self_check_results()["float32/d8/dv8/keys"]
    assert verdict["ok"] and set(verdict["rel_errors"]) == {"out", "q", "k", "p", "v", "alpha", "beta"}
    assert out.shape == (2, 2, 19, 8)


def test_forced_triton_without_a_gpu_driver_is_a_user_error(monkeypatch):
    """WENET_UDPS_KERNEL=triton on CPU tensors outside Triton's interpreter was a RuntimeError from Triton's
    launcher (issue 36); now one line naming the variable."""
    from wenet_udps.utils.cli import UserError
    monkeypatch.setenv(selfcheck.KERNEL_ENV, "triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(dispatch, "triton_available", lambda: True)
    q = torch.zeros(1, 1, 4, 8)
    with pytest.raises(UserError, match="WENET_UDPS_KERNEL=triton.*on cpu.*CUDA GPU"):
        dispatch.choose_udps_kernel(q, q, None, 0.0, False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert dispatch.choose_udps_kernel(q, q, None, 0.0, False) == "triton"
    # Issue 47 sweep: Triton interprets with "true" too; only "1" was taken for it here.
    monkeypatch.setenv("TRITON_INTERPRET", "true")
    assert dispatch.choose_udps_kernel(q, q, None, 0.0, False) == "triton"
