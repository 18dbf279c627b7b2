import pytest
import torch

from wenet_udps.model_builder import resolve_model_config
from wenet_udps.transformer.decoder import DECODER_CLASSES, EMBED_INITS, BiTransformerDecoder, TransformerDecoder
from wenet_udps.utils.mask import subsequent_mask

V, D = 11, 16
SITE_KINDS = [("selfattn", "crossattn"), ("udps_selfattn", "udps_crossattn"), ("udps_selfattn", "crossattn"),
              ("cosine_selfattn", "cosine_crossattn"), ("cosine_selfattn", "udps_crossattn")]


pytestmark = pytest.mark.usefixtures("one_thread")


def make(name="transformer", self_type="selfattn", src_type="crossattn", **kw):
    conf = dict(vocab_size=V, encoder_output_size=D, attention_heads=2, linear_units=32, num_blocks=2,
                dropout_rate=0.0, positional_dropout_rate=0.0, selfattention_layer_type=self_type,
                src_attention_layer_type=src_type,
                attention_conf={"alpha_init": 4.0} if "udps" in self_type + src_type else None)
    if name == "bitransformer":
        conf["r_num_blocks"] = 1
    conf.update(kw)
    return DECODER_CLASSES[name](**conf)


def batch():
    memory = torch.randn(2, 7, D)
    memory_mask = torch.ones(2, 1, 7, dtype=torch.bool)
    memory_mask[1, :, 5:] = False
    ys = torch.randint(0, V, (2, 5))
    return memory, memory_mask, ys, torch.tensor([5, 3])


@pytest.mark.parametrize("name", list(DECODER_CLASSES))
@pytest.mark.parametrize("self_type,src_type", SITE_KINDS)
def test_forward_shapes_and_backward(name, self_type, src_type):
    dec = make(name, self_type, src_type)
    memory, memory_mask, ys, lens = batch()
    memory.requires_grad_(True)
    out, r_out, olens = dec(memory, memory_mask, ys, lens, ys.flip(1), 0.5)
    assert out.shape == (2, 5, V)
    # WeNet's olens: per key position, how many queries may attend to it (causal & padding).
    assert olens.tolist() == [[5, 4, 3, 2, 1], [5, 4, 3, 0, 0]]
    if name == "bitransformer":
        assert r_out.shape == (2, 5, V)
    else:
        assert r_out.dim() == 0
    (out.sum() + (r_out.sum() if r_out.dim() else 0)).backward()
    assert memory.grad is not None and torch.isfinite(memory.grad).all()
    # Masked memory frames must not influence anything.
    assert memory.grad[1, 5:].abs().max() == 0
    assert memory.grad[1, :5].abs().max() > 0


@pytest.mark.parametrize("self_type,src_type", SITE_KINDS)
def test_causal_and_padding_masks(self_type, src_type):
    dec = make("transformer", self_type, src_type).eval()
    memory, memory_mask, ys, lens = batch()
    out, _, _ = dec(memory, memory_mask, ys, lens)
    ys2 = ys.clone()
    ys2[:, 3] = (ys2[:, 3] + 1) % V  # change a future token: earlier positions unchanged
    ys2[1, 4] = (ys2[1, 4] + 1) % V  # and a padded token of row 1
    out2, _, _ = dec(memory, memory_mask, ys2, lens)
    assert torch.allclose(out[:, :3], out2[:, :3], atol=1e-5)
    assert not torch.allclose(out[0, 3:], out2[0, 3:], atol=1e-5)


def blocks(dec):
    """The blocks a decoding step runs through (a bitransformer steps its left-to-right decoder)."""
    return dec.left_decoder.decoders if isinstance(dec, BiTransformerDecoder) else dec.decoders


