"""wenet_udps.utils.provenance: the facts a results table records."""
import json
import re
import sys
import types

import torch

from wenet_udps.utils.provenance import compiled_vec_isa, provenance, provenance_markdown


def test_provenance_names_commit_machine_versions_and_seeds(monkeypatch):
    monkeypatch.setenv("WENET_UDPS_COMPILE", "0")
    facts = provenance(seeds=[1, 2, 3])
    assert re.fullmatch(r"[0-9a-f]{12}( \(uncommitted changes\))?", facts["commit"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", facts["date"])
    assert facts["torch"] == torch.__version__ and facts["seeds"] == "1 2 3"
    assert facts["threads"] == str(torch.get_num_threads()) and "CPUs" in facts["machine"]
    assert facts["WENET_UDPS_COMPILE"] == "0"
    lines = provenance_markdown(facts)
    assert "- seeds: 1 2 3" in lines and len(lines) == len(facts)
    assert provenance()["seeds"] == "unknown (no train.yaml records one)"


def test_the_compiled_code_isa_is_probed_once_per_machine_torch_and_compiler(tmp_path, monkeypatch):
    """Inductor's probe (~6 s: it compiles a program per ISA) runs again only when what it depends on changed."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    for name in ("ATEN_CPU_CAPABILITY", "TORCHINDUCTOR_VEC_ISA_OK", "CXX"):
        monkeypatch.delenv(name, raising=False)
    probes = []
    fake = types.ModuleType("torch._inductor.cpu_vec_isa")
    fake.pick_vec_isa = lambda: probes.append("avx2") or "avx2"
    monkeypatch.setitem(sys.modules, "torch._inductor.cpu_vec_isa", fake)
    assert compiled_vec_isa() == compiled_vec_isa() == "avx2" and len(probes) == 1
    assert json.loads((tmp_path / "wenet_udps_vec_isa.json").read_text())["isa"] == "avx2"
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")   # caps the ISA
    fake.pick_vec_isa = lambda: probes.append("") or ""
    assert compiled_vec_isa() == compiled_vec_isa() == "none" and len(probes) == 2
    monkeypatch.setenv("TORCHINDUCTOR_VEC_ISA_OK", "0")  # turns it off
    assert compiled_vec_isa() == "none" and len(probes) == 3
    cxx = tmp_path / "bin" / "c++"                        # another compiler
    cxx.parent.mkdir()
    cxx.write_text("#!/bin/sh\n")
    cxx.chmod(0o755)
    monkeypatch.setenv("CXX", str(cxx))
    assert compiled_vec_isa() == "none" and len(probes) == 4
    (tmp_path / "wenet_udps_vec_isa.json").write_text("{")  # a damaged file: probed again, no error
    assert compiled_vec_isa() == "none" and len(probes) == 5
    fake.pick_vec_isa = lambda: 1 / 0                       # a failing probe is reported, and not kept
    monkeypatch.setenv("CXX", "no-such-compiler")
    assert compiled_vec_isa() == "unknown (ZeroDivisionError)"
    assert json.loads((tmp_path / "wenet_udps_vec_isa.json").read_text())["isa"] == "none"
