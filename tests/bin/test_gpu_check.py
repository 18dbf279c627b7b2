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
    # Issue 47 case 26: checks that did not run are named, never reported as ALL PASSED.
    skipped = [k for k, v in verdicts.items() if v.startswith(("skipped", "not measured"))]
    assert report["not_run"] == skipped and len(skipped) == 8
    last = proc.stdout.strip().splitlines()[-1]
    assert "ALL PASSED" not in proc.stdout and last.startswith(f"PASSED {len(verdicts) - 8} of {len(verdicts)} checks; "
                                                               f"8 checks skipped, not run on this machine")
    assert all(name in last for name in skipped)


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


def test_bf16_without_a_gpu_names_the_checks_it_skipped(tmp_path, capsys):
    """Issue 47 case 26: `gpu_check --dtype bf16` on a machine without a GPU printed ALL PASSED, its dtype checks
    skipped and nothing timed. Now the last line says how many were skipped and names them (exit 0: nothing that
    ran failed)."""
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs TRITON_INTERPRET=1 before triton is imported (tests/conftest.py sets it without CUDA)")
    out = tmp_path / "report.json"
    code = gpu_check.main(["--device", "cpu", "--config", str(ROOT / "conf/tiny_en/train_conformer.yaml"),
                           "--dtype", "bf16", "--lengths", "64", "--json", str(out)])
    printed = capsys.readouterr().out
    last = printed.strip().splitlines()[-1]
    report = json.loads(out.read_text())
    assert code == 0 and report["ok"] and "ALL PASSED" not in printed
    assert "7 checks skipped, not run on this machine" in last
    for name in ("kernel parity bf16 mask=none d=32", "kernel parity fp16 mask=rows d=32", "speed/memory T=64"):
        assert name in report["not_run"] and name in last


def test_unknown_corpus_lists_the_valid_ones(capsys):
    with pytest.raises(SystemExit):
        gpu_check.main(["--device", "cpu", "--corpus", "timit"])
    err = capsys.readouterr().err
    assert "conf/timit/train_conformer.yaml" in err and "aishell" in err and "librispeech" in err
