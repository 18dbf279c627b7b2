"""wenet_udps.bin.describe: the attention a config really builds, streaming, and checkpoint fit."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from wenet_udps.bin import describe as d
from wenet_udps.dataset.features import feature_dim
from wenet_udps.model_builder import build_model

CONF = str(Path(__file__).resolve().parents[2] / "conf" / "tiny_zh" / "train_conformer.yaml")


def tiny(**changes):
    config = yaml.safe_load(open(CONF, encoding="utf-8"))
    config["encoder_conf"].update(num_blocks=1)
    for key, value in changes.items():
        section, _, name = key.rpartition(".")
        (config[section] if section else config)[name] = value
    return config


def test_labels_follow_the_built_model_not_the_flag():
    assert d.attention_label(d.site_types(tiny(att_udps=False))) == "scaled_dot"
    assert d.attention_label(d.site_types(tiny(att_udps=True))) == "udps"
    # att_udps null: the per-site types as written decide.
    mixed = tiny(**{"att_udps": None, "decoder_conf.src_attention_layer_type": "udps_crossattn"})
    assert d.attention_label(d.site_types(mixed)) == "udps_dec_cross"
    # A site set: those sites UDPS, every other scaled-dot, whatever the types say.
    assert d.site_types(tiny(att_udps="enc_self", **{"decoder_conf.src_attention_layer_type": "udps_crossattn"})) \
        == {"enc_self": ["rel_udps_selfattn"], "dec_self": ["selfattn"] * 2, "dec_cross": ["crossattn"] * 2}
    assert d.attention_label(d.site_types(tiny(att_udps="dec_self+dec_cross"))) == "udps_dec_self_dec_cross"
    assert d.display_label("udps_enc_self_dec_cross") == "udps (enc-self, dec-cross)"
    assert d.display_label("scaled_dot") == "scaled-dot"
    # att_family: one family everywhere, or at a site set; a mix of families written per site is labelled by each.
    assert d.attention_label(d.site_types(tiny(att_udps=None, att_family="cosine"))) == "cosine"
    assert d.attention_label(d.site_types(tiny(att_udps=None, att_family="cosine:dec_cross"))) == "cosine_dec_cross"
    both = tiny(**{"att_udps": "enc_self", "decoder_conf.src_attention_layer_type": "cosine_crossattn"})
    both["att_udps"] = None
    assert d.attention_label(d.site_types(both)) == "cosine_dec_cross"
    both["encoder_conf"]["selfattention_layer_type"] = "rel_udps_selfattn"
    assert d.attention_label(d.site_types(both)) == "udps_enc_self_cosine_dec_cross"
    assert d.display_label("udps_enc_self_cosine_dec_cross") == "udps (enc-self), cosine (dec-cross)"


def test_streaming_flag():
    assert not d.is_streaming(tiny())
    assert d.is_streaming(tiny(**{"encoder_conf.use_dynamic_chunk": True}))
    assert d.is_streaming(tiny(**{"encoder_conf.static_chunk_size": 16}))


def test_describe_lines_and_checkpoint_fit(tmp_path, capsys):
    assert d.describe(CONF, [], ["scaled_dot", "udps", "cosine", "conf"]) == [
        "scaled_dot scaled_dot false", "udps udps false", "cosine cosine false", "conf scaled_dot false"]
    ov = ["encoder_conf.num_blocks=1"]
    for family in ("scaled_dot", "cosine"):
        config = tiny(att_udps=None, att_family=family)
        config.update(input_dim=40, output_dim=8, cmvn=None)
        torch.save({"model": build_model(config).state_dict()}, tmp_path / f"{family}.pt")
        assert d.describe(CONF, ov, [family], str(tmp_path / f"{family}.pt")) == [f"{family} {family} false"]
    with pytest.raises(ValueError, match="does not fit the udps model.*looks like a scaled-dot model"):
        d.describe(CONF, ov, ["udps"], str(tmp_path / "scaled_dot.pt"))
    # cosine and UDPS weights have different parameter names (cos_alpha / alpha): told apart by them
    with pytest.raises(ValueError, match="does not fit the udps model.*looks like a cosine model"):
        d.describe(CONF, ov, ["udps"], str(tmp_path / "cosine.pt"))
    with pytest.raises(ValueError, match="belongs to one model.*--families"):
        d.describe(CONF, ov, ["scaled_dot", "udps"], str(tmp_path / "scaled_dot.pt"))


@pytest.mark.parametrize("args,message", [
    (["--override", "max_epochs=1"], "max_epochs: unknown key (did you mean 'max_epoch'"),
    (["--variant", "udps:enc_selff"], "att_family: 'udps:enc_selff': unknown site 'enc_selff'; valid: a family of"),
    (["--variant", "cosin"], "att_family: 'cosin': unknown family 'cosin'; valid: a family of scaled_dot, udps, "),
])
def test_a_bad_conf_is_one_error_line_and_exit_2(args, message):
    """docs/failure_behaviour.md: ``<program>: error: <message>`` once on stderr, exit 2, the file named once."""
    proc = subprocess.run([sys.executable, "-m", "wenet_udps.bin.describe", "--config", CONF, *args],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("describe: error: ") and message in err[0], proc.stderr
    assert err[0].count("train_conformer.yaml") <= 1
    missing = subprocess.run([sys.executable, "-m", "wenet_udps.bin.describe", "--config", "no/such.yaml"],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.count("no/such.yaml") == 1


@pytest.mark.parametrize("units", [10, None], ids=["units_file", "not_made_yet"])
def test_human_output_names_every_site_its_type_parameters_and_size(tmp_path, units):
    """The units file is the test's own (issue 47 case 25: the conf's data/tiny_zh/dict/lang_char.txt, made by a
    run in the checkout, changed the count): one of ``units`` tokens, or none yet (the placeholder vocabulary)."""
    path = tmp_path / "units.txt"
    if units:
        tokens = ["<blank>", "<unk>"] + [chr(0x4e00 + i) for i in range(units - 3)] + ["<sos/eos>"]
        path.write_text("".join(f"{t} {i}\n" for i, t in enumerate(tokens)), encoding="utf-8")
    text = "\n".join(d.describe(CONF, [f"tokenizer_conf.symbol_table_path={path}"], ["scaled_dot", "udps:enc_self"],
                                porcelain=False))
    rows = re.findall(r"^  (enc_self|dec_self|dec_cross) +(\S+) +(\S+) +(\d+)  ", text, re.M)
    assert rows == [("enc_self", "rel_selfattn", "scaled-dot", "4"), ("dec_self", "selfattn", "scaled-dot", "2"),
                    ("dec_cross", "crossattn", "scaled-dot", "2"), ("enc_self", "rel_udps_selfattn", "UDPS", "4"),
                    ("dec_self", "selfattn", "scaled-dot", "2"), ("dec_cross", "crossattn", "scaled-dot", "2")]
    assert "attention: scaled-dot (run label scaled_dot" in text and "udps (enc-self) (run label udps_enc_self" in text
    params = [int(n.replace(",", "")) for n in re.findall(r"parameters: ([\d,]+) ", text)]
    config = tiny()
    config["encoder_conf"]["num_blocks"] = 4
    dim = feature_dim(config["dataset_conf"])
    model = build_model(dict(config, att_udps=False, input_dim=dim, output_dim=units or d.PLACEHOLDER_VOCAB, cmvn=None))
    assert params[0] == sum(p.numel() for p in model.parameters()) and params[1] != params[0]
    assert re.search(r"model size: \d+\.\d MiB state_dict", text)
