import pytest
import yaml

from wenet_udps.config import apply_overrides, finalize_config
from tests.train.train_helpers import tiny_config, write_units


@pytest.fixture
def config(tmp_path):
    units = tmp_path / "units.txt"
    write_units(units)
    return tiny_config(units)


def test_override_sets_nested_value_and_keeps_original(config):
    out = apply_overrides(config, ["optim_conf.lr=0.01", "encoder_conf.num_blocks=3", "att_udps=false"])
    assert out["optim_conf"]["lr"] == 0.01 and out["encoder_conf"]["num_blocks"] == 3 and out["att_udps"] is False
    assert config["optim_conf"]["lr"] == 0.002


def test_bad_key_lists_valid_keys_at_that_level(config):
    with pytest.raises(ValueError) as e:
        apply_overrides(config, ["encoder_conf.num_blokcs=3"])
    msg = str(e.value)
    assert "num_blokcs" in msg and "num_blocks" in msg and "output_size" in msg and "encoder_conf" in msg
    with pytest.raises(ValueError, match="valid keys: .*accum_grad"):
        apply_overrides(config, ["nonexistent=1"])


def test_bad_value_type_rejected(config):
    with pytest.raises(ValueError, match="encoder_conf.num_blocks.*int"):
        apply_overrides(config, ["encoder_conf.num_blocks=two"])
    with pytest.raises(ValueError, match="int"):
        apply_overrides(config, ["encoder_conf.num_blocks=2.5"])
    with pytest.raises(ValueError, match="bool"):
        apply_overrides(config, ["att_udps=1"])
    with pytest.raises(ValueError, match="key.path=value"):
        apply_overrides(config, ["att_udps"])


def test_float_accepts_int_and_exponent_strings(config):
    out = apply_overrides(config, ["optim_conf.lr=1e-3", "grad_clip=4"])
    assert out["optim_conf"]["lr"] == pytest.approx(1e-3) and isinstance(out["grad_clip"], float)


def test_optional_keys_can_be_added_with_checked_type(config):
    out = apply_overrides(config, ["udps_conf.alpha_init=12", "save_interval=100"])
    assert out["udps_conf"] == {"alpha_init": 12.0} and out["save_interval"] == 100
    with pytest.raises(ValueError, match="float"):
        apply_overrides(config, ["udps_conf.alpha_init=big"])
    with pytest.raises(ValueError, match="alpha_form"):
        apply_overrides(config, ["udps_conf.alpha_fom=linear"])


def test_finalize_sets_dims_and_absolute_paths(config, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config["tokenizer_conf"]["symbol_table_path"] = "units.txt"
    out = finalize_config(config)
    assert out["input_dim"] == 20
    assert out["output_dim"] == len((tmp_path / "units.txt").read_text().splitlines())
    assert out["tokenizer_conf"]["symbol_table_path"] == str(tmp_path / "units.txt")
    yaml.safe_dump(out)
