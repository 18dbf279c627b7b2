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


def test_check_checkpoint_with_seeds_needs_a_path_per_seed(tmp_path):
    """Issue 57, M10: --checkpoint with --seeds continues each seed's own model, named by {seed}; a single path with
    --seeds, {seed} without --seeds, or a seed whose checkpoint is missing is refused before anything runs."""
    for s in (1, 2):
        (tmp_path / f"x_seed{s}.pt").write_bytes(b"")
    each = tmp_path / "x_seed{seed}.pt"
    cases = [
        ('seeds="1"', "x.pt", 1, "write {seed} where each seed's path differs"),
        ('seeds=""', each, 1, "{seed} stands for each of --seeds, and no --seeds is given"),
        ('seeds="1 3"', each, 1, f"{tmp_path / 'x_seed3.pt'} (seed 3) is not a file"),
        ('seeds="1 2"', each, 0, ""),
    ]
    for seeds, checkpoint, rc, message in cases:
        proc = bash(f'{seeds} checkpoint="{checkpoint}"; check_checkpoint')
        assert proc.returncode == rc and message in proc.stderr, (seeds, proc.stderr)
