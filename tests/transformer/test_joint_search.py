"""The joint CTC/attention beam search (issue 67): exact with a beam that keeps everything, the attention mode's
search at CTC weight 0, ESPnet's end detection, and the same result alone, in a batch, run after run."""
import itertools

import pytest
import torch

from tests.transformer.test_ctc_prefix_score import exact_scores
from wenet_udps.transformer.decoder import TransformerDecoder
from wenet_udps.transformer.joint_search import _end_detect, joint_beam_search
from wenet_udps.transformer.search import attention_beam_search, ctc_prefix_beam_search

pytestmark = pytest.mark.usefixtures("one_thread")

BLANK, EOS = 0, 4   # V = 5: blank, three labels, sos/eos (the CTC test's vocabulary)
V, D = 5, 8


def decoder(seed=0, vocab=V):
    torch.manual_seed(seed)
    return TransformerDecoder(vocab_size=vocab, encoder_output_size=D, attention_heads=2, linear_units=16,
                              num_blocks=2).eval()


def inputs(seed, lengths, vocab=V, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    frames = max(lengths)
    memory = torch.randn(len(lengths), frames, D, generator=g) * scale
    mask = (torch.arange(frames).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).unsqueeze(1)
    ctc = (torch.randn(len(lengths), frames, vocab, generator=g) * 2).log_softmax(-1)
    return memory, mask, ctc


@torch.no_grad()
def joint_scores(dec, memory, ctc, frames, weight, bonus):
    """{labels: joint score} of every label sequence of at most ``frames`` labels (the search's bound), each decoder
    probability from a whole, uncached pass: (1 - w) log P_dec(y, eos) + w log P_ctc(y) + bonus (|y| + 1); a
    sequence of ``frames`` labels is ended by the bound, without eos (ESPnet: its eos is appended unscored)."""
    full, prefix = exact_scores(ctc[:frames], frames)
    seqs = [s for n in range(frames + 1) for s in itertools.product((1, 2, 3), repeat=n)]
    ys = torch.tensor([[EOS] + list(s) + [EOS] * (frames - len(s)) for s in seqs])
    out, _, _ = dec(memory[:frames].expand(len(seqs), -1, -1), torch.ones(len(seqs), 1, frames, dtype=torch.bool),
                    ys, torch.full((len(seqs),), frames + 1))
    logp = out.log_softmax(-1)
    scores = {}
    for i, s in enumerate(seqs):
        ended = len(s) < frames
        dec_lp = sum(float(logp[i, j, k]) for j, k in enumerate(list(s) + ([EOS] if ended else [])))
        ctc_lp = full[s] if ended else prefix[s]
        scores[s] = (1 - weight) * dec_lp + weight * ctc_lp + bonus * (len(s) + ended)
    return scores


@pytest.mark.parametrize("ending", ["espnet", "attention"])
def test_a_beam_that_keeps_everything_finds_the_best_joint_score(ending):
    """Two utterances (4 and 3 frames) in one batch; beam 128 holds every prefix: the search returns the argmax of
    the joint score over all label sequences up to the frames, and its n-best are their scores."""
    dec = decoder(1)
    memory, mask, ctc = inputs(2, [4, 3])
    weight, bonus = 0.4, 0.3
    out = joint_beam_search(dec, memory, mask, ctc, 128, EOS, EOS, BLANK, ctc_weight=weight, length_bonus=bonus,
                            ending=ending)
    for b, frames in enumerate((4, 3)):
        exact = joint_scores(dec, memory[b], ctc[b], frames, weight, bonus)
        best = max(exact, key=exact.get)
        assert tuple(out[b].tokens) == best, (b, out[b].tokens, best)
        assert out[b].score == pytest.approx(exact[best], abs=1e-4)
        for tokens, score in zip(out[b].nbest, out[b].nbest_scores):
            assert score == pytest.approx(exact[tuple(tokens)], abs=1e-4)
        if ending == "espnet":  # every sequence ended, the best first
            ranked = sorted(exact.values(), reverse=True)
            assert out[b].nbest_scores == pytest.approx(ranked[:len(out[b].nbest)], abs=1e-4)


@pytest.mark.parametrize("seed", range(6))
def test_ctc_weight_zero_with_the_attention_ending_is_the_attention_mode(seed):
    """λ = 0 and the attention mode's ending: the same hypotheses and scores as ``attention`` (whose own search
    shares nothing with this one but the decoder)."""
    dec = decoder(seed, vocab=9)
    with torch.no_grad():  # (an untrained decoder's sentences are mostly empty: end them later)
        dec.output_layer.bias[8] -= 2.0
    memory, mask, ctc = inputs(10 + seed, [12, 7, 3, 10], vocab=9)
    for beam in (1, 3, 6):
        want = attention_beam_search(dec, memory, mask, beam, 8, 8)
        got = joint_beam_search(dec, memory, mask, ctc, beam, 8, 8, BLANK, ctc_weight=0.0, ending="attention")
        for w, g in zip(want, got):
            assert g.tokens == w.tokens and g.score == pytest.approx(w.score, abs=1e-4), (beam, w, g)
    lengths = {len(r.tokens) for r in want}
    assert len(lengths) > 1 and max(lengths) > 0, "a comparison of empty hypotheses only"


def test_end_detect_is_espnet_s_rule():
    """At step i (0-based) the lengths i, i - 1 and i - 2, counting sos and eos, must each have ended hypotheses
    whose best scores more than 10 below the best of all."""
    ended = [([1], -1.0), ([1, 1, 1, 1], -12.0), ([2, 2, 2], -11.5), ([3, 3], -15.0)]  # lengths 3, 6, 5, 4
    assert _end_detect(ended, 6)
    assert not _end_detect(ended, 7)      # no hypothesis of length 7
    assert not _end_detect(ended, 5)      # length 3's best is the best itself
    assert not _end_detect(ended[:2] + [([2, 2, 2], -10.5)] + ended[3:], 6)  # -9.5 is not below -10
    assert not _end_detect([], 9)


def test_a_batch_of_sixteen_gives_each_utterance_its_result_alone():
    """16 utterances of 3 to 16 frames: each one's hypotheses are the ones it gets alone; two runs give the same
    bytes, with one thread or two."""
    dec, weight = decoder(5, vocab=9), 0.3
    lengths = [16, 3, 11, 9, 14, 5, 16, 12, 7, 4, 13, 8, 15, 10, 6, 11]
    memory, mask, ctc = inputs(6, lengths, vocab=9)
    run = lambda: joint_beam_search(dec, memory, mask, ctc, 5, 8, 8, BLANK, ctc_weight=weight)  # noqa: E731
    batch = run()
    assert repr(batch) == repr(run())
    torch.set_num_threads(2)
    try:
        assert repr(batch) == repr(run())
    finally:
        torch.set_num_threads(1)
    for b, n in enumerate(lengths):
        alone = joint_beam_search(dec, memory[b:b + 1, :n], mask[b:b + 1, :, :n], ctc[b:b + 1, :n], 5, 8, 8, BLANK,
                                  ctc_weight=weight)[0]
        assert alone.tokens == batch[b].tokens and alone.nbest == batch[b].nbest, b
        assert alone.score == pytest.approx(batch[b].score, abs=1e-4), b
    assert len({len(r.tokens) for r in batch}) > 3


def test_the_search_stops_at_the_frames_and_never_decodes_a_prefix_twice(monkeypatch):
    """A decoder that never ends a sentence: each utterance runs exactly its T' steps (then its hypotheses end
    without eos), every step one decoder call over the live rows with one new position."""
    dec = decoder(7, vocab=9)
    with torch.no_grad():
        dec.output_layer.bias[8] = -1e4
    memory, mask, ctc = inputs(8, [9, 4], vocab=9)
    ctc = ctc.clone()
    ctc[..., 8] = -1e4
    calls = []
    step = dec.forward_one_step

    def counting(memory, memory_mask, tgt, tgt_mask, cache=None, memory_caches=None):
        calls.append((tgt.size(0), tgt.size(1), 0 if cache is None else cache.length))
        return step(memory, memory_mask, tgt, tgt_mask, cache, memory_caches)

    monkeypatch.setattr(dec, "forward_one_step", counting)
    out = joint_beam_search(dec, memory, mask, ctc, 3, 8, 8, BLANK, ctc_weight=0.5)
    assert [len(r.tokens) for r in out] == [9, 4]
    # rows: both utterances for 4 steps, then the first alone; each call adds one position to the cache
    assert [rows for rows, _, _ in calls] == [6] * 4 + [3] * 5
    assert all(length == cached + 1 for _, length, cached in calls)


def test_ctc_weight_one_is_a_ctc_prefix_search():
    """λ = 1: the decoder weighs nothing, every token is a candidate and the end of a sentence costs its full CTC
    probability, so the best hypothesis is the CTC prefix beam search's (on inputs with a clear best labelling), its
    score the exact probability."""
    dec = decoder(11, vocab=9)
    memory, mask, ctc = inputs(12, [10, 14, 6, 12], vocab=9)
    ctc[..., 8] = -30.0  # (sos/eos: never a CTC label of a trained model, always one of prefix beam search)
    ctc = (ctc * 3).log_softmax(-1)
    joint = joint_beam_search(dec, memory, mask, ctc, 8, 8, 8, BLANK, ctc_weight=1.0)
    prefix = ctc_prefix_beam_search(ctc, mask.squeeze(1).sum(-1), 8, BLANK)
    for j, p in zip(joint, prefix):
        # the same labels; the joint score sums all their alignments, prefix beam search those its beam kept
        assert j.tokens == p.tokens and j.score >= p.score - 1e-9
    assert all(len(p.tokens) > 2 for p in prefix)
