"""bench/attention_gpu.py --tune: a block configuration is timed, and can be named the fastest, only after its output
and gradients match the float32 reference (a faster key-pass setting miscompiled on an H200 once), run on the CPU
under the Triton interpreter at toy sizes."""
import argparse
import os

import pytest

pytest.importorskip("triton", minversion="3.9" if os.environ.get("TRITON_INTERPRET") == "1" else None)
if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("runs the Triton kernel on CPU tensors (TRITON_INTERPRET=1, set by tests/conftest.py without CUDA)",
                allow_module_level=True)
from bench import attention_gpu  # noqa: E402


D = attention_gpu.triton_udps.DEFAULT_BLOCKS
ARGS = argparse.Namespace(T=[24], dtypes=["float16"], batch=1, heads=2, d_k=16, device="cpu")


def kernels(wrong_if):
    """The tune's ``kernel`` argument: the real kernel at the given blocks, off by 1 % (twice the float16 tolerance)
    where ``wrong_if(blocks)``; each call knows its blocks, for a patched ``bench``."""
    def kernel(blocks):
        right = attention_gpu._udps_triton(blocks)

        def fn(*args):
            return (1.01 if wrong_if(blocks) else 1.0) * right(*args)
        fn.blocks = blocks
        return fn
    return kernel


def rows_of(lines):
    return {line.split("|")[2].strip(): line for line in lines if line.startswith("| 24 |")}


def test_a_wrong_configuration_is_not_timed_nor_chosen():
    variants = {"wrong": D._replace(dq_warps=4), "default": D}
    lines = attention_gpu.tune(ARGS, variants, kernels(lambda b: b.dq_warps == 4))
    rows = rows_of(lines)
    assert "**WRONG: 1.0e-02 (" in rows["wrong"] and rows["wrong"].endswith("| not timed | not timed |")
    assert "not timed" not in rows["default"] and "WRONG" not in rows["default"]
    assert "combined" not in rows   # the only other setting is wrong: nothing to combine
    assert lines[-1].startswith("Fastest right configuration: T=24: default = Blocks(), fwd+bwd ")


def test_the_fastest_setting_of_each_launch_is_checked_and_timed_together(monkeypatch):
    fwd = D._replace(fwd_m=64, fwd_n=64, fwd_warps=4, dkv_stages=D.stages)
    variants = {"default": D, "fwd 64x64 w4": fwd, "fwd 128x128 w8": D._replace(fwd_n=128, dkv_stages=D.stages),
                "dkv 32x64 w4": D._replace(dkv_n=64), "dq 64x32 w4": D._replace(dq_m=64, dq_warps=4)}
    ms = {D: 1.0, fwd: 0.9, variants["fwd 128x128 w8"]: 0.95, variants["dkv 32x64 w4"]: 0.8}
    together = D._replace(fwd_m=64, fwd_n=64, fwd_warps=4, dkv_n=64, dkv_stages=D.stages)
    monkeypatch.setattr(attention_gpu, "bench", lambda fn, inputs, backward: ms.get(getattr(fn, "blocks", None), 0.5)
                        if getattr(fn, "blocks", None) != together else 0.7)
    lines = attention_gpu.tune(ARGS, variants, kernels(lambda b: b.dq_m == 64))
    rows = rows_of(lines)
    assert "WRONG" in rows["dq 64x32 w4"]
    # the forward's and the key pass's fastest right settings, the query pass's default
    assert "WRONG" not in rows["combined"] and rows["combined"].endswith("| 0.700 | 0.700 |")
    assert attention_gpu.describe(together) == "Blocks(fwd_m=64, fwd_warps=4, dkv_n=64)"
    assert lines[-1] == ("Fastest right configuration: T=24: combined = Blocks(fwd_m=64, fwd_warps=4, dkv_n=64), "
                         "fwd+bwd 0.700 ms (1.40x flash SDPA, 0.70x the default).")


def test_combined_keeps_the_key_pass_depth_it_was_timed_at():
    """A forward setting with 3 stages leaves the key pass at the depth the default ran it with."""
    variants = attention_gpu.block_variants()
    fwd = "fwd 128x64 w4 s3"
    together = attention_gpu.combined(variants, {"default": 1.0, fwd: 0.9, "dkv 32x128 w8 s1": 0.8})
    assert (together.stages, together.fwd_warps, together.dkv_warps, together.dkv_stages) == (3, 4, 8, 1)
    together = attention_gpu.combined(variants, {"default": 1.0, fwd: 0.9})
    assert (together.stages, together.dkv_stages) == (3, D.stages)
    assert attention_gpu.combined(variants, {"default": 1.0, fwd: 1.1}) == D._replace(dkv_stages=D.stages)
