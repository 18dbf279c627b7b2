"""Confs cannot fall back silently: ``base:`` completes a partial conf, a partial conf without one is refused, and
``att_udps`` decides every site's attention (false: scaled-dot everywhere, whatever the per-site types say)."""
from pathlib import Path

import pytest
import yaml

from wenet_udps.model_info import site_types
from wenet_udps.config import REQUIRED, load_config
from wenet_udps.utils.schema import ConfigError

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf" / "tiny_zh" / "train_conformer.yaml"
SCALED_DOT = {"enc_self": {"rel_selfattn"}, "dec_self": {"selfattn"}, "dec_cross": {"crossattn"}}


def types(config):
    return {site: set(names) for site, names in site_types(config).items()}


def write(path, config):
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return str(path)


def test_base_is_deep_merged_relative_to_the_conf_and_recursive(tmp_path):
    (tmp_path / "sub").mkdir()
    write(tmp_path / "mid.yaml", {"base": str(CONF), "encoder_conf": {"num_blocks": 2}, "max_epoch": 3})
    # Relative to the naming conf's own directory (sub/), not to the working directory.
    top = write(tmp_path / "sub" / "top.yaml", {"base": "../mid.yaml", "encoder_conf": {"output_size": 64},
                                                "dataset_conf": {"batch_conf": {"batch_size": 2}}})
    config = load_config(top)
    full = load_config(str(CONF))
    assert "base" not in config
    assert config["encoder_conf"]["num_blocks"] == 2 and config["encoder_conf"]["output_size"] == 64
    # Keys the overrides did not name keep the base's values, at every depth.
    assert config["encoder_conf"]["attention_heads"] == full["encoder_conf"]["attention_heads"]
    assert config["dataset_conf"]["fbank_conf"] == full["dataset_conf"]["fbank_conf"]
    assert config["dataset_conf"]["batch_conf"]["batch_size"] == 2
    assert config["max_epoch"] == 3 and config["optim_conf"] == full["optim_conf"]


def test_base_cycle_and_missing_base_are_refused(tmp_path):
    write(tmp_path / "a.yaml", {"base": "b.yaml"})
    write(tmp_path / "b.yaml", {"base": "a.yaml"})
    with pytest.raises(ConfigError, match=r"a.yaml: base: cycle: .*a.yaml -> .*b.yaml -> .*a.yaml"):
        load_config(str(tmp_path / "a.yaml"))
    with pytest.raises(ConfigError, match=r"base: .*nope.yaml not found \(a base is relative to the directory"):
        load_config(write(tmp_path / "c.yaml", {"base": "nope.yaml"}))


def test_a_partial_conf_without_base_is_refused_listing_what_is_missing(tmp_path):
    """Issue 37: a two-line conf built WeNet's 26 M-parameter defaults with exit 0."""
    path = write(tmp_path / "my.yaml", {"encoder_conf": {"selfattention_layer_type": "rel_udps_selfattn"}})
    with pytest.raises(ConfigError) as err:
        load_config(path)
    missing = str(err.value).split("missing ")[1].split(":")[0].split(", ")
    assert missing == [k for k in REQUIRED if k != "encoder_conf"]
    assert "base: <path>" in str(err.value)
    # With a base the same two lines build the base's small model, UDPS in the encoder only.
    enc = {"selfattention_layer_type": "rel_udps_selfattn"}
    config = load_config(write(tmp_path / "ok.yaml", {"base": str(CONF), "att_udps": None, "encoder_conf": enc}))
    assert types(config) == {**SCALED_DOT, "enc_self": {"rel_udps_selfattn"}}


def per_site_conf(tmp_path):
    """A conf with UDPS in the encoder only, written as a per-site layer type (att_udps null)."""
    return write(tmp_path / "enc.yaml", {"base": str(CONF), "att_udps": None,
                                         "encoder_conf": {"selfattention_layer_type": "rel_udps_selfattn"}})


def test_att_udps_false_is_scaled_dot_at_every_site_for_a_per_site_conf(tmp_path):
    path = per_site_conf(tmp_path)
    assert types(load_config(path))["enc_self"] == {"rel_udps_selfattn"}
    off = load_config(path, ["att_udps=false"])        # an att_udps override
    assert types(off) == SCALED_DOT
    # train.yaml names the resolved types, so it rebuilds the same model.
    assert off["encoder_conf"]["selfattention_layer_type"] == "rel_selfattn"
    assert types(load_config(path, ["att_udps=true"])) == {
        "enc_self": {"rel_udps_selfattn"}, "dec_self": {"udps_selfattn"}, "dec_cross": {"udps_crossattn"}}


@pytest.mark.parametrize("sites,udps", [("enc_self", {"enc_self"}), ("dec_self+dec_cross", {"dec_self", "dec_cross"}),
                                        ("dec_cross", {"dec_cross"})])
def test_site_sets_build_the_right_layer_types(tmp_path, sites, udps):
    want = {"enc_self": "rel_udps_selfattn", "dec_self": "udps_selfattn", "dec_cross": "udps_crossattn"}
    for conf in (str(CONF), per_site_conf(tmp_path)):
        got = types(load_config(conf, [f"att_udps={sites}"]))
        assert got == {s: ({want[s]} if s in udps else SCALED_DOT[s]) for s in SCALED_DOT}, conf


def test_a_written_udps_type_that_att_udps_would_replace_is_refused(tmp_path):
    path = write(tmp_path / "x.yaml", {"base": str(CONF), "att_udps": False,
                                       "decoder_conf": {"src_attention_layer_type": "udps_crossattn"}})
    with pytest.raises(ConfigError, match=r"x.yaml: decoder_conf.src_attention_layer_type: 'udps_crossattn' is "
                                          r"UDPS, but att_udps: False makes the dec_cross site scaled-dot"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"--override encoder_conf.selfattention_layer_type=rel_udps_selfattn: "):
        load_config(str(CONF), ["encoder_conf.selfattention_layer_type=rel_udps_selfattn"])


def test_an_att_family_override_chooses_anew_and_a_conf_giving_both_must_agree(tmp_path):
    """run.sh --families passes att_family=<family>: the conf's att_udps (false in every conf) is set null by it,
    not contradicted; a conf file with both keys choosing differently is refused, naming both."""
    cosine = {"enc_self": {"rel_cosine_selfattn"}, "dec_self": {"cosine_selfattn"}, "dec_cross": {"cosine_crossattn"}}
    config = load_config(str(CONF), ["att_family=cosine"])
    assert types(config) == cosine and config["att_udps"] is None
    back = load_config(str(CONF), ["att_family=cosine", "att_udps=false"])   # the last choice wins
    assert types(back) == SCALED_DOT and back["att_family"] is None
    mixed = load_config(per_site_conf(tmp_path), ["att_family=cosine:dec_cross"])
    assert types(mixed) == {**SCALED_DOT, "dec_cross": {"cosine_crossattn"}}
    path = write(tmp_path / "both.yaml", {"base": str(CONF), "att_udps": True, "att_family": "cosine"})
    with pytest.raises(ConfigError, match=r"both.yaml: att_family: cosine contradicts att_udps: True"):
        load_config(path)
    written = write(tmp_path / "w.yaml", {"base": str(CONF), "att_udps": None, "att_family": "udps:enc_self",
                                          "decoder_conf": {"selfattention_layer_type": "cosine_selfattn"}})
    with pytest.raises(ConfigError, match=r"'cosine_selfattn' is cosine, but att_family: udps:enc_self makes the "
                                          r"dec_self site scaled-dot"):
        load_config(written)
