import math

import pytest
import torch

from wenet_udps.transformer.embedding import (POS_ENC_CLASSES, PositionalEncoding, RelPositionalEncoding,
                                              WhisperPositionalEncoding)

D = 8


def test_pe_table_follows_the_sinusoid_formula():
    pe = PositionalEncoding(d_model=D, dropout_rate=0.0, max_len=50).pe
    assert pe.shape == (1, 50, D)
    for t in (0, 1, 17, 49):
        for i in range(D // 2):
            angle = t / (10000 ** (2 * i / D))
            assert pe[0, t, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert pe[0, t, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def test_odd_d_model_is_supported():
    pe = PositionalEncoding(d_model=5, dropout_rate=0.0, max_len=10).pe
    assert pe.shape == (1, 10, 5)
    assert pe[0, 3, 4].item() == pytest.approx(math.sin(3 / 10000 ** (4 / 5)), abs=1e-6)


@pytest.mark.parametrize("name, max_len", [("abs_pos", 5000), ("rel_pos", 5000), ("abs_pos_whisper", 1500)])
def test_pe_buffer_is_saved_in_state_dict(name, max_len):
    """WeNet's buffer shapes: 5000 positions, Whisper's 1500."""
    module = POS_ENC_CLASSES[name](d_model=D, dropout_rate=0.1)
    state = module.state_dict()
    assert list(state) == ["pe"] and state["pe"].shape == (1, max_len, D)


def test_whisper_table_follows_its_formula():
    """Sines in the first half, cosines in the second, timescales 1 .. 10000 over d/2 - 1 steps."""
    pe = WhisperPositionalEncoding(d_model=D, dropout_rate=0.0, max_len=50).pe
    for t in (0, 1, 17, 49):
        for i in range(D // 2):
            angle = t / (10000 ** (i / (D // 2 - 1)))
            assert pe[0, t, i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert pe[0, t, D // 2 + i].item() == pytest.approx(math.cos(angle), abs=1e-5)


@pytest.mark.parametrize("d_model", [2, 5])
def test_whisper_table_refuses_an_odd_or_tiny_d_model(d_model):
    with pytest.raises(ValueError, match="abs_pos_whisper needs an even output_size >= 4, got " + str(d_model)):
        WhisperPositionalEncoding(d_model=d_model, dropout_rate=0.0, max_len=10)


def test_abs_pos_whisper_adds_the_unscaled_input_and_table():
    module = WhisperPositionalEncoding(d_model=D, dropout_rate=0.0, max_len=100).eval()
    x = torch.randn(2, 6, D)
    out, pos_emb = module(x, offset=3)
    assert torch.equal(out, x + module.pe[:, 3:9])
    assert torch.equal(pos_emb, module.pe[:, 3:9])
    short = WhisperPositionalEncoding(d_model=D, dropout_rate=0.0, max_len=10)
    assert torch.equal(short.position_encoding(4, 30), module.position_encoding(4, 30))


def test_no_pos_has_no_saved_state():
    assert list(POS_ENC_CLASSES["no_pos"](d_model=D, dropout_rate=0.1).state_dict()) == []


def test_abs_pos_adds_scaled_input_and_table():
    module = PositionalEncoding(d_model=D, dropout_rate=0.0, max_len=100).eval()
    x = torch.randn(2, 6, D)
    out, pos_emb = module(x, offset=3)
    assert torch.allclose(out, x * math.sqrt(D) + module.pe[:, 3:9])
    assert torch.equal(pos_emb, module.pe[:, 3:9])


def test_rel_pos_returns_scaled_input_and_table_apart():
    module = RelPositionalEncoding(d_model=D, dropout_rate=0.0, max_len=100).eval()
    x = torch.randn(2, 6, D)
    out, pos_emb = module(x, offset=4)
    assert torch.allclose(out, x * math.sqrt(D))
    assert torch.equal(pos_emb, module.pe[:, 4:10])


def test_position_encoding_streaming_offsets_match_full_sequence():
    module = RelPositionalEncoding(d_model=D, dropout_rate=0.0, max_len=100).eval()
    _, full = module(torch.zeros(1, 12, D))
    assert torch.equal(module.position_encoding(5, 4), full[:, 5:9])
    assert torch.equal(module.position_encoding(torch.tensor(5), 4), full[:, 5:9])
    per_utt = module.position_encoding(torch.tensor([0, 5]), 4)
    assert per_utt.shape == (2, 4, D)
    assert torch.equal(per_utt[1], full[0, 5:9]) and torch.equal(per_utt[0], full[0, 0:4])


def test_input_longer_than_the_table_gets_the_formula_positions():
    """Utterances past max_len frames (~200 s) encode instead of crashing; the saved buffer keeps its shape."""
    short = PositionalEncoding(d_model=D, dropout_rate=0.0, max_len=10)
    long = PositionalEncoding(d_model=D, dropout_rate=0.0, max_len=40)
    assert torch.equal(short.position_encoding(0, 25), long.position_encoding(0, 25))
    assert torch.equal(short.position_encoding(8, 12), long.position_encoding(8, 12))
    offsets = torch.tensor([0, 9])
    assert torch.equal(short.position_encoding(offsets, 20), long.position_encoding(offsets, 20))
    x = torch.randn(1, 30, D)
    assert torch.equal(short(x)[0], long(x)[0])
    assert short.pe.shape == (1, 10, D)
    with pytest.raises(ValueError, match=">= 0"):
        short.position_encoding(-1, 3)


def test_no_pos_passes_input_and_gives_zero_positions():
    module = POS_ENC_CLASSES["no_pos"](d_model=D, dropout_rate=0.0).eval()
    x = torch.randn(2, 5, D)
    out, pos_emb = module(x, offset=7)
    assert torch.equal(out, x)
    assert pos_emb.shape == (1, 5, D) and not bool(pos_emb.any())
    assert module.double().position_encoding(3, 4).dtype == torch.float64


@pytest.mark.parametrize("name", sorted(POS_ENC_CLASSES))
def test_forward_backward_shapes(name):
    module = POS_ENC_CLASSES[name](d_model=D, dropout_rate=0.1).train()
    x = torch.randn(3, 7, D, requires_grad=True)
    out, pos_emb = module(x)
    assert out.shape == (3, 7, D) and pos_emb.shape == (1, 7, D)
    out.sum().backward()
    assert x.grad is not None and bool(x.grad.abs().sum() > 0)
    assert module.position_encoding(2, 3).shape == (1, 3, D)


def test_constructor_is_keyword_only():
    with pytest.raises(TypeError):
        PositionalEncoding(D, 0.1)


@pytest.mark.parametrize("name", ["abs_pos", "abs_pos_whisper", "rel_pos"])
def test_positions_past_the_saved_table_cost_their_own_rows(name):
    """Issue 80 B: a stream asks for a chunk's positions at a growing offset; past ``max_len`` the encodings were
    computed from position 0 on every call (5.4 ms a chunk at 10 min of rel_pos). Now only the chunk's rows are
    computed, and they are the full table's rows bit for bit."""
    module = POS_ENC_CLASSES[name](d_model=64, dropout_rate=0.0, max_len=100)
    computed = []
    formula = module.table

    def counted(length, d_model, start=0):
        computed.append(length - start)
        return formula(length, d_model, start)

    module.table = counted
    full = formula(5000, 64)
    for offset in (90, 100, 1234, 4980):
        computed.clear()
        rows = module.position_encoding(offset, 20, apply_dropout=False)
        assert torch.equal(rows[0], full[offset:offset + 20])
        assert sum(computed) <= 20
