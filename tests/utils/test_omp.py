"""Training processes get a short OpenMP spin before torch loads; decoding processes keep libgomp's default."""
import os
import subprocess
import sys

import pytest

from wenet_udps.utils.omp import short_spin

# Prints GOMP_SPINCOUNT as it was when the process first imported torch, then the module's name.
PROBE = r"""
import builtins, os, sys
seen = {}
real_import = builtins.__import__
def probe(name, *args, **kwargs):
    if name.split(".")[0] == "torch" and "torch" not in sys.modules and "at_torch" not in seen:
        seen["at_torch"] = os.environ.get("GOMP_SPINCOUNT")
    return real_import(name, *args, **kwargs)
builtins.__import__ = probe
import importlib
importlib.import_module(sys.argv[1])
print(seen.get("at_torch", "torch not imported"))
"""


def _spin_at_torch_import(module: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    out = subprocess.run([sys.executable, "-c", PROBE, module], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("module, expected", [("wenet_udps.bin.train", "1000"), ("wenet_udps.bin.recognize", "None")])
def test_spin_count_is_set_before_torch_loads_in_training_only(module, expected):
    assert _spin_at_torch_import(module) == expected


@pytest.mark.parametrize("env, expected", [({}, "1000"), ({"GOMP_SPINCOUNT": "5"}, "5"),
                                           ({"OMP_WAIT_POLICY": "PASSIVE"}, None)])
def test_short_spin_leaves_a_users_setting_alone(monkeypatch, env, expected):
    for key in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    short_spin()
    assert os.environ.get("GOMP_SPINCOUNT") == expected
