"""wenet_udps.utils.provenance: the facts a results table records."""
import re

import torch

from wenet_udps.utils.provenance import provenance, provenance_markdown


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
