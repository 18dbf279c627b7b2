"""tools/install.sh stops at the first missing prerequisite with one line saying what to do, before any work.

Each case fakes its machine: a PATH folder holding only some commands, a stub python3 that answers install.sh's
probe with the facts of the case, a stub df reporting little space. Every stub logs any other call, so a test
sees whether install.sh went on to pip or apt-get.
"""
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bare_path import CORE, bare_bin

ROOT = Path(__file__).resolve().parents[2]
GOOD = {"version": "3.11", "pip": "1", "in_venv": "1", "managed": "0", "ensurepip": "1", "prefix": "/"}
DF_PLENTY = 'echo "Filesystem 1024-blocks Used Available Capacity Mounted on"; echo "/dev/x 1 1 99999999 1% /"\n'
DF_SMALL = 'echo "Filesystem 1024-blocks Used Available Capacity Mounted on"; echo "/dev/x 1 1 1048576 99% /"\n'


def logging_stub(log: Path, output: str = "") -> str:
    """A bash body that records its call and prints ``output``."""
    return f'echo "$(basename "$0") $*" >> "{log}"\nprintf "%s" "{output}"\n'


def python_stub(log: Path, **facts: str) -> str:
    """python3 that answers the probe (a -c script printing version=...) with the facts, and logs any other call."""
    answer = "\n".join(f"{k}={v}" for k, v in {**GOOD, **facts}.items()) + "\n"
    return (f'if [[ $1 == -c && $2 == *version=* ]]; then printf "%s" "{answer}"; exit 0; fi\n'
            + logging_stub(log))


