"""bench/attention_gpu.py --tune: a block configuration is timed, and can be named the fastest, only after its output
and gradients match the float32 reference (a faster key-pass setting miscompiled on an H200 once), run on the CPU
under the Triton interpreter at toy sizes."""
import argparse
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton", minversion="3.9" if os.environ.get("TRITON_INTERPRET") == "1" else None)
if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("runs the Triton kernel on CPU tensors (TRITON_INTERPRET=1, set by tests/conftest.py without CUDA)",
                allow_module_level=True)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import attention_gpu  # noqa: E402


def test_a_wrong_configuration_is_not_timed_nor_chosen():
    right = attention_gpu._udps_triton()

    def wrong(*args):  # off by 1 %: twice the float16 tolerance
        return 1.01 * right(*args)

    args = argparse.Namespace(T=[24], dtypes=["float16"], batch=1, heads=2, d_k=16, device="cpu")
    lines = attention_gpu.tune(args, {"wrong": wrong, "default": right})
    rows = {line.split("|")[2].strip(): line for line in lines if line.startswith("| 24 |")}
    assert "**WRONG: 1.0e-02 (" in rows["wrong"] and rows["wrong"].endswith("| not timed | not timed |")
    assert "not timed" not in rows["default"] and "WRONG" not in rows["default"]
    assert lines[-1].startswith("Fastest right configuration: T=24: default, fwd+bwd ")
