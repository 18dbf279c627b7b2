"""Every training YAML under conf/ builds a model and runs one forward pass (vocab and cmvn stubbed)."""
from pathlib import Path

import pytest
import torch

from wenet_udps.config import load_config, read_conf
from wenet_udps.model_builder import attention_sites, build_model
from wenet_udps.transformer.attention import is_udps

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
YAMLS = sorted(CONF_DIR.rglob("*.yaml")) if CONF_DIR.is_dir() else []
VOCAB = 40


@pytest.mark.skipif(not YAMLS, reason="no YAML under conf/ yet")
@pytest.mark.parametrize("path", YAMLS, ids=[str(p.relative_to(CONF_DIR)) for p in YAMLS])
def test_conf_builds_and_runs(path):
    load_config(str(path))   # complete (or completed by its base) and schema-checked, as train reads it
    config = read_conf(str(path))
    assert isinstance(config, dict), f"{path}: not a YAML mapping"
    assert "att_udps" in config, f"{path}: every training config states att_udps"
    fbank = (config.get("dataset_conf") or {}).get("fbank_conf") or {}
    config["input_dim"] = fbank.get("num_mel_bins", 80)
    config["output_dim"] = VOCAB
    config["cmvn"] = None  # the stats file is produced by the recipe's data preparation
    model = build_model(config).eval()
    sites = attention_sites(model)
    assert sites, f"{path}: no attention found"
    if config["att_udps"]:
        assert all(is_udps(name) for name in sites.values()), f"{path}: att_udps true but {sites}"
    speech = torch.randn(2, 64, config["input_dim"])
    lengths = torch.tensor([64, 50])
    text = torch.tensor([[3, 4, 5], [6, 7, -1]])
    with torch.no_grad():
        out = model(speech, lengths, text, torch.tensor([3, 2]))
    assert torch.isfinite(out["loss"]), f"{path}: non-finite loss"


@pytest.mark.skipif(not YAMLS, reason="no YAML under conf/ yet")
@pytest.mark.parametrize("path", YAMLS, ids=[str(p.relative_to(CONF_DIR)) for p in YAMLS])
def test_conf_loads_as_every_family(path):
    """run.sh --families trains any conf as each family (the override att_family=<family>): none may be refused, e.g.
    for a udps_conf key a cosine model would not read (site_families.check_unread_options, issue 81 F10)."""
    from wenet_udps.transformer.attention import FAMILIES
    for family in FAMILIES:
        load_config(str(path), [f"att_family={family}"])
