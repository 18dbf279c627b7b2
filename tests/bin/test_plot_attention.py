"""wenet_udps.bin.plot_attention: recorded weights are the ones the kernels use; both plots are written."""
import math

import pytest
import torch

from wenet_udps.bin import plot_attention
from wenet_udps.bin.plot_attention import recording, row_entropy
from wenet_udps.model_builder import build_model
from wenet_udps.config import finalize_config
from tests.bin.test_recognize_export import make_model_dir
from tests.train.train_helpers import tiny_config, write_data_list, write_units


@pytest.mark.parametrize("att_udps", [False, True], ids=["scaled_dot", "udps"])
def test_recorded_weights_reproduce_every_site_output(tmp_path, att_udps):
    units = tmp_path / "units.txt"
    write_units(units)
    model = build_model(finalize_config(tiny_config(units, att_udps=att_udps, encoder="conformer"))).eval()
    outputs = {}
    for name, module in model.named_modules():
        if isinstance(module, plot_attention.attention_module.MultiHeadedAttention):
            # The value heads and the output before linear_out, to check out = weights @ v.
            module.register_forward_hook(lambda m, args, out, n=name: outputs.__setitem__(n, (m, args, out)))
    feats, lens = torch.randn(2, 90, 20), torch.tensor([90, 61])
    text, text_lens = torch.tensor([[3, 4, 5], [6, 7, -1]]), torch.tensor([3, 2])
    with torch.no_grad(), recording(model) as records:
        model(feats, lens, text, text_lens)
    assert set(records) == set(outputs) and len(records) == 3  # one block each: enc self, dec self, dec src
    for name, (module, args, out) in outputs.items():
        w = records[name][0]
        v = module._heads(module.linear_v, args[2])
        expected = module.linear_out((w @ v).transpose(1, 2).reshape(v.size(0), -1, module.h * module.d_k))
        torch.testing.assert_close(expected, out[0], atol=1e-5, rtol=1e-4, msg=name)
        rows = w.sum(-1)
        assert torch.all(((rows - 1).abs() < 1e-5) | (rows == 0))
    # The model runs normally again once the recording ends.
    assert plot_attention.attention_module.udps_attention.__module__ == "wenet_udps.kernels.dispatch"


def test_entropy_of_uniform_and_one_hot_rows():
    w = torch.tensor([[[[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0]]]])
    torch.testing.assert_close(row_entropy(w), torch.tensor([[[math.log(4), 0.0]]]))


def test_main_writes_one_grid_per_experiment_and_the_entropy_chart(tmp_path, fsdd_dir):
    dirs = []
    for name, udps in (("sd", False), ("udps", True)):
        (tmp_path / name).mkdir()
        make_model_dir(tmp_path / name, att_udps=udps, encoder="conformer")
        dirs.append(str(tmp_path / name))
    data = tmp_path / "test.list"
    items = write_data_list(fsdd_dir, data, 3)
    plot_attention.main(["--exp_dirs", *dirs, "--checkpoint", "avg.pt", "--test_data", str(data),
                         "--utt", items[1]["key"], "--out_dir", str(tmp_path / "plots")])
    for png in ("attention_sd.png", "attention_udps.png", "attention_entropy.png"):
        assert (tmp_path / "plots" / png).stat().st_size > 5000
    with pytest.raises(ValueError, match="utterance 'nope' not found"):
        plot_attention.main(["--exp_dirs", dirs[0], "--checkpoint", "avg.pt", "--test_data", str(data),
                             "--utt", "nope", "--out_dir", str(tmp_path / "p2")])
