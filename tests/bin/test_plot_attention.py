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
    with pytest.raises(ValueError, match="--utt nope: no such utterance among the 3 used of "):
        plot_attention.main(["--exp_dirs", dirs[0], "--checkpoint", "avg.pt", "--test_data", str(data),
                             "--utt", "nope", "--out_dir", str(tmp_path / "p2")])


@pytest.mark.parametrize("case", ["no such key", "empty list"])
def test_an_unknown_utt_or_an_empty_list_is_one_line_naming_it(tmp_path, monkeypatch, capsys, case):
    """Issue 47 case 24: both ended in `ValueError: utterance None not found` (a traceback). Now one line: the key
    and the list (exit 2), or the list's counts (exit 1, the one rule of wenet_udps.utils.counts)."""
    import json
    import sys

    import numpy as np
    import soundfile as sf

    from wenet_udps.utils import cli
    make_model_dir(tmp_path)
    data = tmp_path / "test.list"
    rows = []
    if case == "no such key":
        sf.write(str(tmp_path / "a.wav"), np.random.default_rng(0).standard_normal(8000).astype(np.float32) * 0.1,
                 8000)
        rows = [{"key": "a", "wav": str(tmp_path / "a.wav"), "txt": "ONE"}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(sys, "argv", ["prog", "--exp_dirs", str(tmp_path), "--checkpoint", "avg.pt", "--test_data",
                                      str(data), "--utt", "nosuchkey", "--out_dir", str(tmp_path / "plots")])
    with pytest.raises(SystemExit) as exit_info:
        cli.run_cli(plot_attention.main, "wenet_udps.bin.plot_attention")
    last = capsys.readouterr().err.strip().splitlines()[-1]
    if case == "no such key":
        assert exit_info.value.code == 2
        assert last == (f"wenet_udps.bin.plot_attention: error: --utt nosuchkey: no such utterance among the 1 "
                        f"used of {data}")
    else:
        assert exit_info.value.code == 1
        assert last == (f"wenet_udps.bin.plot_attention: error: plot_attention data {data}: 0 utterances used, 0 "
                        f"skipped (none): no usable utterance")
    assert not (tmp_path / "plots").exists()


def test_every_heat_map_has_a_colour_bar():
    """Issue 48: the heat-maps had no colour scale."""
    import matplotlib.pyplot as plt

    from wenet_udps.bin.plot_attention import weight_grid
    maps = {f"encoder.encoders.{i}.self_attn": torch.rand(6, 6).softmax(-1) for i in range(3)}
    fig = weight_grid("udps", "utt1", maps)
    images = [image for ax in fig.axes for image in ax.images]
    assert len(images) == 3 and all(image.colorbar is not None for image in images)
    assert all(image.colorbar.ax.get_ylabel() == "weight" for image in images)
    plt.close(fig)