def run_install(env, *args):
    return subprocess.run(["bash", str(ROOT / "tools" / "install.sh"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def one_line_failure(proc, log: Path) -> str:
    """The single message line, after checking that install.sh failed and called nothing."""
    assert proc.returncode != 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert not log.exists(), f"install.sh went on after the failed check: {log.read_text()}"
    return lines[0]


@pytest.fixture
def calls(tmp_path):
    return tmp_path / "calls.log"


def test_no_python3(tmp_path, calls):
    env = bare_bin(tmp_path / "bin", python=False)
    line = one_line_failure(run_install(env), calls)
    assert "python3 not found" in line and "3.10" in line


def test_python_too_old(tmp_path, calls):
    env = bare_bin(tmp_path / "bin", stubs={"python3": python_stub(calls, version="3.8")}, python=False)
    line = one_line_failure(run_install(env), calls)
    assert "Python 3.8" in line and ">= 3.10" in line and "apt-get install python3.11" in line


def test_no_pip(tmp_path, calls):
    env = bare_bin(tmp_path / "bin", stubs={"python3": python_stub(calls, pip="0")}, python=False)
    line = one_line_failure(run_install(env), calls)
    assert "has no pip" in line and "ensurepip" in line


def test_system_python_without_venv_module(tmp_path, calls):
    stub = python_stub(calls, in_venv="0", managed="1", ensurepip="0")
    env = bare_bin(tmp_path / "bin", stubs={"python3": stub}, python=False)
    line = one_line_failure(run_install(env), calls)
    assert "no venv module" in line and "apt-get install python3-venv" in line


def test_system_python_asks_for_a_venv(tmp_path, calls):
    stub = python_stub(calls, in_venv="0", managed="1", ensurepip="1")
    env = bare_bin(tmp_path / "bin", stubs={"python3": stub}, python=False)
    line = one_line_failure(run_install(env), calls)
    assert "externally managed" in line and "python3 -m venv" in line


def test_too_little_disk_with_the_real_python(tmp_path, calls):
    # This interpreter answers the probe for real and passes the Python checks; df says 1 GB; pip must not run.
    real = f'[[ $* == *"-m pip"* ]] && {{ echo "python3 $*" >> "{calls}"; exit 0; }}\nexec "{sys.executable}" "$@"\n'
    env = bare_bin(tmp_path / "bin", stubs={"df": DF_SMALL, "python3": real}, python=False)
    line = one_line_failure(run_install(env), calls)
    assert "only 1 GB free" in line and "need 3 GB" in line


def test_no_espeak_and_no_apt(tmp_path, calls):
    env = bare_bin(tmp_path / "bin", stubs={"python3": python_stub(calls), "df": DF_PLENTY}, python=False)
    line = one_line_failure(run_install(env, "--espeak_ng", "true"), calls)
    assert "espeak-ng is missing" in line and "no apt-get" in line and "package manager" in line


def test_no_espeak_not_root_and_no_sudo(tmp_path, calls):
    stubs = {"python3": python_stub(calls), "df": DF_PLENTY, "apt-get": logging_stub(calls),
             "id": 'echo 1000\n'}
    env = bare_bin(tmp_path / "bin", tools=[t for t in CORE if t != "id"], stubs=stubs, python=False)
    line = one_line_failure(run_install(env, "--espeak_ng", "true"), calls)
    assert "espeak-ng is missing" in line and "as root" in line


@pytest.mark.parametrize("espeak_ng", ["true", "false"])
def test_all_prerequisites_met_goes_on_to_apt_then_pip(tmp_path, calls, espeak_ng):
    # The control case: with every fact good the same stubs see pip install the package without extras (a user's
    # CPU install pulls no triton, issue 57), and espeak-ng installed with apt-get first only when asked for
    # (AISHELL-1 and LibriSpeech users do not need it).
    stubs = {"python3": python_stub(calls), "df": DF_PLENTY, "apt-get": logging_stub(calls), "id": "echo 0\n"}
    env = bare_bin(tmp_path / "bin", tools=[t for t in CORE if t != "id"], stubs=stubs, python=False)
    proc = run_install(env, "--espeak_ng", espeak_ng)
    made = calls.read_text().splitlines()
    apt = ["apt-get update -qq", "apt-get install -y -qq espeak-ng"]
    assert made[:2] == apt if espeak_ng == "true" else not set(apt) & set(made), made
    assert "python3 -m pip install -e ." in made and not any("[test" in line for line in made), made
    assert proc.returncode != 0  # the stub python3 cannot import wenet_udps, so the final check fails


def test_test_extra_only_when_asked_for(tmp_path, calls):
    """--test true installs the test extra (pytest, ruff, triton for the kernel's interpreter tests); issue 57: a
    user who only runs the recipes got triton's 1 GB from the extra install.sh always asked for."""
    stubs = {"python3": python_stub(calls), "df": DF_PLENTY, "apt-get": logging_stub(calls), "id": "echo 0\n"}
    env = bare_bin(tmp_path / "bin", tools=[t for t in CORE if t != "id"], stubs=stubs, python=False)
    run_install(env, "--test", "true")
    assert "python3 -m pip install -e .[test]" in calls.read_text().splitlines()


def test_unknown_option_is_one_line(tmp_path, calls):
    env = bare_bin(tmp_path / "bin", stubs={"python3": python_stub(calls), "df": DF_PLENTY}, python=False)
    line = one_line_failure(run_install(env, "--espeak", "true"), calls)
    assert "--espeak" in line


def test_lm_build_tools_missing_and_no_apt(tmp_path, calls):
    # No cmake or compiler on this PATH: --lm true stops before pip, saying what to install.
    env = bare_bin(tmp_path / "bin", stubs={"python3": python_stub(calls, prefix=str(tmp_path)), "df": DF_PLENTY},
                   python=False)
    line = one_line_failure(run_install(env, "--lm", "true"), calls)
    assert "KenLM's build tools" in line and "no apt-get" in line and "cmake" in line


def test_lm_installs_build_tools_with_apt_and_the_lm_extra(tmp_path, calls):
    stubs = {"python3": python_stub(calls, prefix=str(tmp_path)), "df": DF_PLENTY, "apt-get": logging_stub(calls),
             "id": "echo 0\n"}
    env = bare_bin(tmp_path / "bin", tools=[t for t in CORE if t != "id"], stubs=stubs, python=False)
    proc = run_install(env, "--lm", "true", "--test", "true")
    made = calls.read_text().splitlines()
    install = next(line for line in made if line.startswith("apt-get install"))
    assert made[0] == "apt-get update -qq" and "cmake" in install and "libboost-program-options-dev" in install
    assert "python3 -m pip install -e .[test,lm]" in made
    assert proc.returncode != 0  # the stub python3 cannot import wenet_udps, so the check after pip fails


def test_triton_is_no_dependency_of_a_cpu_install():
    """Issue 57: a CPU-only install pulled triton (about 1 GB of the 2.5 GB venv). It is in the gpu and test extras
    only (the test extra runs the kernel's interpreter tests)."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert not [d for d in project["dependencies"] if d.startswith("triton")]
    for extra in ("gpu", "test"):
        assert [d for d in project["optional-dependencies"][extra] if d.startswith("triton")], extra
