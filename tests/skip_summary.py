"""One summary line per skip reason with its count, at the end of a pytest run (README's test command).

pytest's own ``-rs`` folds skips by (file, line, reason), so one reason raised from many files or parameter cases
prints a line for each place: 117 lines in a new user's run of 012e36b. This hook folds by reason alone.
tests/conftest.py re-exports the hook; ``python -m pytest -p tests.skip_summary`` loads it anywhere else.
"""
from __future__ import annotations

from collections import Counter


def skip_reason(report) -> str:
    """The reason text of a skipped test's report (pytest gives (path, line, 'Skipped: reason') for skips)."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def skip_lines(reports) -> list[str]:
    """``SKIPPED [count] reason`` for each distinct reason, the most frequent first, then alphabetically."""
    counts = Counter(skip_reason(r) for r in reports)
    return [f"SKIPPED [{n}] {reason}" for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def pytest_terminal_summary(terminalreporter):
    lines = skip_lines(terminalreporter.stats.get("skipped", []))
    if lines:
        terminalreporter.write_sep("=", f"skips by reason ({len(lines)} reasons)")
        for line in lines:
            terminalreporter.write_line(line)
