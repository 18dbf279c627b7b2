"""U2 streaming: chunk-by-chunk encoding with caches equals the full forward under the matching chunk mask."""
import pytest
import torch

from wenet_udps.transformer.cmvn import GlobalCMVN
from wenet_udps.transformer.encoder import ENCODER_CLASSES

IDIM, D, HEADS, BLOCKS, KERNEL = 16, 16, 2, 2, 5

CASES = [
    ("transformer", "selfattn", "abs_pos", "conv2d"),
    ("transformer", "udps_selfattn", "abs_pos", "conv2d"),
    ("conformer", "rel_selfattn", "rel_pos", "conv2d"),
    ("conformer", "rel_udps_selfattn", "rel_pos", "conv2d"),
    ("conformer", "rel_udps_selfattn", "rel_pos", "conv2d6"),
    ("conformer", "udps_selfattn", "no_pos", "linear"),
    ("transformer", "udps_selfattn", "rel_pos", "conv2d8"),
]


def build(name, attention, pos, input_layer, **extra):
    conf = dict(output_size=D, attention_heads=HEADS, linear_units=24, num_blocks=BLOCKS,
                selfattention_layer_type=attention, pos_enc_layer_type=pos, input_layer=input_layer,
                use_dynamic_chunk=True, **extra)
    if name == "conformer":
        conf.update(causal=True, cnn_module_kernel=KERNEL)
    encoder = ENCODER_CLASSES[name](input_size=IDIM, **conf).double().eval()
    # Non-trivial batch-norm statistics, so the conv path is exercised with realistic values.
    for module in encoder.modules():
        if isinstance(module, torch.nn.BatchNorm1d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    return encoder


@pytest.mark.parametrize("name, attention, pos, input_layer", CASES)
@pytest.mark.parametrize("chunk, left", [(4, -1), (4, 1), (3, 2), (1, 0)])
def test_chunk_by_chunk_equals_masked_full_forward(name, attention, pos, input_layer, chunk, left):
    encoder = build(name, attention, pos, input_layer)
    xs = torch.randn(1, 101, IDIM, dtype=torch.float64)
    with torch.no_grad():
        full, full_mask = encoder(xs, torch.tensor([101]), decoding_chunk_size=chunk, num_decoding_left_chunks=left)
        streamed, mask = encoder.forward_chunk_by_chunk(xs, chunk, left)
    assert streamed.shape == full.shape and mask.shape == full_mask.shape
    assert torch.allclose(streamed, full, atol=1e-6, rtol=0), (streamed - full).abs().max()


@pytest.mark.parametrize("name, attention, pos, input_layer", CASES[:4])
def test_chunk_mask_matters(name, attention, pos, input_layer):
    """The equality above is not trivial: the full-context output differs from the chunked one."""
    encoder = build(name, attention, pos, input_layer)
    xs = torch.randn(1, 99, IDIM, dtype=torch.float64)
    with torch.no_grad():
        full_context, _ = encoder(xs, torch.tensor([99]), decoding_chunk_size=-1)
        streamed, _ = encoder.forward_chunk_by_chunk(xs, 4, -1)
    assert not torch.allclose(streamed, full_context, atol=1e-3)


def test_non_causal_convolution_cannot_stream_exactly():
    encoder = build("conformer", "rel_selfattn", "rel_pos", "conv2d")
    non_causal = ENCODER_CLASSES["conformer"](
        input_size=IDIM, output_size=D, attention_heads=HEADS, linear_units=24, num_blocks=BLOCKS,
        use_dynamic_chunk=True, cnn_module_kernel=KERNEL).double().eval()
    assert encoder.encoders[0].conv_module.lorder == KERNEL - 1 and non_causal.encoders[0].conv_module.lorder == 0
    xs = torch.randn(1, 99, IDIM, dtype=torch.float64)
    with torch.no_grad():
        full, _ = non_causal(xs, torch.tensor([99]), decoding_chunk_size=4)
        streamed, _ = non_causal.forward_chunk_by_chunk(xs, 4)
    assert not torch.allclose(streamed, full, atol=1e-3)


def test_static_chunk_model_and_cmvn_stream_exactly():
    cmvn = GlobalCMVN(torch.randn(IDIM, dtype=torch.float64), torch.rand(IDIM, dtype=torch.float64) + 0.5)
    encoder = ENCODER_CLASSES["conformer"](
        input_size=IDIM, output_size=D, attention_heads=HEADS, linear_units=24, num_blocks=BLOCKS,
        static_chunk_size=5, causal=True, cnn_module_kernel=KERNEL, global_cmvn=cmvn,
        selfattention_layer_type="rel_udps_selfattn").double().eval()
    xs = torch.randn(1, 90, IDIM, dtype=torch.float64)
    with torch.no_grad():
        full, _ = encoder(xs, torch.tensor([90]), num_decoding_left_chunks=1)
        streamed, _ = encoder.forward_chunk_by_chunk(xs, 5, 1)
    assert torch.allclose(streamed, full, atol=1e-6, rtol=0)


def test_forward_chunk_cache_shapes():
    encoder = build("conformer", "rel_udps_selfattn", "rel_pos", "conv2d")
    chunk, left = 4, 2
    window = (chunk - 1) * 4 + 7
    att_cache = torch.zeros((0, 0, 0, 0), dtype=torch.float64)
    cnn_cache = torch.zeros((0, 0, 0, 0), dtype=torch.float64)
    offset = 0
    with torch.no_grad():
        for step in range(4):
            xs = torch.randn(1, window, IDIM, dtype=torch.float64)
            out, att_cache, cnn_cache = encoder.forward_chunk(xs, offset, chunk * left, att_cache, cnn_cache)
            offset += out.size(1)
            assert out.shape == (1, chunk, D)
            assert att_cache.shape == (BLOCKS, HEADS, min((step + 1) * chunk, chunk * left), 2 * D // HEADS)
            assert cnn_cache.shape == (BLOCKS, 1, D, KERNEL - 1)
    transformer = build("transformer", "selfattn", "abs_pos", "conv2d")
    with torch.no_grad():
        _, att_cache, cnn_cache = transformer.forward_chunk(torch.randn(1, window, IDIM, dtype=torch.float64), 0, -1)
    assert att_cache.shape == (BLOCKS, HEADS, chunk, 2 * D // HEADS) and cnn_cache.size(0) == BLOCKS
    assert cnn_cache.numel() == 0


def test_streaming_errors_are_clear():
    encoder = build("transformer", "selfattn", "abs_pos", "conv2d")
    with pytest.raises(ValueError, match="decoding_chunk_size"):
        encoder.forward_chunk_by_chunk(torch.randn(1, 40, IDIM, dtype=torch.float64), 0)
    with pytest.raises(ValueError, match="one utterance"):
        encoder.forward_chunk(torch.randn(2, 40, IDIM, dtype=torch.float64), 0, -1)
    full_context = ENCODER_CLASSES["transformer"](input_size=IDIM, output_size=D, attention_heads=HEADS,
                                                  linear_units=24, num_blocks=1)
    with pytest.raises(ValueError, match="use_dynamic_chunk"):
        full_context.forward_chunk_by_chunk(torch.randn(1, 40, IDIM), 4)
