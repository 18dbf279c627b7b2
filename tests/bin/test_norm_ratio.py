"""wenet_udps.bin.norm_ratio: the JSON and the table of a UDPS model; a model without UDPS or an empty list is one
line, and nothing is written."""
import json
import sys

import numpy as np
import pytest
import soundfile as sf

from tests.train.train_helpers import make_model_dir
from wenet_udps.bin import norm_ratio
from wenet_udps.utils import cli


def write_list(tmp_path, n: int = 3):
    rng = np.random.default_rng(0)
    rows = []
    for i, (samples, text) in enumerate([(8000, "ONE"), (5600, "TWO"), (7000, "NINE")][:n]):
        sf.write(str(tmp_path / f"{i}.wav"), rng.standard_normal(samples).astype(np.float32) * 0.1, 8000)
        rows.append({"key": f"u{i}", "wav": str(tmp_path / f"{i}.wav"), "txt": text})
    path = tmp_path / "data.list"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run(monkeypatch, capsys, args):
    monkeypatch.setattr(sys, "argv", ["prog", *args])
    with pytest.raises(SystemExit) as exit_info:
        cli.run_cli(norm_ratio.main, "wenet_udps.bin.norm_ratio")
    return exit_info.value.code, capsys.readouterr()


def test_json_and_table_of_a_udps_conformer(tmp_path, monkeypatch, capsys):
    config, checkpoint = make_model_dir(tmp_path, encoder="conformer")
    data = write_list(tmp_path)
    out = tmp_path / "out" / "norm_ratio.json"
    code, printed = run(monkeypatch, capsys, ["--config", str(config), "--checkpoint", str(checkpoint),
                                              "--test_data", str(data), "--out", str(out), "--max_utts", "2",
                                              "--batch_size", "2"])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["utterances"] == 2 and len(result["checkpoint_sha256"]) == 64
    sites = {(s["site"], s["layer"]): s for s in result["sites"]}
    assert set(sites) == {("enc_self", 0), ("dec_self", 0), ("dec_cross", 0)}
    assert (sites["enc_self", 0]["type"], sites["enc_self", 0]["pos_norm"]) == ("rel_udps_selfattn", "qk")
    for site in result["sites"]:
        assert [h["head"] for h in site["heads"]] == [0, 1]
        for head in site["heads"]:
            assert head["alpha"] > 0 and ("beta" in head) == (site["site"] == "enc_self")
            assert head["attention_mass_per_row"] == pytest.approx(1.0, abs=1e-5)
            for weighting in ("uniform", "attention"):
                stats = head[weighting]
                quantiles = [stats["r_quantiles"][p] for p in ("1", "5", "25", "50", "75", "95", "99")]
                assert quantiles == sorted(quantiles) and 0 < stats["mean_g"] <= 1
                assert stats["frac_g_below_0.5"] <= stats["frac_g_below_0.9"]
                assert len(stats["histogram"]["log10_r_edges"]) == len(stats["histogram"]["fraction"]) + 1
    lines = printed.out.splitlines()
    assert lines[0] == f"{out}: 2 utterances of {data}"
    assert lines[1].startswith("site") and len(lines) == 2 + 3
    enc = next(line for line in lines if line.startswith("enc_self"))
    assert enc.split()[-1] == "encoder.encoders.0.self_attn"


@pytest.mark.parametrize("family", ["scaled_dot", "cosine"])
def test_a_model_without_udps_is_refused_in_one_line(tmp_path, monkeypatch, capsys, family):
    config, checkpoint = make_model_dir(tmp_path, att_family=family)
    out = tmp_path / "r.json"
    code, printed = run(monkeypatch, capsys, ["--config", str(config), "--checkpoint", str(checkpoint),
                                              "--test_data", str(write_list(tmp_path, 1)), "--out", str(out)])
    assert code == 2 and not out.exists()
    assert printed.err.strip().splitlines() == [
        f"wenet_udps.bin.norm_ratio: error: {config}: the model has no UDPS attention site (r = |q|/|k| is UDPS's "
        f"length factor's argument): give a UDPS model's train.yaml"]


def test_an_empty_list_is_one_line_with_its_counts(tmp_path, monkeypatch, capsys):
    config, checkpoint = make_model_dir(tmp_path)
    data = tmp_path / "empty.list"
    data.write_text("")
    out = tmp_path / "r.json"
    code, printed = run(monkeypatch, capsys, ["--config", str(config), "--checkpoint", str(checkpoint),
                                              "--test_data", str(data), "--out", str(out)])
    assert code == 1 and not out.exists()
    assert printed.err.strip().splitlines()[-1] == (
        f"wenet_udps.bin.norm_ratio: error: norm_ratio data {data}: 0 utterances used, 0 skipped (none): no usable "
        f"utterance")
