"""Every benchmark answers --help with its usage, without running (a probe once ran in full on --help)."""
import subprocess
import sys
from pathlib import Path

import pytest

# _harness.py is the helper the attention benchmarks import, not a benchmark.
BENCH = sorted(p for p in (Path(__file__).resolve().parents[1] / "bench").glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("script", BENCH, ids=[p.name for p in BENCH])
def test_help_prints_usage_and_exits(script):
    proc = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:") and "|" not in proc.stdout.splitlines()[0]
