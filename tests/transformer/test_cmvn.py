import json

import pytest
import torch

from wenet_udps.transformer.cmvn import GlobalCMVN, load_cmvn_json


def write_stats(path, feats):
    stats = {"mean_stat": feats.sum(0).tolist(), "var_stat": (feats ** 2).sum(0).tolist(),
             "frame_num": feats.size(0)}
    path.write_text(json.dumps(stats))
    return path


def test_loaded_stats_normalise_features_to_zero_mean_unit_variance(tmp_path):
    feats = torch.randn(500, 6, dtype=torch.float64) * torch.arange(1, 7) + torch.arange(6) * 3.0
    mean, istd = load_cmvn_json(write_stats(tmp_path / "global_cmvn", feats))
    assert mean.dtype == torch.float32 and mean.shape == (6,)
    out = GlobalCMVN(mean, istd)(feats.float().unsqueeze(0))[0]
    assert torch.allclose(out.mean(0), torch.zeros(6), atol=1e-4)
    assert torch.allclose(out.std(0, unbiased=False), torch.ones(6), atol=1e-4)


def test_norm_var_false_only_subtracts_mean():
    cmvn = GlobalCMVN(torch.tensor([1.0, 2.0]), torch.tensor([10.0, 10.0]), norm_var=False)
    assert cmvn(torch.tensor([[[3.0, 3.0]]])).tolist() == [[[2.0, 1.0]]]


def test_constant_dimension_gets_floored_variance(tmp_path):
    feats = torch.cat([torch.randn(10, 1), torch.full((10, 1), 2.0)], dim=1).double()
    _, istd = load_cmvn_json(write_stats(tmp_path / "cmvn.json", feats))
    assert torch.isfinite(istd).all() and istd[1].item() >= 1e9


def test_buffers_are_saved_with_wenet_names():
    state = GlobalCMVN(torch.zeros(3), torch.ones(3)).state_dict()
    assert set(state) == {"mean", "istd"}


@pytest.mark.parametrize("missing", ["mean_stat", "var_stat", "frame_num"])
def test_missing_key_names_file_and_key(tmp_path, missing):
    stats = {"mean_stat": [1.0], "var_stat": [2.0], "frame_num": 1}
    del stats[missing]
    path = tmp_path / "bad_cmvn"
    path.write_text(json.dumps(stats))
    with pytest.raises(ValueError, match=f"bad_cmvn.*{missing}"):
        load_cmvn_json(path)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"mean_stat": [1], "var_stat": [1, 2], "frame_num": 3}',
                                     '{"mean_stat": [1], "var_stat": [1], "frame_num": 0}',
                                     '{"mean_stat": ["a"], "var_stat": [1], "frame_num": 3}'])
def test_malformed_stats_name_the_file(tmp_path, content):
    path = tmp_path / "broken_cmvn"
    path.write_text(content)
    with pytest.raises(ValueError, match="broken_cmvn"):
        load_cmvn_json(path)


def test_dimension_mismatch_is_reported():
    with pytest.raises(ValueError, match="3 dimensions"):
        GlobalCMVN(torch.zeros(2), torch.ones(2))(torch.zeros(1, 4, 3))


@pytest.mark.parametrize("content, msg", [
    ('{"mean_stat": [1, 2], "var_stat": [Infinity, 8], "frame_num": 2}', "must be finite numbers"),
    ('{"mean_stat": [1, 2], "var_stat": [NaN, 8], "frame_num": 2}', "must be finite numbers"),
    ('{"mean_stat": [4, 2], "var_stat": [2, 8], "frame_num": 2}', r"dimension 0 has a negative variance \(-3\)"),
])
def test_stats_that_would_zero_or_blow_up_a_feature_are_refused(tmp_path, content, msg):
    """Issue 29: an infinite variance gave istd 0 (the feature silently zeroed)."""
    from wenet_udps.utils.cmvn_stats import CmvnError
    path = tmp_path / "cmvn.json"
    path.write_text(content)
    with pytest.raises(CmvnError, match=rf"cmvn.json: .*{msg}"):
        load_cmvn_json(path)


def test_stats_of_another_feature_dimension_are_a_user_error(tmp_path):
    from wenet_udps.model_builder import build_model
    from wenet_udps.utils.cmvn_stats import CmvnError
    from tests.train.train_helpers import tiny_config, write_units
    write_units(tmp_path / "units.txt")
    path = write_stats(tmp_path / "cmvn.json", torch.randn(50, 80))
    config = dict(tiny_config(tmp_path / "units.txt"), input_dim=20, output_dim=10, cmvn="global_cmvn",
                  cmvn_conf={"cmvn_file": str(path)})
    with pytest.raises(CmvnError, match=r"cmvn.json holds stats of 80 dimensions, but the features have 20"):
        build_model(config)
