"""wenet_udps.decode.attention_maps: recorded weights are the ones the kernels use; each heat-map has its colour bar."""
import math
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from wenet_udps.decode.attention_maps import recording, row_entropy
from wenet_udps.kernels import dispatch
from wenet_udps.kernels import cosine as cosine_kernel
from wenet_udps.transformer import attention as attention_module, cosine_attention as cosine_module, \
    udps_attention as udps_module
from wenet_udps.model_builder import build_model
from wenet_udps.config import finalize_config
from tests.train.train_helpers import tiny_config, write_units


@pytest.mark.parametrize("family", ["scaled_dot", "udps", "cosine"])
def test_recorded_weights_reproduce_every_site_output(tmp_path, family):
    units = tmp_path / "units.txt"
    write_units(units)
    model = build_model(finalize_config(tiny_config(units, att_family=family, encoder="conformer"))).eval()
    outputs = {}
    for name, module in model.named_modules():
        if isinstance(module, attention_module.MultiHeadedAttention):
            # The value heads and the output before linear_out, to check out = weights @ v.
            module.register_forward_hook(lambda m, args, out, n=name: outputs.__setitem__(n, (m, args, out)))
    feats, lens = torch.randn(2, 90, 20), torch.tensor([90, 61])
    text, text_lens = torch.tensor([[3, 4, 5], [6, 7, -1]]), torch.tensor([3, 2])
    with torch.no_grad(), recording(model) as records:
        model(feats, lens, text, text_lens)
    assert set(records) == set(outputs) and len(records) == 3  # one block each: enc self, dec self, dec src
    for name, (module, args, out) in outputs.items():
        w = records[name][0].weights
        v = module._heads(module.linear_v, args[2])
        expected = module.linear_out((w @ v).transpose(1, 2).reshape(v.size(0), -1, module.h * module.d_k))
        torch.testing.assert_close(expected, out[0], atol=1e-5, rtol=1e-4, msg=name)
        rows = w.sum(-1)
        assert torch.all(((rows - 1).abs() < 1e-5) | (rows == 0))
    # The model runs normally again once the recording ends.
    assert attention_module.scaled_dot_attention is dispatch.scaled_dot_attention
    assert udps_module.udps_attention is dispatch.udps_attention
    assert udps_module.udps_attention_from_keys is dispatch.udps_attention_from_keys
    assert cosine_module.cosine_attention is cosine_kernel.cosine_attention


def test_entropy_of_uniform_and_one_hot_rows():
    w = torch.tensor([[[[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0]]]])
    torch.testing.assert_close(row_entropy(w), torch.tensor([[[math.log(4), 0.0]]]))


def test_every_heat_map_has_a_colour_bar():
    """Issue 48: the heat-maps had no colour scale."""
    import matplotlib.pyplot as plt

    from wenet_udps.decode.attention_maps import weight_grid
    maps = {f"encoder.encoders.{i}.self_attn": torch.rand(6, 6).softmax(-1) for i in range(3)}
    fig = weight_grid("udps", "utt1", maps)
    images = [image for ax in fig.axes for image in ax.images]
    assert len(images) == 3 and all(image.colorbar is not None for image in images)
    assert all(image.colorbar.ax.get_ylabel() == "weight" for image in images)
    plt.close(fig)


def test_recordings_in_threads_stay_apart_and_leave_other_threads_alone(tmp_path):
    """Issue 80, mechanism C: while threads record (each its own recording of one model), other threads running the
    same model compute as ever and record nothing; each recording holds what one thread alone records, and the
    kernel entries are the dispatch's again once every recording has ended (before, every thread's attention
    calls went into the one recording open, under the site another thread was in)."""
    units = tmp_path / "units.txt"
    write_units(units)
    model = build_model(finalize_config(tiny_config(units, att_udps=True, encoder="conformer"))).eval()
    feats, lens = torch.randn(2, 90, 20), torch.tensor([90, 61])
    text, text_lens = torch.tensor([[3, 4, 5], [6, 7, -1]]), torch.tensor([3, 2])
    with torch.no_grad():
        want_loss = model(feats, lens, text, text_lens)["loss"]
        with recording(model) as alone:
            model(feats, lens, text, text_lens)
    barrier = threading.Barrier(4)

    def run(i):
        barrier.wait()
        with torch.no_grad():
            if i % 2:
                return [model(feats, lens, text, text_lens)["loss"] for _ in range(3)]
            with recording(model) as records:
                for _ in range(3):
                    model(feats, lens, text, text_lens)
            return records

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads inside every forward
    try:
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(run, range(4)))
    finally:
        sys.setswitchinterval(interval)
    for i in (1, 3):
        assert all(torch.equal(loss, want_loss) for loss in got[i])
    for i in (0, 2):
        assert set(got[i]) == set(alone)
        for site, calls in alone.items():
            assert len(got[i][site]) == 3 * len(calls), site
            assert all(torch.equal(c.weights, calls[0].weights) for c in got[i][site]), site
    assert attention_module.scaled_dot_attention is dispatch.scaled_dot_attention
    assert udps_module.udps_attention is dispatch.udps_attention
    assert udps_module.udps_attention_from_keys is dispatch.udps_attention_from_keys
