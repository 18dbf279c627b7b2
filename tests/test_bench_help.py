"""Every benchmark answers --help with its usage, without running (bench/omp_wait.py once ran in full)."""
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = sorted((Path(__file__).resolve().parents[1] / "bench").glob("*.py"))


@pytest.mark.parametrize("script", BENCH, ids=[p.name for p in BENCH])
def test_help_prints_usage_and_exits(script):
    proc = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:") and "|" not in proc.stdout.splitlines()[0]
