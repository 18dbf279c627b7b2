
import pytest
import torch

from wenet_udps.model_builder import build_model
from wenet_udps.utils.common import IGNORE_ID

V, F = 10, 8


pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_config(encoder="transformer", decoder="transformer", input_layer="conv2d", **model_conf):
    enc_conf = dict(output_size=16, attention_heads=2, linear_units=32, num_blocks=2, dropout_rate=0.0,
                    positional_dropout_rate=0.0, input_layer=input_layer)
    if encoder == "conformer":
        enc_conf.update(cnn_module_kernel=3, causal=True)
    dec_conf = dict(attention_heads=2, linear_units=32, num_blocks=2, dropout_rate=0.0, positional_dropout_rate=0.0)
    if decoder == "bitransformer":
        dec_conf["r_num_blocks"] = 1
    return {"input_dim": F, "output_dim": V, "encoder": encoder, "encoder_conf": enc_conf, "decoder": decoder,
            "decoder_conf": dec_conf, "model_conf": dict(ctc_weight=0.3, lsm_weight=0.0, **model_conf),
            "tokenizer_conf": {"special_tokens": {"<blank>": 0, "<unk>": 1, "<sos>": 2, "<eos>": 2}}}


def batch(b=3, t=40):
    speech = torch.randn(b, t, F)
    lengths = torch.tensor([t] + [t - 9 * i for i in range(1, b)])
    text = torch.tensor([[3, 4, 5, 6], [7, 8, IGNORE_ID, IGNORE_ID], [9, IGNORE_ID, IGNORE_ID, IGNORE_ID]])[:b]
    text_lengths = (text != IGNORE_ID).sum(1)
    return speech, lengths, text, text_lengths


@pytest.mark.parametrize("ctc_weight", [0.0, 0.3, 1.0])
def test_forward_losses_and_branches(ctc_weight):
    model = build_model(tiny_config() | {"model_conf": {"ctc_weight": ctc_weight}})
    out = model(*batch())
    assert set(out) == {"loss", "loss_ctc", "loss_att", "th_accuracy"}
    assert (out["loss_ctc"] is None) == (ctc_weight == 0.0)
    assert (out["loss_att"] is None) == (ctc_weight == 1.0)
    if 0.0 < ctc_weight < 1.0:
        expected = ctc_weight * out["loss_ctc"] + (1 - ctc_weight) * out["loss_att"]
        assert torch.allclose(out["loss"], expected)
        assert 0.0 <= float(out["th_accuracy"]) <= 1.0
    out["loss"].backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_sos_eos_from_special_tokens_and_default():
    assert (build_model(tiny_config()).sos, build_model(tiny_config()).eos) == (2, 2)
    cfg = tiny_config()
    cfg.pop("tokenizer_conf")
    model = build_model(cfg)
    assert (model.sos, model.eos) == (V - 1, V - 1)


def test_bitransformer_reverse_weight_changes_loss():
    cfg = tiny_config(decoder="bitransformer", reverse_weight=0.0)
    torch.manual_seed(1)
    m0 = build_model(cfg).eval()
    cfg["model_conf"]["reverse_weight"] = 0.5
    m1 = build_model(cfg).eval()
    m1.load_state_dict(m0.state_dict())
    data = batch()
    l0, l1 = m0(*data)["loss_att"], m1(*data)["loss_att"]
    assert not torch.allclose(l0, l1)


def test_udps_scales_lists_every_udps_attention():
    cfg = tiny_config(encoder="conformer") | {"att_udps": True, "udps_conf": {"alpha_init": 3.0}}
    scales = build_model(cfg).udps_scales()
    # 2 encoder blocks (alpha + beta) + 2 decoder blocks x (self + src) alpha
    assert len(scales) == 2 * 2 + 2 * 2
    assert torch.allclose(scales["encoder.encoders.0.self_attn.alpha"], torch.full((2,), 3.0))
    assert torch.allclose(scales["encoder.encoders.1.self_attn.beta"], torch.full((2,), 5.0))
    assert "decoder.decoders.1.src_attn.alpha" in scales
    assert build_model(tiny_config()).udps_scales() == {}


