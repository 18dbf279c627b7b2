"""bench/kernel_sass.py compiles the Triton kernels for an H100/H200 (sm_90) without a GPU, as a real launch would
specialise them, and reads their SASS: each launch's loop costs about two MUFU instructions per score (exp2 and the
reciprocal of the UDPS denominator), and on the GPU path the reciprocal is the one-instruction approximate one, not
a division (which compiles to eight instructions, seven more per score in the forward)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton", minversion="3.6")
ROOT = Path(__file__).resolve().parents[1]


def test_the_compiled_loops_cost_what_the_math_needs():
    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm").exists():
        pytest.skip("this triton wheel carries no nvdisasm")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-m", "bench.kernel_sass", "--T", "256"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("| udps")]
    header = next(line for line in proc.stdout.splitlines() if line.startswith("| launch"))
    names = [c.strip() for c in header.strip("|").split("|")]
    rows = {r[0]: dict(zip(names, r)) for r in ([c.strip() for c in line.strip("|").split("|")] for line in lines)}
    assert set(rows) == {"udps_fwd", "udps_bwd_dq", "udps_bwd_dkv"}
    for row in rows.values():
        assert 1.9 <= float(row["mufu"]) <= 2.3, row
    assert float(rows["udps_fwd"]["fp32"]) < 14, rows["udps_fwd"]


def test_refuses_kernels_loaded_for_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "bench.kernel_sass"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "unset TRITON_INTERPRET" in proc.stderr
