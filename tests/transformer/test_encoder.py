import json

import pytest
import torch

from tests.conftest import REFERENCE_JSON
from wenet_udps.model_builder import resolve_model_config
from wenet_udps.transformer.attention import ATTENTION_CLASSES, attention_classes
from wenet_udps.transformer.cmvn import GlobalCMVN
from wenet_udps.transformer.embedding import POS_ENC_CLASSES
from wenet_udps.transformer.encoder import ENCODER_CLASSES
from wenet_udps.transformer.positionwise_feed_forward import ACTIVATION_CLASSES
from wenet_udps.transformer.subsampling import SUBSAMPLING_CLASSES

IDIM = 20
SMALL = dict(output_size=16, attention_heads=2, linear_units=24, num_blocks=2)
SELF_ATTENTIONS = sorted(attention_classes("self"))


def build(name, **conf):
    return ENCODER_CLASSES[name](input_size=IDIM, **{**SMALL, **conf})


def _reference_configs():
    with open(REFERENCE_JSON, encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize("config_path", sorted(_reference_configs()))
def test_state_dict_matches_upstream_wenet(config_path):
    ref = _reference_configs()[config_path]
    config = ref["config"]
    encoder = ENCODER_CLASSES[config["encoder"]](input_size=ref["input_dim"], **config["encoder_conf"])
    expected = {k[len("encoder."):]: v for k, v in ref["state_dict"].items() if k.startswith("encoder.")}
    got = {k: list(v.shape) for k, v in encoder.state_dict().items()}
    assert got == expected


@pytest.mark.parametrize("name", sorted(ENCODER_CLASSES))
@pytest.mark.parametrize("input_layer", sorted(SUBSAMPLING_CLASSES))
@pytest.mark.parametrize("pos", sorted(POS_ENC_CLASSES))
def test_forward_backward_shapes(name, input_layer, pos):
    encoder = build(name, input_layer=input_layer, pos_enc_layer_type=pos, cnn_module_kernel=3) \
        if name == "conformer" else build(name, input_layer=input_layer, pos_enc_layer_type=pos)
    encoder.train()
    xs = torch.randn(2, 64, IDIM, requires_grad=True)
    out, mask = encoder(xs, torch.tensor([64, 40]))
    t_out = mask.size(-1)
    assert out.shape == (2, t_out, 16) and mask.shape == (2, 1, t_out) and mask.dtype == torch.bool
    assert bool(mask[0].all()) and not bool(mask[1].all())
    assert encoder.output_size() == 16
    out[mask.transpose(1, 2).expand_as(out)].sum().backward()
    assert bool(xs.grad[0].abs().sum() > 0)
    # Frames beyond a shorter utterance's length never reach its outputs.
    assert float(xs.grad[1, 40:].abs().sum()) == 0.0


@pytest.mark.parametrize("name", sorted(ENCODER_CLASSES))
@pytest.mark.parametrize("attention", SELF_ATTENTIONS)
def test_every_self_attention_type_runs(name, attention):
    encoder = build(name, selfattention_layer_type=attention).train()
    assert all(type(layer.self_attn) is ATTENTION_CLASSES[attention] for layer in encoder.encoders)
    xs = torch.randn(2, 30, IDIM, requires_grad=True)
    out, _ = encoder(xs, torch.tensor([30, 25]))
    out.sum().backward()
    assert bool(torch.isfinite(xs.grad).all()) and bool(xs.grad.abs().sum() > 0)


@pytest.mark.parametrize("name", sorted(ENCODER_CLASSES))
def test_padding_does_not_change_outputs(name):
    encoder = build(name).eval()
    xs = torch.randn(2, 48, IDIM)
    out, mask = encoder(xs, torch.tensor([48, 33]))
    alone, alone_mask = encoder(xs[1:, :33], torch.tensor([33]))
    n = alone.size(1)
    assert int(mask[1].sum()) == n
    assert torch.allclose(out[1, :n], alone[0], atol=1e-5)


def test_unknown_encoder_conf_key_lists_valid_keys():
    # The constructors' keyword-only signatures are the schema encoder_conf is checked against.
    with pytest.raises(ValueError, match=r"encoder_conf.cnn_kernel: unknown key \(did you mean 'cnn_module_kernel'"
                                         r"\?\); valid keys: .*cnn_module_kernel"):
        resolve_model_config({"encoder": "conformer", "encoder_conf": {"cnn_kernel": 15}})
    with pytest.raises(ValueError, match="encoder_conf.macaron_style: unknown key"):  # conformer-only key
        resolve_model_config({"encoder": "transformer", "encoder_conf": {"macaron_style": True}})
    with pytest.raises(ValueError, match="encoder_conf.input_size: unknown key"):  # the builder supplies it
        resolve_model_config({"encoder": "transformer", "encoder_conf": {"input_size": 8}})


@pytest.mark.parametrize("key, value, valid", [
    ("input_layer", "conv3d", "conv2d"), ("pos_enc_layer_type", "sin", "rel_pos"),
    ("selfattention_layer_type", "fancy", "rel_udps_selfattn"), ("activation_type", "mish", "swish"),
    ("selfattention_layer_type", "crossattn", "udps_selfattn"), ("cnn_module_norm", "group_norm", "layer_norm")])
def test_unknown_registry_names_are_value_errors(key, value, valid):
    with pytest.raises(ValueError, match=valid):
        build("conformer", **{key: value})


def test_attention_conf_is_forwarded_and_checked():
    encoder = build("transformer", selfattention_layer_type="udps_selfattn", attention_conf={"alpha_init": 3.0})
    assert torch.allclose(encoder.encoders[1].self_attn.alpha, torch.full((2,), 3.0))
    with pytest.raises(ValueError, match="encoder_conf.attention_conf.alpha_init: unknown key"):
        resolve_model_config({"encoder": "transformer", "encoder_conf": {
            "selfattention_layer_type": "selfattn", "attention_conf": {"alpha_init": 3.0}}})


def test_conformer_optional_parts_follow_wenet_layout():
    plain = build("conformer", macaron_style=False, use_cnn_module=False)
    keys = set(plain.state_dict())
    assert not any("feed_forward_macaron" in k or "conv_module" in k or "norm_final" in k or "norm_conv" in k
                   for k in keys)
    layer_norm = build("conformer", cnn_module_norm="layer_norm", causal=True, cnn_module_kernel=4)
    conv = layer_norm.encoders[0].conv_module
    assert isinstance(conv.norm, torch.nn.LayerNorm) and conv.depthwise_conv.weight.shape == (16, 1, 4)
    out, _ = layer_norm(torch.randn(1, 30, IDIM), torch.tensor([30]))
    assert bool(torch.isfinite(out).all())
    with pytest.raises(ValueError, match="odd"):
        build("conformer", cnn_module_kernel=4)
    with pytest.raises(ValueError, match="positionwise_conv_kernel_size"):
        build("conformer", positionwise_conv_kernel_size=3)


def test_post_norm_transformer_has_no_final_norm_applied():
    encoder = build("transformer", normalize_before=False).eval()
    with torch.no_grad():
        encoder.after_norm.weight.fill_(5.0)
    with torch.no_grad():
        out, _ = encoder(torch.randn(1, 30, IDIM), torch.tensor([30]))
    # The last block ends with norm2 (unit scale), so after_norm's weight of 5 must not show.
    assert float(out.std(-1).mean()) < 2.0


def test_global_cmvn_is_applied_first():
    mean, istd = torch.randn(IDIM), torch.rand(IDIM) + 0.5
    with_cmvn = build("conformer", global_cmvn=GlobalCMVN(mean, istd)).eval()
    without = build("conformer").eval()
    without.load_state_dict({k: v for k, v in with_cmvn.state_dict().items() if not k.startswith("global_cmvn")})
    xs = torch.randn(1, 30, IDIM)
    assert torch.allclose(with_cmvn(xs, torch.tensor([30]))[0], without((xs - mean) * istd, torch.tensor([30]))[0],
                          atol=1e-5)
    assert {"global_cmvn.mean", "global_cmvn.istd"} <= set(with_cmvn.state_dict())


def test_dynamic_chunk_model_decodes_with_full_context_in_eval_by_default():
    encoder = build("transformer", use_dynamic_chunk=True).eval()
    xs = torch.randn(1, 80, IDIM)
    lens = torch.tensor([80])
    default = encoder(xs, lens)[0]
    assert torch.equal(default, encoder(xs, lens, decoding_chunk_size=-1)[0])
    assert not torch.allclose(default, encoder(xs, lens, decoding_chunk_size=2)[0], atol=1e-4)


def test_gradient_checkpointing_gives_the_same_gradients():
    torch.manual_seed(1)
    base = build("conformer", dropout_rate=0.0, positional_dropout_rate=0.0).train()
    ckpt = build("conformer", dropout_rate=0.0, positional_dropout_rate=0.0, gradient_checkpointing=True).train()
    ckpt.load_state_dict(base.state_dict())
    xs = torch.randn(2, 30, IDIM)
    lens = torch.tensor([30, 22])
    base(xs, lens)[0].sum().backward()
    ckpt(xs, lens)[0].sum().backward()
    for (name, p), q in zip(base.named_parameters(), ckpt.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-5), name


@pytest.mark.parametrize("normalize_before", [True, False])
@pytest.mark.parametrize("macaron_style", [True, False])
@pytest.mark.parametrize("use_cnn_module", [True, False])
def test_conformer_layer_options_forward_backward(normalize_before, macaron_style, use_cnn_module):
    encoder = build("conformer", normalize_before=normalize_before, macaron_style=macaron_style,
                    use_cnn_module=use_cnn_module, cnn_module_kernel=3).train()
    layer = encoder.encoders[0]
    assert layer.ff_scale == (0.5 if macaron_style else 1.0)
    xs = torch.randn(2, 30, IDIM, requires_grad=True)
    out, _ = encoder(xs, torch.tensor([30, 21]))
    # A random projection: the sum of a LayerNorm output (post-norm) would be constant.
    (out * torch.randn_like(out)).sum().backward()
    assert bool(torch.isfinite(xs.grad).all()) and bool(xs.grad.abs().sum() > 0)
    used = [n for n, p in encoder.named_parameters() if p.grad is not None and bool(p.grad.abs().sum() > 0)]
    # Every parameter the configuration builds takes part (after_norm only with pre-norm).
    unused = {n for n, _ in encoder.named_parameters()} - set(used)
    assert unused == (set() if normalize_before else {"after_norm.weight", "after_norm.bias"})


@pytest.mark.parametrize("name", sorted(ENCODER_CLASSES))
@pytest.mark.parametrize("attention", SELF_ATTENTIONS)
def test_fully_masked_padding_rows_stay_finite(name, attention):
    """Chunks without left context that hold only padding give all-False mask rows: no NaN may appear."""
    encoder = build(name, selfattention_layer_type=attention, use_dynamic_chunk=True).eval()
    xs = torch.randn(2, 60, IDIM, requires_grad=True)
    out, mask = encoder(xs, torch.tensor([60, 20]), decoding_chunk_size=2, num_decoding_left_chunks=0)
    assert bool(torch.isfinite(out).all())
    out[mask.transpose(1, 2).expand_as(out)].sum().backward()
    assert bool(torch.isfinite(xs.grad).all())


@pytest.mark.parametrize("activation", sorted(ACTIVATION_CLASSES))
def test_every_activation_type_is_used(activation):
    encoder = build("conformer", activation_type=activation)
    layer = encoder.encoders[0]
    expected = ACTIVATION_CLASSES[activation]
    assert type(layer.feed_forward.activation) is expected and type(layer.conv_module.activation) is expected
    out, _ = encoder(torch.randn(1, 20, IDIM), torch.tensor([20]))
    assert bool(torch.isfinite(out).all())
