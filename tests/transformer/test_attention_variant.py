"""Adding an attention variant touches one file: a class with its facts, registered with ``register_attention``.

The variant below is declared and registered here only (nothing else in the package is edited), then a config
naming it is validated, a model with it trains one step through ``wenet_udps.bin.train`` and decodes through
``wenet_udps.bin.recognize``, and the run label and ``att_udps`` wiring come out right.
"""
import json

import pytest
import torch
import yaml

from tests.train.train_helpers import make_experiment, train_cmd
from wenet_udps.bin import train
from wenet_udps.model_info import attention_label, site_types
from wenet_udps.decode.data_list import decode_dataset, model_from_checkpoint
from wenet_udps.config import load_config, validate_config
from wenet_udps.model_builder import attention_sites
from wenet_udps.text import init_tokenizer
from wenet_udps.transformer.attention import ATTENTION_CLASSES, register_attention
from wenet_udps.transformer.udps_attention import UDPSMultiHeadedAttention
from wenet_udps.utils.schema import ConfigError


class SharpUDPSAttention(UDPSMultiHeadedAttention):
    """UDPS whose effective scale is ``sharpness`` times alpha (an option of its own, reached by udps_conf)."""

    name = "sharp_udps_selfattn"
    counterpart = None   # udps_selfattn is UDPS's type of the site: a variant is chosen by its type only

    def __init__(self, *, n_head: int, n_feat: int, dropout_rate: float = 0.0, alpha_init: float = 10.0,
                 sharpness: float = 1.0):
        super().__init__(n_head=n_head, n_feat=n_feat, dropout_rate=dropout_rate, alpha_init=alpha_init)
        self.sharpness = sharpness

    def _effective(self, param: torch.Tensor) -> torch.Tensor:
        return super()._effective(param) * self.sharpness


@pytest.fixture
def sharp_variant():
    register_attention(SharpUDPSAttention)
    yield SharpUDPSAttention
    del ATTENTION_CLASSES[SharpUDPSAttention.name]


def _with_variant(config):
    config = dict(config, udps_conf={"alpha_init": 3.0, "sharpness": 2.0})
    config["encoder_conf"] = dict(config["encoder_conf"], selfattention_layer_type="sharp_udps_selfattn")
    return config


def test_config_keys_of_an_unregistered_variant_are_rejected(tmp_path, fsdd_dir):
    config = _with_variant(make_experiment(tmp_path, fsdd_dir, att_udps=False)["config"])
    with pytest.raises(ConfigError, match="udps_conf.sharpness: unknown key"):
        validate_config(config)


def test_registered_variant_builds_trains_and_decodes(tmp_path, fsdd_dir, sharp_variant):
    exp = make_experiment(tmp_path, fsdd_dir, n_train=4, n_cv=2, att_udps=False, max_epoch=1)
    config = _with_variant(exp["config"])
    # The variant's own option is a valid udps_conf key now; an att_udps that makes the site UDPS keeps the variant.
    for att_udps, label in ((None, "udps_enc_self"), ("enc_self", "udps_enc_self"), (True, "udps")):
        types = site_types(validate_config(dict(config, att_udps=att_udps)))
        assert types["enc_self"] == ["sharp_udps_selfattn"]
        assert attention_label(types) == label
    config = dict(config, att_udps="enc_self")

    exp["conf"].write_text(yaml.safe_dump(config), encoding="utf-8")
    model_dir = tmp_path / "exp"
    train.main(train_cmd(exp, model_dir)[3:])
    trained = load_config(str(model_dir / "train.yaml"))
    model = model_from_checkpoint(trained, str(model_dir / "final.pt"))
    sites = attention_sites(model)
    assert sites["encoder.encoders.0.self_attn"] == "sharp_udps_selfattn"
    attn = model.encoder.encoders[0].self_attn
    assert attn.sharpness == 2.0
    # One optimizer step moved alpha away from its initial value (3.0), and the scale reported is 2 * alpha.
    assert not torch.allclose(attn.alpha, torch.full_like(attn.alpha, 3.0))
    torch.testing.assert_close(model.udps_scales()["encoder.encoders.0.self_attn.alpha"].flatten(),
                               (2.0 * attn.alpha).detach().flatten(), check_dtype=False)

    modes = ["ctc_greedy_search", "attention"]
    results, _ = decode_dataset(model, init_tokenizer(trained), trained, str(exp["cv"]), modes=modes,
                                batch_size=2, beam_size=2, progress=False)
    keys = {json.loads(line)["key"] for line in exp["cv"].read_text().splitlines()}
    assert set(results) == set(modes) and all(set(results[m]) == keys for m in modes)
