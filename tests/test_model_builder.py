import copy
import json
import re

import pytest
import torch

from tests.conftest import REFERENCE_JSON
from wenet_udps.model_builder import attention_sites, build_model

REFERENCE = json.loads(REFERENCE_JSON.read_text())


pytestmark = pytest.mark.usefixtures("one_thread")


def tiny(encoder="transformer", **extra):
    cfg = {"input_dim": 8, "output_dim": 12, "encoder": encoder,
           "encoder_conf": {"output_size": 16, "attention_heads": 2, "linear_units": 32, "num_blocks": 2,
                            "input_layer": "linear"},
           "decoder": "transformer",
           "decoder_conf": {"attention_heads": 2, "linear_units": 32, "num_blocks": 3}}
    cfg.update(extra)
    return cfg


def reference_config(path, att_udps):
    ref = REFERENCE[path]
    cfg = copy.deepcopy(ref["config"])
    cfg.update(input_dim=ref["input_dim"], output_dim=ref["vocab"], cmvn=None, att_udps=att_udps)
    return cfg


@pytest.mark.parametrize("path", sorted(REFERENCE))
def test_reference_state_dict_and_params_with_udps_off(path):
    ref = REFERENCE[path]
    model = build_model(reference_config(path, False))
    shapes = {k: list(v.shape) for k, v in model.state_dict().items()}
    assert shapes == ref["state_dict"]
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == ref["params"]
    assert set(attention_sites(model).values()) <= {"selfattn", "rel_selfattn", "crossattn"}


@pytest.mark.parametrize("path", sorted(REFERENCE))
def test_reference_with_udps_on_differs_only_by_scales(path):
    ref = REFERENCE[path]["state_dict"]
    model = build_model(reference_config(path, True))
    shapes = {k: list(v.shape) for k, v in model.state_dict().items()}
    extra, missing = set(shapes) - set(ref), set(ref) - set(shapes)
    assert extra and {k.rsplit(".", 1)[1] for k in extra} <= {"alpha", "beta"}
    assert {k.rsplit(".", 1)[1] for k in missing} <= {"pos_bias_u", "pos_bias_v"}
    rel = REFERENCE[path]["config"]["encoder_conf"].get("selfattention_layer_type") == "rel_selfattn"
    assert bool(missing) == rel
    assert all(shapes[k] == ref[k] for k in set(shapes) & set(ref))
    sites = attention_sites(model)
    n_enc = REFERENCE[path]["config"]["encoder_conf"]["num_blocks"]
    n_dec = REFERENCE[path]["config"]["decoder_conf"]["num_blocks"]
    assert len(sites) == n_enc + 2 * n_dec
    assert all(name.startswith("udps_") or name == "rel_udps_selfattn" for name in sites.values())
    assert sum(k.endswith(".alpha") for k in extra) == len(sites)


@pytest.mark.parametrize("encoder,enc_plain,enc_udps", [("transformer", "selfattn", "udps_selfattn"),
                                                         ("conformer", "rel_selfattn", "rel_udps_selfattn")])
def test_att_udps_wires_every_site(encoder, enc_plain, enc_udps):
    off = attention_sites(build_model(tiny(encoder)))
    on = attention_sites(build_model(tiny(encoder, att_udps=True)))
    assert set(off) == set(on) and len(on) == 2 + 2 * 3
    expected_off = {"encoder": enc_plain, "self_attn": "selfattn", "src_attn": "crossattn"}
    expected_on = {"encoder": enc_udps, "self_attn": "udps_selfattn", "src_attn": "udps_crossattn"}
    for path in on:
        kind = "encoder" if path.startswith("encoder.") else path.rsplit(".", 1)[1]
        assert off[path] == expected_off[kind], path
        assert on[path] == expected_on[kind], path


@pytest.mark.parametrize("path", sorted(REFERENCE))
def test_reference_cosine_differs_from_udps_by_the_scales_names_only(path):
    """A cosine model has UDPS's structure (same shapes), its scales named cos_alpha/cos_beta (its family's marker:
    a checkpoint says its family by its names); att_family: scaled_dot is WeNet's state_dict."""
    udps = {k: list(v.shape) for k, v in build_model(reference_config(path, True)).state_dict().items()}
    cfg = dict(reference_config(path, None), att_family="cosine")
    cosine = {k: list(v.shape) for k, v in build_model(cfg).state_dict().items()}
    renamed = {k.replace(".alpha", ".cos_alpha").replace(".beta", ".cos_beta"): v for k, v in udps.items()}
    assert cosine == renamed
    plain = build_model(dict(reference_config(path, None), att_family="scaled_dot"))
    assert {k: list(v.shape) for k, v in plain.state_dict().items()} == REFERENCE[path]["state_dict"]


