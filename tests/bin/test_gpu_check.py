"""gpu_check on the CPU (the CI smoke test): the real AISHELL-1 conf, Triton parity in the interpreter, verdicts in
JSON and the exit code; an injected kernel fault fails the run."""
import json
import os
import subprocess
import sys

import pytest
import torch

from wenet_udps.bin import gpu_check

ROOT = gpu_check.ROOT
pytest.importorskip("triton", minversion="3.9")


def test_cpu_smoke_on_the_real_conf(tmp_path):
    out = tmp_path / "gpu_check.json"
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}
    env.pop("WENET_UDPS_KERNEL", None)
    proc = subprocess.run([sys.executable, "-m", "wenet_udps.bin.gpu_check", "--device", "cpu", "--corpus", "aishell",
                           "--lengths", "512,1024", "--json", str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    assert report["ok"] and report["torch"] == torch.__version__ and report["config"].endswith(
        "conf/aishell/train_conformer.yaml")
    verdicts = {c["check"]: c["verdict"] for c in report["checks"]}
    parity = {k: v for k, v in verdicts.items() if k.startswith("kernel parity")}
    assert len(parity) == 9  # 3 dtypes x 3 mask kinds
    assert [v for k, v in parity.items() if "fp32" in k] == ["pass"] * 3
    assert set(v for k, v in parity.items() if "fp32" not in k) == {"skipped (cpu)"}
    assert all(c["max_rel_error"] < 1e-5 for c in report["checks"] if c["verdict"] == "pass" and "parity" in c["check"])
    for variant in ("false", "true"):
        assert verdicts[f"train step att_udps={variant} (fp32, world 1)"] == "pass"
        assert verdicts[f"decode att_udps={variant} (attention_rescoring)"] == "pass"
    assert [verdicts[f"speed/memory T={t}"] for t in (512, 1024)] == ["not measured (cpu)"] * 2
    assert "ALL PASSED" in proc.stdout


def test_injected_kernel_fault_fails(tmp_path, monkeypatch, capsys):
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs TRITON_INTERPRET=1 before triton is imported (tests/conftest.py sets it without CUDA)")
    from wenet_udps.kernels import triton_udps
    real = triton_udps.UDPSTritonFunction.apply
    monkeypatch.setattr(triton_udps.UDPSTritonFunction, "apply", lambda *a: real(*a) + 1e-2)
    out = tmp_path / "report.json"
    code = gpu_check.main(["--device", "cpu", "--config", str(ROOT / "conf/tiny_en/train_conformer.yaml"),
                           "--json", str(out)])
    assert code == 1
    report = json.loads(out.read_text())
    assert not report["ok"]
    failed = [c for c in report["checks"] if c["verdict"] == "fail"]
    assert [c["check"] for c in failed] == [f"kernel parity fp32 mask={m} d=32" for m in ("none", "keys", "rows")]
    assert all(c["max_rel_error"] > c["tolerance"] for c in failed)
    assert "FAILED" in capsys.readouterr().out


def test_unknown_corpus_lists_the_valid_ones(capsys):
    with pytest.raises(SystemExit):
        gpu_check.main(["--device", "cpu", "--corpus", "timit"])
    err = capsys.readouterr().err
    assert "conf/timit/train_conformer.yaml" in err and "aishell" in err and "librispeech" in err