@pytest.mark.parametrize("decoder", ["transformer", "bitransformer"])
def test_decode_methods_agree(decoder):
    model = build_model(tiny_config(decoder=decoder)).eval()
    speech, lengths, _, _ = batch()
    methods = ["ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring"]
    res1 = model.decode(methods, speech, lengths, beam_size=1)
    assert list(res1) == methods and all(len(r) == 3 for r in res1.values())
    for g, p in zip(res1["ctc_greedy_search"], res1["ctc_prefix_beam_search"]):
        assert g.tokens == p.tokens and g.score == pytest.approx(p.score, abs=1e-4)
    rw = 0.3 if decoder == "bitransformer" else 0.0
    res4 = model.decode(methods, speech, lengths, beam_size=4, ctc_weight=0.5, reverse_weight=rw)
    for prefix, resc in zip(res4["ctc_prefix_beam_search"], res4["attention_rescoring"]):
        assert resc.tokens in prefix.nbest
        assert sorted(map(tuple, resc.nbest)) == sorted(map(tuple, prefix.nbest))
    # Rescoring score = decoder log-prob (mixed directions) + ctc_weight * CTC prefix score, checked directly.
    prefix, resc = res4["ctc_prefix_beam_search"][0], res4["attention_rescoring"][0]
    with torch.no_grad():
        enc, _ = model.encoder(speech[:1], lengths[:1])
    hyp = resc.tokens
    ys = torch.tensor([[model.sos] + hyp])
    with torch.no_grad():
        l2r, r2l = model.forward_attention_decoder(ys, torch.tensor([len(hyp) + 1]), enc, rw)
    idx = hyp + [model.eos]
    expected = float(sum(l2r[0, i, k] for i, k in enumerate(idx)))
    if rw:
        r_idx = hyp[::-1] + [model.eos]
        expected = (1 - rw) * expected + rw * float(sum(r2l[0, i, k] for i, k in enumerate(r_idx)))
    expected += 0.5 * prefix.nbest_scores[prefix.nbest.index(hyp)]
    assert resc.score == pytest.approx(expected, abs=1e-3)


def test_decode_rejects_bad_arguments():
    model = build_model(tiny_config()).eval()
    speech, lengths, _, _ = batch()
    with pytest.raises(ValueError, match="attention_rescoring"):
        model.decode(["beam"], speech, lengths, beam_size=2)
    with pytest.raises(ValueError, match="bitransformer"):
        model.decode(["attention_rescoring"], speech, lengths, beam_size=2, reverse_weight=0.5)
    # As in WeNet: chunk size 0 (training's random chunks) is not a decoding setting.
    with pytest.raises(ValueError, match="decoding_chunk_size 0"):
        model.decode(["ctc_greedy_search"], speech, lengths, beam_size=2, decoding_chunk_size=0)
    with pytest.raises(ValueError, match="blank_penalty must be >= 0"):
        model.decode(["ctc_greedy_search"], speech, lengths, beam_size=2, blank_penalty=-1.0)


@pytest.mark.parametrize("encoder", ["transformer", "conformer"])
def test_streaming_decode_runs(encoder):
    cfg = tiny_config(encoder=encoder)
    cfg["encoder_conf"]["use_dynamic_chunk"] = True
    model = build_model(cfg).eval()
    speech, lengths, _, _ = batch(b=1, t=60)
    full = model.decode(["ctc_greedy_search", "attention_rescoring"], speech, lengths, beam_size=2,
                        decoding_chunk_size=4, num_decoding_left_chunks=2)
    sim = model.decode(["ctc_greedy_search", "attention_rescoring"], speech, lengths, beam_size=2,
                       decoding_chunk_size=4, num_decoding_left_chunks=2, simulate_streaming=True)
    # Causal convolution: chunk-by-chunk equals the chunk-masked full pass.
    assert sim["ctc_greedy_search"][0].tokens == full["ctc_greedy_search"][0].tokens
    assert sim["ctc_greedy_search"][0].score == pytest.approx(full["ctc_greedy_search"][0].score, abs=1e-3)
    assert sim["attention_rescoring"][0].tokens == full["attention_rescoring"][0].tokens


