"""bench/_harness.py's --neighbour processes stop by themselves when the benchmark that started them is killed
(a timeout's SIGKILL runs no ``finally``): a killed benchmark once left its neighbour loading the machine for hours."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

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
    code = (f"import sys, time\nsys.path.insert(0, {str(ROOT / 'bench')!r})\nimport _harness\n"
            f"with _harness.neighbour({kind!r}):\n    time.sleep(120)\n")
    bench = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
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
