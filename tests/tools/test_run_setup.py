"""tools/run_setup.sh's functions, called in bash as run.sh calls them (the end-to-end runs: tests/test_run_sh*.py)."""
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def bash(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"set -euo pipefail; . tools/log.sh; . tools/run_setup.sh; {script}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("seeds, expected", [
    ("", "false:none true:none"),
    # Seed by seed, so that with two jobs at a time a seed's pair of variants trains side by side.
    ("1 2 3", "false:1 true:1 false:2 true:2 false:3 true:3"),
])
def test_plan_runs_orders_the_runs_seed_by_seed(seeds, expected):
    proc = bash(f'variants="false true" seeds="{seeds}" checkpoint= enc_init= stage=4 stop_stage=7; plan_runs; '
                'echo "${runs[*]}"')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected


@pytest.mark.parametrize("first, last, n, m, has", [
    (-1, 7, 4, None, True), (5, 7, 4, None, False), (0, 3, 4, None, False), (4, 4, 4, None, True),
    (5, 5, 4, 7, True), (0, 3, 4, 7, False), (3, 4, 4, 7, True), (-1, -1, 4, 7, False),
])
def test_runs_stage_says_whether_the_run_reaches_a_stage(first, last, n, m, has):
    proc = bash(f"stage={first} stop_stage={last}; runs_stage {n} {m or ''} && echo yes || echo no")
    assert proc.stdout.strip() == ("yes" if has else "no"), proc.stderr


def test_plan_runs_refuses_seeds_with_a_checkpoint():
    proc = bash('variants="false" seeds="1" checkpoint=x.pt enc_init= stage=4 stop_stage=4; plan_runs')
    assert proc.returncode == 1
    assert "--checkpoint continues one model; it cannot go with --seeds" in proc.stderr