@pytest.mark.parametrize("family", ["scaled_dot", "udps", "cosine"])
def test_overfit_two_sequences(family):
    """A tiny model memorises two utterances; every decoding mode then returns the targets."""
    torch.manual_seed(0)
    cfg = tiny_config(input_layer="linear") | {"att_udps": None, "att_family": family}
    cfg["encoder_conf"].update(output_size=32, linear_units=64)
    cfg["model_conf"] = {"ctc_weight": 0.5}
    model = build_model(cfg)
    speech = torch.randn(2, 12, F)
    lengths = torch.tensor([12, 10])
    targets = [[3, 4, 5, 6, 7], [8, 9, 3]]
    text = torch.tensor([targets[0], targets[1] + [IGNORE_ID, IGNORE_ID]])
    text_lengths = torch.tensor([5, 3])
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    for step in range(300):
        loss = model(speech, lengths, text, text_lengths)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step >= 50 and loss.item() < 0.05:
            break
    assert loss.item() < 0.2
    model.eval()
    methods = ["ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring", "joint_ctc_attention"]
    res = model.decode(methods, speech, lengths, beam_size=3, ctc_weight=0.5)
    for method in methods:
        assert [r.tokens for r in res[method]] == targets, method


@pytest.mark.parametrize("encoder", ["transformer", "conformer"])
def test_results_do_not_depend_on_batch_size_or_composition(encoder):
    """Every decoding mode gives an utterance the same result alone, in a batch, and in a batch with others. The
    left-to-right decoder is made to never emit eos, so attention hypotheses run to their step limit: each
    utterance's own encoder length, not the batch's longest."""
    model = build_model(tiny_config(encoder=encoder, decoder="bitransformer")).eval()
    with torch.no_grad():
        model.decoder.left_decoder.output_layer.bias[model.eos] = -1e4
    torch.manual_seed(1)
    lengths = torch.tensor([40, 13, 31, 22, 17])
    speech = torch.randn(len(lengths), 40, F)
    methods = ["ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring", "joint_ctc_attention"]
    kwargs = dict(beam_size=3, ctc_weight=0.5, reverse_weight=0.3)

    def run(idx):
        sub = torch.tensor(idx)
        n = int(lengths[sub].max())
        out = model.decode(methods, speech[sub, :n], lengths[sub], **kwargs)
        return {(m, i): (r.tokens, r.score) for m in methods for i, r in zip(idx, out[m])}

    reference = {}
    for i in range(len(lengths)):
        reference.update(run([i]))
    with torch.no_grad():
        enc_lens = model.encoder(speech, lengths)[1].squeeze(1).sum(-1).tolist()
    assert [len(reference[("attention", i)][0]) for i in range(len(lengths))] == enc_lens
    for idx in ([0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [1, 3], [2, 0, 4]):
        for key, (tokens, score) in run(idx).items():
            assert tokens == reference[key][0], key
            assert score == pytest.approx(reference[key][1], abs=1e-3), key


def test_lm_modes_need_an_lm_search():
    from wenet_udps.transformer.modes import LM_METHODS
    from wenet_udps.transformer.search import DecodeResult
    model = build_model(tiny_config()).eval()
    feats, lens = torch.randn(1, 40, F), torch.tensor([40])
    with pytest.raises(ValueError, match="need a word LM"):
        model.decode(list(LM_METHODS), feats, lens, beam_size=2)
    calls = []

    def first_pass(ctc_probs, ctc_lens):  # stands in for wenet_udps.lm's search: a fixed two-entry n-best
        calls.append(ctc_probs.shape)
        return [DecodeResult(tokens=[3], score=-1.0, nbest=[[3], [4, 3]], nbest_scores=[-1.0, -2.0])]
    with pytest.raises(ValueError, match="joint_ctc_attention_lm scores words in its own search"):
        model.decode(list(LM_METHODS), feats, lens, beam_size=2, lm_search=first_pass)
    out = model.decode(["ctc_prefix_beam_search_lm", "attention_rescoring_lm"], feats, lens, beam_size=2,
                       lm_search=first_pass)
    assert len(calls) == 1  # one first pass serves both modes
    assert out["ctc_prefix_beam_search_lm"][0].tokens == [3]
    assert sorted(map(tuple, out["attention_rescoring_lm"][0].nbest)) == [(3,), (4, 3)]
