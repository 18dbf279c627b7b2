"""Issue 80, I: a FIFO, socket or device given where a file is read is refused by name, wherever a file is read.

A FIFO as ``tokenizer_conf.symbol_table_path`` hung describe and recognize: ``open`` waits for a writer. The one
mechanism is ``cli.regular_file`` (and ``cli.open_input``, which calls it). The guard finds the readers from the
code itself: every call in wenet_udps/ and tools/ that reads a file (``open`` for reading, ``read_text``,
``read_bytes``, ``torch.load``, ``np.load``, ``json.load``, onnxruntime's ``InferenceSession``, soundfile's
``SoundFile``/``read``/``info``, SentencePiece's ``load``) must be checked: its path goes through
``regular_file``, or its function calls ``regular_file``/``open_input`` or tests ``isfile``/``is_file`` (false for
a FIFO) first. The few reads of files the program itself made or the system's own are listed with why.
"""
import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

from wenet_udps.utils.cli import NotRegularFileError, existing_file, open_input, regular_file

ROOT = Path(__file__).resolve().parents[2]
READ_ATTRS = {"read_text", "read_bytes", "InferenceSession", "SoundFile"}
READ_CALLS = {("torch", "load"), ("np", "load"), ("json", "load"), ("sf", "read"), ("sf", "info"),
              ("soundfile", "read"), ("sp", "load")}
GUARDS = {"regular_file", "open_input", "isfile", "is_file"}
# (file, function): why the read needs no check.
ALLOWED = {
    ("wenet_udps/utils/provenance.py", "_cpuinfo"): "/proc/cpuinfo, the system's own",
    ("wenet_udps/utils/provenance.py", "compiled_vec_isa"): "its own cache file",
    ("wenet_udps/bin/gpu_check.py", "distributed_model_checks"): "the rank reports its own workers wrote",
    ("wenet_udps/corpora/tiny.py", "render"): "espeak-ng's output, in memory",
    ("tools/train_bpe.py", "main"): "the model sentencepiece has just written",
    ("wenet_udps/utils/atomic.py", "open_atomic"): "the one writer's opens ('w', 'wb', 'x'): it reads nothing",
}


def _mode_writes(call: ast.Call) -> bool:
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wax+")


def _is_read(call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Name):
        # (read_text, read_bytes as names are the package's readers, which go through kaldi_files.utf8_lines)
        return (f.id == "open" and not _mode_writes(call)) or f.id in {"InferenceSession", "SoundFile"}
    if isinstance(f, ast.Attribute):
        if f.attr in READ_ATTRS:
            return True
        base = f.value.id if isinstance(f.value, ast.Name) else getattr(f.value, "attr", None)
        return (base, f.attr) in READ_CALLS or (f.attr == "load" and base == "sp")
    return False


def _name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def unchecked_reads() -> List[Tuple[str, str, int]]:
    """(file, function, line) of every read in wenet_udps/ and tools/ that no guard covers."""
    found = []
    for path in sorted([*(ROOT / "wenet_udps").rglob("*.py"), *(ROOT / "tools").glob("*.py")]):
        rel = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            calls = [n for n in ast.walk(func) if isinstance(n, ast.Call)]
            guarded = any(_name(c) in GUARDS for c in calls)
            for call in calls:
                if not _is_read(call) or guarded or (rel, func.name) in ALLOWED:
                    continue
                if call.args and isinstance(call.args[0], ast.Call) and _name(call.args[0]) == "regular_file":
                    continue
                found.append((rel, func.name, call.lineno))
    return sorted(set(found))


def test_every_read_of_a_file_is_checked_for_a_regular_file():
    """The guard (shown to fail: with kaldi_files.utf8_lines opening with ``open`` it names that reader)."""
    assert unchecked_reads() == []


def test_every_allowed_read_still_exists():
    """An entry for a function that no longer reads anything would let a new reader of that name through."""
    names = set()
    for rel, func in ALLOWED:
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        names |= {(rel, n.name) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == func}
    assert names == set(ALLOWED)


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "units.txt"
    os.mkfifo(path)
    return path


def test_regular_file_names_a_fifo_a_device_and_a_directory(fifo, tmp_path):
    with pytest.raises(NotRegularFileError, match=f"tokenizer_conf.symbol_table_path {fifo} is a FIFO"):
        regular_file(fifo, "tokenizer_conf.symbol_table_path")
    with pytest.raises(NotRegularFileError, match="/dev/zero is a character device"):
        open_input("/dev/zero")
    with pytest.raises(NotRegularFileError, match="is a directory"):
        regular_file(tmp_path)
    assert regular_file(tmp_path / "absent") == tmp_path / "absent"   # the open that follows says "no such file"
    with pytest.raises(Exception, match=f"{fifo} is a FIFO"):
        existing_file(str(fifo))   # the cli layer said "no such file"


@pytest.mark.parametrize("program", ["describe", "recognize"])
def test_a_fifo_as_the_units_file_is_refused_not_waited_on(fifo, tmp_path, program):
    """describe and recognize hung on a FIFO as tokenizer_conf.symbol_table_path; now one line, exit 2."""
    from tests.train.train_helpers import tiny_config
    import yaml
    conf = tiny_config(fifo)   # describe: a conf (its vocabulary read from the units file)
    if program == "recognize":   # a train.yaml (finalised)
        conf |= {"input_dim": 20, "output_dim": 8}
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(conf), encoding="utf-8")
    args = ["--config", str(tmp_path / "train.yaml")]
    if program == "recognize":
        import torch
        from wenet_udps.model_builder import build_model
        (tmp_path / "data.list").write_text("{}\n", encoding="utf-8")
        torch.save(build_model(conf).state_dict(), tmp_path / "x.pt")
        args += ["--checkpoint", str(tmp_path / "x.pt"), "--test_data", str(tmp_path / "data.list"),
                 "--result_dir", str(tmp_path / "out"), "--modes", "attention"]
    proc = subprocess.run([sys.executable, "-m", f"wenet_udps.bin.{program}", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2, proc.stderr
    assert f"{fifo} is a FIFO (named pipe)" in proc.stderr and "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.endswith(f": error: {fifo} is a FIFO (named pipe): reading it waits for a writer; give a regular file")


def test_open_input_refuses_a_write_mode(tmp_path):
    """The one reader and the one writer stay apart: open_input (every guarded read) cannot write, so the atomic
    guard may take its variable mode as a read."""
    path = tmp_path / "x"
    path.write_text("a\n")
    for mode in ("w", "wb", "a", "r+", "x"):
        with pytest.raises(ValueError, match="open_input reads"):
            open_input(str(path), mode)
    assert path.read_text() == "a\n"
