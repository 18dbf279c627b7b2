import pytest
import torch

from wenet_udps.transformer.embedding import POS_ENC_CLASSES
from wenet_udps.transformer.subsampling import SUBSAMPLING_CLASSES
from wenet_udps.utils.mask import make_non_pad_mask

IDIM, ODIM = 20, 8
# registry name -> (rate, right context, output length for T input frames)
EXPECTED = {
    "linear": (1, 0, lambda t: t),
    "conv2d": (4, 6, lambda t: ((t - 1) // 2 - 1) // 2),
    "conv2d6": (6, 10, lambda t: ((t - 1) // 2 - 2) // 3),
    "conv2d8": (8, 14, lambda t: (((t - 1) // 2 - 1) // 2 - 1) // 2),
}


def build(name, pos="abs_pos", idim=IDIM):
    return SUBSAMPLING_CLASSES[name](idim=idim, odim=ODIM, dropout_rate=0.0,
                                     pos_enc_class=POS_ENC_CLASSES[pos](d_model=ODIM, dropout_rate=0.0))


def test_registry_is_complete():
    assert set(SUBSAMPLING_CLASSES) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("pos", sorted(POS_ENC_CLASSES))
def test_forward_backward_shapes(name, pos):
    module = build(name, pos).train()
    rate, right_context, out_len = EXPECTED[name]
    assert module.subsampling_rate == rate and module.right_context == right_context
    x = torch.randn(2, 50, IDIM, requires_grad=True)
    mask = make_non_pad_mask(torch.tensor([50, 31])).unsqueeze(1)
    y, pos_emb, y_mask = module(x, mask)
    assert y.shape == (2, out_len(50), ODIM)
    assert pos_emb.shape == (1, out_len(50), ODIM)
    assert y_mask.shape == (2, 1, out_len(50)) and y_mask.dtype == torch.bool
    y.sum().backward()
    assert bool(x.grad.abs().sum() > 0)
    assert module.position_encoding(3, 4).shape == (1, 4, ODIM)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_subsampled_mask_keeps_frames_whose_inputs_are_valid(name):
    rate, right_context, _ = EXPECTED[name]
    module = build(name)
    for length in (17, 30, 31, 45):
        mask = make_non_pad_mask(torch.tensor([length]), 50).unsqueeze(1)
        _, _, y_mask = module(torch.randn(1, 50, IDIM), mask)
        expected = [j * rate + right_context < length for j in range(y_mask.size(-1))]
        assert y_mask[0, 0].tolist() == expected


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_receptive_field_matches_rate_and_right_context(name):
    """Output frame j depends on input frames j*rate .. j*rate+right_context and no others."""
    rate, right_context, _ = EXPECTED[name]
    module = build(name, "no_pos").eval()
    x = torch.randn(1, 60, IDIM)
    mask = torch.ones(1, 1, 60, dtype=torch.bool)
    y, _, _ = module(x, mask)
    j = 2
    for frame, changes in ((j * rate + right_context, True), (j * rate + right_context + 1, False),
                           (j * rate, True), (j * rate - 1, False)):
        x2 = x.clone()
        x2[0, frame] += 1.0
        y2, _, _ = module(x2, mask)
        assert bool((y2[0, j] - y[0, j]).abs().max() > 1e-6) == changes, frame


def test_parameter_names_and_shapes_follow_wenet():
    idim = 80
    conv2d = {k: tuple(v.shape) for k, v in build("conv2d", idim=idim).state_dict().items()}
    assert conv2d["conv.0.weight"] == (ODIM, 1, 3, 3)
    assert conv2d["conv.2.weight"] == (ODIM, ODIM, 3, 3)
    assert conv2d["out.0.weight"] == (ODIM, ODIM * (((idim - 1) // 2 - 1) // 2))
    assert conv2d["pos_enc.pe"] == (1, 5000, ODIM)
    conv6 = {k: tuple(v.shape) for k, v in build("conv2d6", idim=idim).state_dict().items()}
    assert conv6["conv.2.weight"] == (ODIM, ODIM, 5, 5)
    assert conv6["linear.weight"] == (ODIM, ODIM * (((idim - 1) // 2 - 2) // 3))
    conv8 = {k: tuple(v.shape) for k, v in build("conv2d8", idim=idim).state_dict().items()}
    assert conv8["conv.4.weight"] == (ODIM, ODIM, 3, 3)
    assert conv8["linear.weight"] == (ODIM, ODIM * ((((idim - 1) // 2 - 1) // 2 - 1) // 2))
    linear = {k: tuple(v.shape) for k, v in build("linear", idim=idim).state_dict().items()}
    assert linear["out.0.weight"] == (ODIM, idim) and linear["out.1.weight"] == (ODIM,)


def test_too_few_feature_bins_is_a_clear_error():
    with pytest.raises(ValueError, match="input_size 10 is too small"):
        build("conv2d8", idim=10)
