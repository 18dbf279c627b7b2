"""Issue 80, I: every user error is one line (``<program>: error: ...``, exit 2, no traceback), before any work."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wenet_udps.transformer.decode_options import resolve_decode_options
from wenet_udps.utils.cli import UserError

ROOT = Path(__file__).resolve().parents[2]
CONF = "conf/aishell/train_conformer.yaml"


def run(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)


def one_error_line(proc: subprocess.CompletedProcess, program: str) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(program) and ": error: " in lines[0], proc.stderr
    return lines[0]


def test_a_mode_given_twice_is_refused_not_decoded_twice(tmp_path):
    """``--modes attention attention`` decoded attention twice into one folder."""
    with pytest.raises(UserError, match="modes: attention given more than once"):
        resolve_decode_options(["attention", "ctc_greedy_search", "attention"], {})
    for name in ("x.pt", "data.list"):
        (tmp_path / name).write_text("{}\n")
    line = one_error_line(run("wenet_udps.bin.recognize", "--config", CONF, "--checkpoint", str(tmp_path / "x.pt"),
                              "--test_data", str(tmp_path / "data.list"), "--result_dir", str(tmp_path / "out"),
                              "--modes", "attention", "attention"), "recognize")
    assert "--modes: attention given more than once; each mode is decoded once" in line
    assert not (tmp_path / "out" / "attention").exists()


def test_a_cut_onnx_model_is_one_line_naming_it(tmp_path):
    """sherpa_decode with a cut model.onnx gave onnxruntime's InvalidProtobuf traceback."""
    pytest.importorskip("onnxruntime")
    export = tmp_path / "sherpa"
    export.mkdir()
    (export / "model.onnx").write_bytes(b"\x08\x07\x12\x04abc")   # the first bytes of a graph, the rest cut off
    (tmp_path / "wav.scp").write_text("u1 /nowhere.wav\n")
    line = one_error_line(run("wenet_udps.bin.sherpa_decode", "--config", CONF, "--export_dir", str(export),
                              "--wav_scp", str(tmp_path / "wav.scp"), "--result_dir", str(tmp_path / "out")),
                          "sherpa_decode")
    assert f"{export / 'model.onnx'} cannot be loaded (" in line and "INVALID_PROTOBUF" in line
    assert "cut short or not an ONNX graph; export again" in line


@pytest.mark.parametrize("module, option", [("wenet_udps.bin.train", "--num_workers"),
                                            ("wenet_udps.bin.recognize", "--num_workers"),
                                            ("wenet_udps.bin.average_model", "--num_workers"),
                                            ("wenet_udps.bin.sherpa_decode", "--num_threads")])
def test_workers_and_threads_have_a_ceiling_of_the_cpus(module, option):
    """Issue 80 round 7, I: ``train --num_workers 100000`` and ``sherpa_decode --num_threads 100000`` hung."""
    from wenet_udps.utils.cli import CPU_CEILING
    proc = run(module, option, "100000")
    line = one_error_line(proc, module.rsplit(".", 1)[1])
    assert f"{option}: must be in " in line and f"..{CPU_CEILING}, got 100000" in line, line
    assert f"this machine's {os.cpu_count()} CPUs" in line
