"""Every benchmark answers --help with its usage, without running (a probe once ran in full on --help)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# _harness.py and _step_profile.py are helpers the benchmarks import (and __init__.py the package), not benchmarks.
BENCH = sorted(p for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("script", BENCH, ids=[p.name for p in BENCH])
def test_help_prints_usage_and_exits(script):
    # as docs/benchmarks.md runs them: python -m bench.NAME from the repository root
    proc = subprocess.run([sys.executable, "-m", f"bench.{script.stem}", "--help"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:") and "|" not in proc.stdout.splitlines()[0]
