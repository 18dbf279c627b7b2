"""wenet_udps.bin.describe: the attention a config really builds, streaming, and checkpoint fit."""
from pathlib import Path

import pytest
import torch
import yaml

from wenet_udps.bin import describe as d
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
    mixed = tiny(**{"att_udps": False, "decoder_conf.src_attention_layer_type": "udps_crossattn"})
    assert d.attention_label(d.site_types(mixed)) == "udps_dec_cross"
    assert d.display_label("udps_enc_self_dec_cross") == "udps (enc-self, dec-cross)"
    assert d.display_label("scaled_dot") == "scaled-dot"


def test_streaming_flag():
    assert not d.is_streaming(tiny())
    assert d.is_streaming(tiny(**{"encoder_conf.use_dynamic_chunk": True}))
    assert d.is_streaming(tiny(**{"encoder_conf.static_chunk_size": 16}))


def test_describe_lines_and_checkpoint_fit(tmp_path, capsys):
    assert d.describe(CONF, [], ["false", "true", "conf"]) == ["false scaled_dot false", "true udps false",
                                                               "conf scaled_dot false"]
    config = tiny(att_udps=False)
    config.update(input_dim=40, output_dim=8, cmvn=None)
    torch.save({"model": build_model(config).state_dict()}, tmp_path / "sdp.pt")
    ov = ["encoder_conf.num_blocks=1"]
    assert d.describe(CONF, ov, ["false"], str(tmp_path / "sdp.pt")) == ["false scaled_dot false"]
    with pytest.raises(ValueError, match="does not fit the udps model.*looks like a scaled-dot model"):
        d.describe(CONF, ov, ["true"], str(tmp_path / "sdp.pt"))
    with pytest.raises(ValueError, match="belongs to one model"):
        d.describe(CONF, ov, ["false", "true"], str(tmp_path / "sdp.pt"))
    assert d.main(["--config", CONF, "--override", "max_epochs=1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "max_epochs: unknown key (did you mean 'max_epoch'" in err[0]