@pytest.mark.parametrize("att_family,att_udps,expected", [
    ("cosine", None, {"enc_self": "cosine", "dec_self": "cosine", "dec_cross": "cosine"}),
    ("cosine:enc_self+dec_cross", None, {"enc_self": "cosine", "dec_self": "scaled_dot", "dec_cross": "cosine"}),
    ("udps", True, {"enc_self": "udps", "dec_self": "udps", "dec_cross": "udps"}),   # the same choice twice: fine
    ("udps:enc_self", "enc_self", {"enc_self": "udps", "dec_self": "scaled_dot", "dec_cross": "scaled_dot"}),
    ("scaled_dot", False, {"enc_self": "scaled_dot", "dec_self": "scaled_dot", "dec_cross": "scaled_dot"}),
])
def test_att_family_wires_every_site_and_agrees_with_att_udps(att_family, att_udps, expected):
    from wenet_udps.model_info import model_site_types, site_families
    cfg = tiny("conformer", att_family=att_family, att_udps=att_udps)
    cfg["decoder_conf"]["src_attention_layer_type"] = "crossattn"   # replaced: the family rule decides
    families = site_families(model_site_types(build_model(cfg)))
    assert families == {site: [family] for site, family in expected.items()}


@pytest.mark.parametrize("att_family,att_udps,message", [
    ("cosine", False, "att_family: cosine contradicts att_udps: False (which is att_family: scaled_dot)"),
    ("cosine", True, "att_family: cosine contradicts att_udps: True (which is att_family: udps)"),
    ("udps:enc_self", True, "contradicts att_udps: True"),
    ("udps", "enc_self", "contradicts att_udps: enc_self (which is att_family: udps:enc_self)"),
    ("qknorm", None, "att_family: 'qknorm': unknown family 'qknorm'; valid: a family of scaled_dot, udps, cosine"),
    # issue 81 F6: the empty site set made every site cosine, as att_family: cosine does; an empty name in a set
    ("cosine:", None, "att_family: 'cosine:': no site after ':'; valid: a family of scaled_dot, udps, cosine, or "
                      "<family>:<sites> with sites joined by '+' from enc_self, dec_self, dec_cross"),
    ("udps: ", None, "att_family: 'udps: ': no site after ':'"),
    ("cosine:enc_self+", None, "att_family: 'cosine:enc_self+': an empty site name; valid: "),
])
def test_contradictory_or_unknown_family_choices_are_refused(att_family, att_udps, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build_model(tiny(att_family=att_family, att_udps=att_udps))


def test_cosine_conf_reaches_only_cosine_sites():
    cfg = tiny("conformer", att_family="cosine:enc_self", udps_conf={"alpha_init": 3.0},
               cosine_conf={"alpha_init": 7.0, "beta_init": 2.0, "alpha_form": "log", "eps": 1e-5})
    model = build_model(cfg)
    enc = model.encoder.encoders[0].self_attn
    assert enc.eps == 1e-5 and enc.alpha_form == "log"
    torch.testing.assert_close(enc.effective_scales()["cos_beta"], torch.full((2,), 2.0))
    assert not hasattr(model.decoder.decoders[0].self_attn, "cos_alpha")
    with pytest.raises(ValueError, match=r"cosine_conf.pos_norm: unknown key.*alpha_form, alpha_init"):
        build_model(tiny(att_family="cosine", cosine_conf={"pos_norm": "qp"}))


def test_a_family_section_that_reaches_no_site_is_refused_where_it_would_set_an_option():
    """Issue 81 F10: udps_conf.alpha_form: log on an att_family: cosine model was ignored without a word, so the
    cosine model trained linear scales beside a UDPS model with log ones (they should differ in g alone)."""
    cosine_sites = "the enc_self site's rel_cosine_selfattn reads cosine_conf, where alpha_form is unset"
    with pytest.raises(ValueError, match=re.escape(
            f"udps_conf.alpha_form: 'log' reaches no site (att_family: cosine makes no site UDPS); {cosine_sites} "
            f"(its default 'linear'): set cosine_conf.alpha_form: log for the same option, or remove it from "
            f"udps_conf")):
        build_model(tiny("conformer", att_family="cosine", udps_conf={"alpha_form": "log"}))
    # the other way round; alpha_init 10 is the plain types' default, not rel_udps_selfattn's 5
    with pytest.raises(ValueError, match=re.escape("cosine_conf.alpha_init: 10.0 reaches no site (att_family: udps "
                                                   "makes no site cosine); the enc_self site's rel_udps_selfattn "
                                                   "reads udps_conf, where alpha_init is unset (its default 5.0)")):
        build_model(tiny("conformer", att_family="udps", cosine_conf={"alpha_init": 10}))
    # nothing is lost: the stock confs' udps_conf (every value a default; pos_norm, which no cosine type takes), a
    # key cosine_conf sets itself, a scaled-dot model (no options), or a site of the family (the section reaches it)
    build_model(tiny("conformer", att_family="cosine", udps_conf={"alpha_form": "linear", "alpha_per_head": True,
                                                                  "pos_norm": "qp"}))
    model = build_model(tiny("conformer", att_family="cosine", udps_conf={"alpha_form": "log"},
                             cosine_conf={"alpha_form": "squared"}))
    assert model.encoder.encoders[0].self_attn.alpha_form == "squared"
    build_model(tiny("conformer", att_family="scaled_dot", udps_conf={"alpha_form": "log"}))
    mixed = tiny("conformer", udps_conf={"alpha_form": "log"})   # types as written: a cosine and a UDPS site
    mixed["encoder_conf"]["selfattention_layer_type"] = "rel_cosine_selfattn"
    mixed["decoder_conf"]["selfattention_layer_type"] = "udps_selfattn"
    assert build_model(mixed).decoder.decoders[0].self_attn.alpha_form == "log"


def test_att_udps_overrides_per_site_keys_and_per_site_override_alone():
    cfg = tiny(att_udps=True)
    cfg["decoder_conf"]["src_attention_layer_type"] = "crossattn"
    assert all("udps" in name for name in attention_sites(build_model(cfg)).values())
    one = tiny()
    one["decoder_conf"]["src_attention_layer_type"] = "udps_crossattn"
    sites = attention_sites(build_model(one))
    udps = {p for p, n in sites.items() if "udps" in n}
    assert udps == {f"decoder.decoders.{i}.src_attn" for i in range(3)}


def test_udps_conf_reaches_only_udps_sites_and_accepted_keys():
    cfg = tiny("conformer", att_udps=True, udps_conf={"alpha_init": 7.0, "beta_init": 2.0, "pos_norm": "qp",
                                                      "alpha_form": "squared", "eps": 1e-5})
    model = build_model(cfg)
    enc_attn = model.encoder.encoders[0].self_attn
    dec_attn = model.decoder.decoders[0].self_attn
    assert enc_attn.pos_norm == "qp" and enc_attn.eps == 1e-5
    scales = model.udps_scales()
    assert torch.allclose(scales["encoder.encoders.0.self_attn.beta"], torch.full((2,), 2.0))
    assert torch.allclose(scales["decoder.decoders.2.src_attn.alpha"], torch.full((2,), 7.0))
    assert dec_attn.alpha_form == "squared" and not hasattr(dec_attn, "beta")
    # Only the decoder's self-attention is UDPS: udps_conf must not reach the plain sites.
    part = tiny(udps_conf={"alpha_init": 2.0, "beta_init": 1.0})
    part["decoder_conf"]["selfattention_layer_type"] = "udps_selfattn"
    model = build_model(part)
    assert torch.allclose(model.decoder.decoders[0].self_attn.alpha, torch.full((2,), 2.0))
    assert not hasattr(model.encoder.encoders[0].self_attn, "alpha")


@pytest.mark.parametrize("key,value,pattern", [
    ("encoder", "lstm", r"encoder 'lstm'; valid choices: conformer, transformer"),
    ("decoder", "rnn", r"decoder 'rnn'; valid choices: bitransformer, transformer"),
    ("cmvn", "utterance_cmvn", r"valid choices: global_cmvn"),
    ("ctc", "rnnt", r"valid choices: ctc"),
    ("model", "transducer", r"valid choices: asr_model"),
])
def test_unknown_names_list_valid_choices(key, value, pattern):
    with pytest.raises(ValueError, match=pattern):
        build_model(tiny(**{key: value}))


@pytest.mark.parametrize("section,key", [("model_conf", "ctc_wieght"), ("udps_conf", "alpha_int"),
                                         ("encoder_conf", "num_block"), ("decoder_conf", "attention_head"),
                                         ("ctc_conf", "blank"), ("cmvn_conf", "file")])
def test_unknown_keys_named_with_valid_keys(section, key):
    cfg = tiny()
    cfg.setdefault(section, {})[key] = 1
    if section == "cmvn_conf":
        cfg["cmvn"] = "global_cmvn"
    with pytest.raises(ValueError, match=rf"{key}.*valid keys: .*"):
        build_model(cfg)
    if section == "model_conf":
        with pytest.raises(ValueError, match="ctc_weight, ignore_id, length_normalized_loss, lsm_weight"):
            build_model(cfg)
    if section == "udps_conf":
        with pytest.raises(ValueError, match="alpha_form, alpha_init, alpha_per_head, beta_init, eps, pos_norm"):
            build_model(cfg)


def test_missing_dims_bad_att_udps_and_ignored_sections():
    with pytest.raises(ValueError, match="output_dim"):
        build_model({k: v for k, v in tiny().items() if k != "output_dim"})
    with pytest.raises(ValueError, match="att_udps"):
        build_model(tiny(att_udps="yes"))
    cfg = tiny(dataset_conf={"batch_conf": {}}, optim="adam", optim_conf={"lr": 1}, scheduler="warmuplr",
               grad_clip=5, accum_grad=1, max_epoch=1, tokenizer="char")
    assert build_model(cfg).vocab_size == 12


def test_cmvn_loaded_from_json(tmp_path):
    stats = tmp_path / "global_cmvn"
    stats.write_text(json.dumps({"mean_stat": [2.0] * 8, "var_stat": [8.0] * 8, "frame_num": 2}))
    model = build_model(tiny(cmvn="global_cmvn", cmvn_conf={"cmvn_file": str(stats), "is_json_cmvn": True}))
    cmvn = model.encoder.global_cmvn
    assert torch.allclose(cmvn.mean, torch.full((8,), 1.0)) and torch.allclose(cmvn.istd, torch.full((8,), 1 / 3 ** .5))
    with pytest.raises(ValueError, match=str(tmp_path / "nope")):
        build_model(tiny(cmvn="global_cmvn", cmvn_conf={"cmvn_file": str(tmp_path / "nope")}))


def test_config_not_modified():
    cfg = tiny(att_udps=True, udps_conf={"alpha_init": 3.0})
    before = copy.deepcopy(cfg)
    build_model(cfg)
    assert cfg == before


@pytest.mark.parametrize("key,name,family,valid", [
    ("src_attention_layer_type", "selfattn", None, "cosine_crossattn, crossattn, udps_crossattn"),
    ("src_attention_layer_type", "selfattn", "cosine", "cosine_crossattn, crossattn, udps_crossattn"),
    ("src_attention_layer_type", "cosine_selfattn", None, "cosine_crossattn, crossattn, udps_crossattn"),
    ("selfattention_layer_type", "cosine_crossattn", None, "cosine_selfattn, selfattn, udps_selfattn"),
    ("selfattention_layer_type", "rel_cosine_selfattn", None, "cosine_selfattn, selfattn, udps_selfattn")])
def test_a_decoder_site_refuses_another_kind_listing_its_choices(key, name, family, valid):
    """Issue 81 attack F4: a self type at the source-attention site (or a cross type at the self site) built and
    trained, then every attention decode failed (no memory_cache / no step cache); with att_family: cosine a
    written selfattn at the source site became cosine_selfattn. Refused by the one site check, naming the key and
    the site's valid choices only (not all nine types)."""
    from wenet_udps.config import validate_config
    from wenet_udps.utils.schema import ConfigError
    cfg = tiny(att_family=family)
    cfg["decoder_conf"][key] = name
    with pytest.raises(ConfigError, match=rf"decoder_conf.{key}: '{name}' .*valid choices: {valid}$"):
        build_model(cfg)
    with pytest.raises(ConfigError, match=rf"decoder_conf.{key}: '{name}'"):
        validate_config(cfg, "X", check_sites=True)


def test_the_encoder_site_lists_self_types_with_relative_positions():
    cfg = tiny(encoder_conf={"output_size": 16, "attention_heads": 2, "num_blocks": 1, "input_layer": "linear",
                             "selfattention_layer_type": "crossattn"})
    with pytest.raises(ValueError, match="encoder_conf.selfattention_layer_type: 'crossattn' is a cross-attention "
                                         "type; the enc_self site takes self-attention types, valid choices: "
                                         "cosine_selfattn, rel_cosine_selfattn, rel_selfattn, rel_udps_selfattn"):
        build_model(cfg)