def steppers(dec):
    """(decoder that steps, its full forward's logits of a prefix): the decoder itself (a bitransformer steps its
    left-to-right decoder) and a bitransformer's right-to-left decoder, which steps the same way."""
    def full(d):
        return lambda memory, memory_mask, ys: d(memory, memory_mask, ys, torch.full((ys.size(0),), ys.size(1)))[0]
    pairs = [(dec, full(dec))]
    if isinstance(dec, BiTransformerDecoder):
        pairs.append((dec.right_decoder, full(dec.right_decoder)))
    return pairs


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("name", list(DECODER_CLASSES))
@pytest.mark.parametrize("self_type,src_type", SITE_KINDS)
def test_cached_steps_match_the_full_forward_through_beam_reordering(name, self_type, src_type, grad):
    """Step-by-step decoding with the cache gives the logits of decoding the whole prefix, while the rows are
    reordered as a beam search reorders them (survivors picked with repeats within each utterance, so prefixes
    merge and hold their common positions' entries once), with memories of different lengths given once per
    utterance; the cache holds every row's entries of its whole prefix (for UDPS also the key's norm)."""
    torch.manual_seed(0)
    beam, utts = 3, 2
    gen = torch.Generator().manual_seed(1)
    with torch.set_grad_enabled(grad):
        dec = make(name, self_type, src_type).eval()
        memory = torch.randn(utts, 7, D)
        memory_mask = torch.ones(utts, 1, 7, dtype=torch.bool)
        memory_mask[1:, :, 4:] = False  # the second utterance's 4 frames
        per_row = memory.repeat_interleave(beam, 0), memory_mask.repeat_interleave(beam, 0)
        for stepper, full in steppers(dec):
            memory_caches = stepper.memory_caches(memory)
            ys, cache = torch.full((utts * beam, 1), 3), None
            for i in range(1, 9):
                step_mask = torch.ones(utts * beam, 1, i, dtype=torch.bool)
                logp, cache = stepper.forward_one_step(memory, memory_mask, ys, step_mask, cache, memory_caches)
                torch.testing.assert_close(logp, full(*per_row, ys)[:, -1].log_softmax(-1), rtol=1e-5, atol=1e-5)
                att = blocks(stepper)[0].self_attn
                entries = cache.entries(0)
                assert entries.shape == (utts * beam, 2, i, 2 * att.d_k + (att.family == "udps"))
                if att.family == "udps":
                    torch.testing.assert_close(entries[..., -1], entries[..., :att.d_k].norm(dim=-1))
                # Most steps every row of an utterance extends one survivor: their prefixes merge.
                pick = torch.randint(0, beam, (utts, 1 if i % 3 else beam), generator=gen).expand(utts, beam)
                src = (torch.arange(utts).unsqueeze(1) * beam + pick).reshape(-1)
                ys = torch.cat([ys[src], torch.randint(0, V, (utts * beam, 1), generator=gen)], dim=1)
                cache.reorder(src)
            # An utterance's rows hold their common positions' entries once: fewer live columns than rows x positions.
            live = cache.member[:, :cache.columns].view(utts, beam, -1).any(dim=1).sum(dim=1)
            assert bool((live < beam * cache.length).all()), live


@pytest.mark.parametrize("name", list(DECODER_CLASSES))
@pytest.mark.parametrize("self_type,src_type", SITE_KINDS)
def test_a_step_projects_only_the_new_position(name, self_type, src_type):
    """With the memory's caches and the prefix's cache, a step runs the key/value projections of its one new
    position per row in the self-attention and none of the memory; without memory caches it projects the memory;
    and the memory's caches give the numbers that projecting it at that step gives."""
    dec = make(name, self_type, src_type).eval()
    memory, memory_mask, ys, _ = batch()
    rows = {"self": 0, "src": 0}
    hooks = []
    for layer in blocks(dec):
        for site in rows:
            hooks.append(getattr(layer, f"{site}_attn").linear_k.register_forward_hook(
                lambda m, inp, out, site=site: rows.__setitem__(site, rows[site] + inp[0].shape[:-1].numel())))
    with torch.no_grad():
        memory_caches = dec.memory_caches(memory)
        first = torch.ones(2, 3, 3, dtype=torch.bool)
        cache = dec.forward_one_step(memory, memory_mask, ys[:, :3], first)[1]
        other = dec.forward_one_step(memory, memory_mask, ys[:, :3], first)[1]
        for i in range(4, 6):
            rows.update(self=0, src=0)
            newest = torch.ones(2, 1, i, dtype=torch.bool)
            logp, cache = dec.forward_one_step(memory, memory_mask, ys[:, :i], newest, cache, memory_caches)
            assert rows == {"self": 2 * len(blocks(dec)), "src": 0}
            fresh, other = dec.forward_one_step(memory, memory_mask, ys[:, :i], newest, other)
            assert rows["src"] == 2 * 7 * len(blocks(dec))
            torch.testing.assert_close(logp, fresh, rtol=1e-6, atol=1e-6)
    for hook in hooks:
        hook.remove()


@pytest.mark.parametrize("name", list(DECODER_CLASSES))
@pytest.mark.parametrize("self_type,src_type", SITE_KINDS)
def test_full_forward_with_memory_caches_matches_projecting_the_memory(name, self_type, src_type):
    """Rescoring makes each utterance's caches once and repeats them for its hypotheses: same numbers, both
    directions (a bitransformer's caches are the left blocks' then the right blocks')."""
    dec = make(name, self_type, src_type).eval()
    memory, memory_mask, ys, lens = batch()
    caches = dec.memory_caches(memory)
    assert len(caches) == len(dec.left_decoder.decoders) + len(dec.right_decoder.decoders) if name == "bitransformer" \
        else len(caches) == len(dec.decoders)
    rows = torch.tensor([0, 0, 1, 0, 1])  # hypotheses of utterance 0 and 1
    args = (ys[rows % 2], lens[rows % 2], ys.flip(1)[rows % 2], 0.5)
    expected = dec(memory[rows], memory_mask[rows], *args)
    got = dec(memory[rows], memory_mask[rows], *args, memory_caches=[c[rows] for c in caches])
    torch.testing.assert_close(got[0], expected[0], rtol=1e-6, atol=1e-6)
    if name == "bitransformer":
        torch.testing.assert_close(got[1], expected[1], rtol=1e-6, atol=1e-6)


