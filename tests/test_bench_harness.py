"""bench/_harness.py: its --neighbour processes stop by themselves when the benchmark that started them is killed
(a timeout's SIGKILL runs no ``finally``: a killed benchmark once left its neighbour loading the machine for hours);
its inputs with and without padding; bench/attention.py's --ext-from refuses a folder without the package."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def running(pid: int) -> bool:
    """Whether ``pid`` still runs (an exited process nobody has reaped yet counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("kind", ["busyloop", "matmul"])
def test_a_neighbour_stops_when_its_benchmark_is_killed(kind):
    code = (f"import time\nfrom bench import _harness\n"
            f"with _harness.neighbour({kind!r}):\n    time.sleep(120)\n")
    bench = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    pid = int(bench.stdout.readline().split()[-1])  # "neighbour KIND: pid N"
    try:
        assert running(pid)
        bench.kill()
        bench.wait()
        deadline = time.time() + 60
        while running(pid) and time.time() < deadline:
            time.sleep(0.2)
        assert not running(pid), f"neighbour {kind} (pid {pid}) outlived its killed benchmark"
    finally:
        if running(pid):
            os.killpg(pid, signal.SIGKILL)


def test_inputs_without_padding_have_every_length_t_and_an_all_true_mask():
    from bench import _harness
    *_, mask, lengths = _harness.make_inputs(4, 2, 64, 8, padding=False)
    assert mask.shape == (4, 1, 64) and mask.all() and (lengths == 64).all()
    *_, mask, lengths = _harness.make_inputs(4, 2, 64, 8)
    assert (lengths < 64).any() and not mask.all()
    assert torch.equal(mask.sum(-1).squeeze(1), lengths)


def test_ext_from_a_folder_without_the_package_is_a_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bench.attention", "--ext-from", str(tmp_path),
                           "--T", "16", "--impls", "sdpa (scaled-dot)"], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert proc.returncode == 2
    assert f"error: --ext-from {tmp_path}: no " in proc.stderr
