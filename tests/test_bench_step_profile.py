"""bench/_step_profile.py (train_step.py --profile): one profiled step per attention, as rows of the step table."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from _step_profile import profile_rows  # noqa: E402


def test_rows_give_wall_busy_and_the_op_that_differs_most():
    x = torch.ones(128, 128)
    x @ x  # the first product's one-time costs outside the profile

    def once():
        x @ x
        return 0.001

    def many_times():
        for _ in range(300):
            x @ x
        return 0.002

    rows = profile_rows("conf", "8 x 6 s", {"scaled-dot": once, "udps": many_times}, cuda=False, top=1)
    assert rows[0] == "| conf | profile: step wall ms | 8 x 6 s | 1.0 | 2.0 | 2.000 |"
    cells = [[c.strip() for c in row.split("|")[1:-1]] for row in rows]
    assert [c[1] for c in cells] == ["profile: step wall ms", "profile: busy ms, CPU ops", "profile: CPU ops run",
                                     "profile: aten::mm ms"]
    busy, ops, mm = cells[1], cells[2], cells[3]
    assert float(busy[4]) > float(busy[3]) > 0 and int(ops[4]) > int(ops[3])
    assert float(mm[4]) > 5 * float(mm[3]) > 0 and float(mm[5]) > 5