def test_bitransformer_right_branch_only_with_reverse_weight():
    dec = make("bitransformer").eval()
    memory, memory_mask, ys, lens = batch()
    _, r0, _ = dec(memory, memory_mask, ys, lens, ys, 0.0)
    _, r1, _ = dec(memory, memory_mask, ys, lens, ys.flip(1), 0.3)
    assert r0.dim() == 0 and r1.shape == (2, 5, V)
    assert len(dec.left_decoder.decoders) == 2 and len(dec.right_decoder.decoders) == 1


def test_parameter_names_follow_wenet():
    keys = set(make().state_dict())
    for k in ("embed.0.weight", "embed.1.pe", "after_norm.weight", "output_layer.weight",
              "decoders.1.self_attn.linear_q.weight", "decoders.1.src_attn.linear_out.bias",
              "decoders.0.feed_forward.w_1.weight", "decoders.0.norm3.bias"):
        assert k in keys, k
    bi = set(make("bitransformer").state_dict())
    assert "left_decoder.decoders.1.norm1.weight" in bi and "right_decoder.decoders.0.src_attn.linear_q.bias" in bi
    assert not any(k.startswith("right_decoder.decoders.1.") for k in bi)


def test_udps_sites_get_alpha_and_plain_ones_do_not():
    dec = make("transformer", "udps_selfattn", "crossattn")
    layer = dec.decoders[0]
    assert torch.allclose(layer.self_attn.alpha, torch.full((2,), 4.0))
    assert not hasattr(layer.src_attn, "alpha")


def test_bad_names_and_keys_rejected():
    with pytest.raises(ValueError, match="crossattn.*selfattn|valid choices"):
        make(self_type="nope")
    with pytest.raises(ValueError, match="valid choices"):
        make(src_type="nope")
    with pytest.raises(ValueError, match="input_layer"):
        make(input_layer="conv2d")
    with pytest.raises(ValueError, match=r"decoder_conf.attention_conf.beta_init: unknown key"):
        resolve_model_config({"decoder": "transformer", "decoder_conf": {  # rel-only option
            "selfattention_layer_type": "udps_selfattn", "attention_conf": {"beta_init": 1.0}}})
    with pytest.raises(ValueError, match="relative position"):
        make(self_type="rel_selfattn")


def _embeddings(decoder):
    return [m.embed[0].weight.detach() for m in (decoder.left_decoder, decoder.right_decoder)] \
        if isinstance(decoder, BiTransformerDecoder) else [decoder.embed[0].weight.detach()]


@pytest.mark.parametrize("name", list(DECODER_CLASSES))
def test_torch_embed_init_is_the_default_and_draws_nothing(name):
    """``torch`` must leave every parameter (not only the embedding) as before the key existed, or old
    seeds would stop reproducing old tables."""
    torch.manual_seed(3)
    implicit = make(name).state_dict()
    torch.manual_seed(3)
    explicit = make(name, embed_init="torch").state_dict()
    assert all(torch.equal(implicit[k], explicit[k]) for k in implicit)


@pytest.mark.parametrize("name", list(DECODER_CLASSES))
@pytest.mark.parametrize("embed_init,std", [("torch", 1.0), ("scaled", 256 ** -0.5)])
def test_embed_init_sets_the_embedding_scale(name, embed_init, std):
    assert set(EMBED_INITS) == {"torch", "scaled"}
    torch.manual_seed(0)
    decoder = make(name, vocab_size=4000, encoder_output_size=256, attention_heads=4, embed_init=embed_init)
    for weight in _embeddings(decoder):
        assert abs(float(weight.std()) / std - 1.0) < 0.01
        assert abs(float(weight.mean())) < 0.01 * std


def test_unknown_embed_init_lists_the_choices():
    with pytest.raises(ValueError, match=r"decoder_conf.embed_init 'xavier'; valid choices: scaled, torch"):
        make(embed_init="xavier")


def test_constructors_are_keyword_only():
    with pytest.raises(TypeError):
        TransformerDecoder(V, D)
    with pytest.raises(TypeError):
        BiTransformerDecoder(V, D)


def test_a_step_without_a_cache_runs_the_whole_prefix_and_a_wrong_cache_is_refused():
    dec = make().eval()
    memory, memory_mask, ys, _ = batch()
    out, _, _ = dec(memory, memory_mask, ys, torch.tensor([5, 5]))
    logp, cache = dec.forward_one_step(memory, memory_mask, ys[:, :2], subsequent_mask(2).unsqueeze(0).repeat(2, 1, 1))
    assert torch.allclose(logp, out[:, 1].log_softmax(-1), atol=1e-4) and cache.entries(0).shape[2] == 2
    with pytest.raises(ValueError, match="cache of 2 positions of 2 prefixes does not hold 3 earlier positions of 2"):
        dec.forward_one_step(memory, memory_mask, ys[:, :4], subsequent_mask(4).unsqueeze(0).repeat(2, 1, 1), cache)
    with pytest.raises(ValueError, match="4 prefixes do not split evenly over the 3 utterances"):
        dec.forward_one_step(memory[[0, 1, 1]], memory_mask[[0, 1, 1]], ys[[0, 1, 0, 1], :2], torch.ones(4, 2, 2,
                             dtype=torch.bool))
