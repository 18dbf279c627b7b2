"""Issue 47, case 10: a boolean environment value means the same in every module."""
import os
import subprocess
import sys

import pytest

from wenet_udps.utils.cli import UserError
from wenet_udps.utils.env import COMPILE_ENV, compiling, env_flag


@pytest.mark.parametrize("value, expected", [("0", False), ("false", False), ("no", False), ("off", False),
                                             ("OFF", False), (" False ", False), ("1", True), ("true", True),
                                             ("yes", True), ("on", True), ("", True)])
def test_compile_switch_words(monkeypatch, value, expected):
    monkeypatch.setenv(COMPILE_ENV, value)
    assert compiling() is expected


def test_unset_is_the_default(monkeypatch):
    monkeypatch.delenv("WENET_UDPS_SOME_FLAG", raising=False)
    assert env_flag("WENET_UDPS_SOME_FLAG", True) is True and env_flag("WENET_UDPS_SOME_FLAG", False) is False


def test_another_value_is_one_line_naming_the_variable(monkeypatch):
    monkeypatch.setenv(COMPILE_ENV, "maybe")
    with pytest.raises(UserError, match=r"WENET_UDPS_COMPILE='maybe': expected 1 / true / yes / on \(on\) or 0 / "
                                        r"false / no / off \(off\)"):
        compiling()


def test_compile_false_turns_off_the_extension_and_the_tiles():
    """WENET_UDPS_COMPILE=false used the compiled extension (only 0 turned it off); now both readers agree."""
    code = ("from wenet_udps.kernels import cpu_ext, cpu_tiled; "
            "print(cpu_ext.ext_available(), cpu_tiled._Kernels().compiled)")
    for value in ("false", "no", "off", "0"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env={**os.environ, COMPILE_ENV: value})
        assert out.stdout.split() == ["False", "False"], (value, out.stderr[-2000:])
