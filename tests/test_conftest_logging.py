"""The suite's own hygiene: a program's logging.basicConfig under one test's capsys must not print a 'Logging error'
traceback into a later test's stderr (tests/conftest.py's _root_logging; CI of 2026-12-02 failed on it). The second
test means something only after the first in the same process: one xdist group keeps them on one worker, in order."""
import logging

import pytest

pytestmark = pytest.mark.xdist_group("conftest_logging")


def test_a_program_binds_logging_to_this_tests_stderr(capsys):
    logging.basicConfig(level=logging.INFO, force=True)
    logging.warning("bound to this test's captured stderr")
    assert "bound to this test's" in capsys.readouterr().err


def test_a_later_warning_is_not_a_logging_error(capsys):
    logging.warning("a later test's warning")
    assert "Logging error" not in capsys.readouterr().err
