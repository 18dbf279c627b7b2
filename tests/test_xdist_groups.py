"""The README's test command shares its costliest fixtures (a trained tiny corpus, a two-node cluster) through
``xdist_group``: pytest-xdist's ``--dist loadgroup`` must send a group's tests to one worker, or each worker builds
them again (pytest 9.2 with pytest-xdist 3.8 silently did: pyproject.toml pins pytest below it)."""
import os
import re
import subprocess
import sys

TOY = '''
import time
import pytest

@pytest.mark.parametrize("i", range(10))
def test_alone(i):
    time.sleep(0.05)

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    time.sleep(0.05)
'''


def test_loadgroup_runs_a_group_on_one_worker(tmp_path):
    (tmp_path / "test_toy.py").write_text(TOY)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    # A session of its own: none of this run's PYTEST_* settings (.ci/run's PYTEST_ADDOPTS names a JUnit file).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p",
                           "no:cacheprovider", "test_toy.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    ran = re.findall(r"^\[(gw\d)\].* PASSED test_toy\.py::(test_\w+)", proc.stdout, re.M)
    assert len(ran) == 16 and {worker for worker, _ in ran} == {"gw0", "gw1"}, proc.stdout[-3000:]
    assert len({worker for worker, name in ran if name == "test_grouped"}) == 1, proc.stdout[-3000:]
