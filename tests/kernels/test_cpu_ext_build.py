"""Issue 47, case 22: a build of the C++ kernel killed half-way must not hang later processes.

torch's ``lock`` file, left by a killed build, made every later ``cpp_extension.load`` wait forever. These tests
leave such a file (and hold or kill our own lock) in a build folder under tmp_path; no compiler runs.
"""
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from wenet_udps.kernels import cpu_ext

HOLD = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
        "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)")


def holder(build_dir):
    """A process holding our lock (a build in progress elsewhere)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(build_dir / cpu_ext.LOCK_NAME)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def stale_torch_lock(build_dir):
    (build_dir / "lock").write_text("")
    return build_dir / "lock"


def test_a_stale_torch_lock_is_removed_before_the_build(tmp_path):
    lock = stale_torch_lock(tmp_path)
    with pytest.warns(UserWarning, match="left by a C\\+\\+ kernel build that was killed"):
        assert cpu_ext.build_under_lock(str(tmp_path), lambda: lock.exists()) is False


def test_a_killed_builder_releases_the_lock_at_once(tmp_path):
    proc = holder(tmp_path)
    stale_torch_lock(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)  # killed during its build: its torch lock stays, our flock goes with it
    proc.wait()
    start = time.monotonic()
    with pytest.warns(UserWarning, match="removing"):
        assert cpu_ext.build_under_lock(str(tmp_path), lambda: "built", wait_s=30) == "built"
    assert time.monotonic() - start < 5


def test_a_live_builder_is_waited_for_with_a_bound(tmp_path):
    proc = holder(tmp_path)
    try:
        start = time.monotonic()
        with pytest.raises(TimeoutError, match="another process has been building"):
            cpu_ext.build_under_lock(str(tmp_path), lambda: "built", wait_s=0.5)
        assert time.monotonic() - start < 5
    finally:
        proc.kill()
        proc.wait()


def test_load_with_a_stale_torch_lock_does_not_hang(tmp_path, monkeypatch):
    """The whole path: torch's own FileBaton in the build folder that _load picks (TORCH_EXTENSIONS_DIR) would wait
    forever on the stale file; _load removes it first."""
    from torch.utils import cpp_extension
    from torch.utils.file_baton import FileBaton

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    seen = []

    def fake_load(name, build_directory, **kwargs):
        baton = FileBaton(os.path.join(build_directory, "lock"))
        seen.append(baton.try_acquire())  # False: torch would now wait for the file forever
        baton.release()
        return build_directory  # as torch's load for a library of operators (is_python_module=False)

    monkeypatch.setattr(cpp_extension, "load", fake_load)
    names = []
    real = cpp_extension._get_build_directory
    monkeypatch.setattr(cpp_extension, "_get_build_directory",
                        lambda name, verbose: names.append(real(name, verbose)) or names[-1])
    cpu_ext._load.cache_clear()
    try:
        first = cpu_ext._load()
        cpu_ext._load.cache_clear()
        stale_torch_lock(type(tmp_path)(names[-1]))
        with pytest.warns(UserWarning, match="removing"):
            second = cpu_ext._load()
    finally:
        cpu_ext._load.cache_clear()
    assert first is second is torch.ops.wenet_udps_cpu and seen == [True, True]
    assert names[-1].startswith(str(tmp_path))


def test_timeout_falls_back_to_the_eager_kernels_with_a_warning(monkeypatch):
    monkeypatch.setattr(cpu_ext, "_load", lambda: TimeoutError("another process has been building (a test)"))
    monkeypatch.delenv("WENET_UDPS_COMPILE", raising=False)
    with pytest.warns(RuntimeWarning, match="another process has been building"):
        assert not cpu_ext.ext_available()
