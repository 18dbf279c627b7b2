"""bench/_step_profile.py (train_step.py --profile): one profiled step per attention, as rows of the step table."""
import contextlib

import torch

from bench import _step_profile


def cells(rows):
    return [[c.strip() for c in row.split("|")[1:-1]] for row in rows]


def test_rows_give_wall_busy_and_the_ops_that_differ_most(monkeypatch):
    """Busy times as the profiler would sum them on a GPU (patched, with the profiler: times on a shared machine are
    not a test's business)."""
    busy = iter([{"mm": (4.0, 10), "softmax": (1.0, 2), "copy": (0.5, 1)},
                 {"mm": (4.5, 10), "udps_fwd": (2.0, 2), "copy": (0.25, 1), "norm": (0.15, 4)}])
    monkeypatch.setattr(_step_profile, "busy_by_name", lambda prof, cuda: next(busy))
    monkeypatch.setattr(_step_profile, "profile", lambda activities: contextlib.nullcontext())
    steps = {"scaled-dot": lambda: 0.010, "udps": lambda: 0.012}
    rows = _step_profile.profile_rows("conf", "8 x 6 s", steps, cuda=True, top=3)
    assert rows[0] == "| conf | profile: step wall ms | 8 x 6 s | 10.0 | 12.0 | 1.200 |"
    assert rows[1] == "| conf | profile: busy ms, GPU kernels | 8 x 6 s | 5.5 | 6.9 | 1.255 |"
    assert rows[2] == "| conf | profile: GPU kernels run | 8 x 6 s | 13 | 17 | 1.308 |"
    # by the size of the difference, either way; a kernel one attention does not run has no ratio
    assert [c[1:] for c in cells(rows[3:])] == [
        ["profile: udps_fwd ms", "8 x 6 s", "0.00", "2.00", "-"],
        ["profile: softmax ms", "8 x 6 s", "1.00", "0.00", "0.000"],
        ["profile: mm ms", "8 x 6 s", "4.00", "4.50", "1.125"]]


def test_a_real_profile_of_cpu_steps_counts_their_ops():
    x = torch.ones(32, 32)

    def once():
        x @ x
        return 0.001

    def thirty_times():
        for _ in range(30):
            x @ x
        return 0.002

    rows = _step_profile.profile_rows("conf", "b", {"scaled-dot": once, "udps": thirty_times}, cuda=False, top=2)
    table = cells(rows)
    assert [c[1] for c in table[:3]] == ["profile: step wall ms", "profile: busy ms, CPU ops", "profile: CPU ops run"]
    assert int(table[2][4]) >= int(table[2][3]) + 29   # 29 more products at least
    assert len(rows) == 5 and all(c[1].endswith(" ms") for c in table[3:])
