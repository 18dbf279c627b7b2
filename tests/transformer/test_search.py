import itertools
import math
from collections import defaultdict

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from wenet_udps.transformer.context_graph import ContextGraph
from wenet_udps.transformer.decoder import DECODER_CLASSES, TransformerDecoder
from wenet_udps.transformer.search import (_biased_cut, attention_beam_search, ctc_greedy_search,
                                          ctc_prefix_beam_search)
from wenet_udps.utils.common import log_add, remove_duplicates_and_blank


pytestmark = pytest.mark.usefixtures("one_thread")


def random_log_probs(b, t, v, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, t, v, generator=g).mul(2).log_softmax(-1)


def test_greedy_collapses_and_scores_best_path():
    lp = torch.full((1, 6, 4), -10.0)
    for t, k in enumerate([1, 1, 0, 1, 2, 0]):
        lp[0, t, k] = -0.1
    res = ctc_greedy_search(lp.log_softmax(-1), torch.tensor([6]))
    assert res[0].tokens == [1, 1, 2]
    assert res[0].score == pytest.approx(float(lp.log_softmax(-1)[0].max(-1).values.sum()), rel=1e-5)
    # Frames past the length are ignored.
    assert ctc_greedy_search(lp.log_softmax(-1), torch.tensor([2]))[0].tokens == [1]


def test_prefix_beam_search_exact_with_full_beam():
    """With a beam as large as every prefix, the scores are the exact sums over alignments."""
    T, V = 4, 3
    lp = random_log_probs(1, T, V)
    exact = defaultdict(lambda: -math.inf)
    for path in itertools.product(range(V), repeat=T):
        prefix = tuple(remove_duplicates_and_blank(path, 0))
        exact[prefix] = log_add(exact[prefix], sum(float(lp[0, t, k]) for t, k in enumerate(path)))
    res = ctc_prefix_beam_search(lp, torch.tensor([T]), beam_size=V ** T)[0]
    assert len(res.nbest) == len(exact)
    for hyp, score in zip(res.nbest, res.nbest_scores):
        assert score == pytest.approx(exact[tuple(hyp)], abs=1e-5)
    best = max(exact, key=exact.get)
    assert res.tokens == list(best)
    assert res.nbest_scores == sorted(res.nbest_scores, reverse=True)


def test_prefix_beam_one_equals_greedy():
    lp = random_log_probs(3, 20, 5, seed=1)
    lens = torch.tensor([20, 15, 9])
    greedy = ctc_greedy_search(lp, lens)
    prefix = ctc_prefix_beam_search(lp, lens, beam_size=1)
    for g, p in zip(greedy, prefix):
        assert g.tokens == p.tokens
        assert g.score == pytest.approx(p.score, abs=1e-4)


def test_prefix_beam_other_blank_and_nbest_size():
    lp = random_log_probs(2, 10, 6, seed=2)
    res = ctc_prefix_beam_search(lp, torch.tensor([10, 10]), beam_size=4, blank_id=5)
    for r in res:
        assert 1 <= len(r.nbest) <= 4 and all(5 not in h for h in r.nbest)
        assert len({tuple(h) for h in r.nbest}) == len(r.nbest)


def tiny_decoder():
    dec = TransformerDecoder(vocab_size=7, encoder_output_size=8, attention_heads=2, linear_units=16, num_blocks=2)
    return dec.eval()


@torch.no_grad()
def greedy_attention(dec, memory, mask, sos, eos, maxlen):
    """Reference: argmax decoding with full (uncached) decoder passes."""
    ys = torch.tensor([[sos]])
    score = 0.0
    for _ in range(maxlen):
        out, _, _ = dec(memory, mask, ys, torch.tensor([ys.size(1)]))
        logp = out[0, -1].log_softmax(-1)
        k = int(logp.argmax())
        score += float(logp[k])
        ys = torch.cat([ys, torch.tensor([[k]])], 1)
        if k == eos:
            break
    tokens = ys[0, 1:].tolist()
    return (tokens[:-1] if tokens and tokens[-1] == eos else tokens), score


def test_attention_beam_one_equals_greedy():
    dec = tiny_decoder()
    memory = torch.randn(3, 9, 8)
    mask = torch.ones(3, 1, 9, dtype=torch.bool)
    mask[2, :, 6:] = False
    res = attention_beam_search(dec, memory, mask, beam_size=1, sos=6, eos=6)
    for b in range(3):
        n = int(mask[b].sum())
        tokens, score = greedy_attention(dec, memory[b:b + 1, :n], mask[b:b + 1, :, :n], 6, 6, n)
        assert res[b].tokens == tokens
        assert res[b].score == pytest.approx(score, abs=1e-4)


def test_attention_beam_is_not_worse_than_greedy_and_batch_independent():
    dec = tiny_decoder()
    memory = torch.randn(2, 6, 8)
    mask = torch.ones(2, 1, 6, dtype=torch.bool)
    beam = attention_beam_search(dec, memory, mask, beam_size=4, sos=6, eos=6)
    one = attention_beam_search(dec, memory, mask, beam_size=1, sos=6, eos=6)
    single = attention_beam_search(dec, memory[1:], mask[1:], beam_size=4, sos=6, eos=6)
    assert single[0].tokens == beam[1].tokens and single[0].score == pytest.approx(beam[1].score, abs=1e-4)
    for b in range(2):
        # Finished greedy hypotheses are a candidate of the beam, so the beam's best is at least as good.
        if len(one[b].tokens) < 6:
            assert beam[b].score >= one[b].score - 1e-4
        assert all(0 <= t < 7 and t != 6 for t in beam[b].tokens)


def test_attention_beam_early_stop_returns_what_the_full_search_returns(monkeypatch):
    """Stopping once the best ended hypothesis cannot be overtaken changes no result, only the step count."""
    import wenet_udps.transformer.search as search
    dec = tiny_decoder()
    memory = torch.randn(4, 30, 8) * 3
    mask = torch.ones(4, 1, 30, dtype=torch.bool)
    mask[3, :, 20:] = False
    steps = {"n": 0}
    step_fn = dec.forward_one_step

    def counting(*args, **kwargs):
        steps["n"] += 1
        return step_fn(*args, **kwargs)

    monkeypatch.setattr(dec, "forward_one_step", counting)
    early = attention_beam_search(dec, memory, mask, beam_size=3, sos=6, eos=6)
    early_steps = steps["n"]
    steps["n"] = 0
    # With a length penalty only "every hypothesis ended or used its steps" ends a search.
    finished = search._finished
    monkeypatch.setattr(search, "_finished", lambda scores, done, beam, early: finished(scores, done, beam, False))
    full = attention_beam_search(dec, memory, mask, beam_size=3, sos=6, eos=6)
    for e, f in zip(early, full):
        assert e.tokens == f.tokens
        assert e.score == pytest.approx(f.score, abs=1e-5)
    assert early_steps <= steps["n"]


class ScriptedDecoder(torch.nn.Module):
    """forward_one_step with fixed next-token probabilities per prefix (vocab: 0 unused, 1, 2, 3 = sos/eos).

    From sos: 1 (p .5), 2 (p .45), eos (p .05). After 1: eos (p .9). After 2: 2 (p .95) until three 2s, then eos
    (p .95). So the final beam holds A = [1] (log-prob -0.80) and B = [2, 2, 2] (-0.95), and the empty hypothesis.
    """

    def memory_caches(self, memory):
        return []

    def forward_one_step(self, memory, memory_mask, tgt, tgt_mask, cache, memory_caches):
        probs = torch.full((tgt.size(0), 4), 1e-4)
        for i, row in enumerate(tgt.tolist()):
            last, twos = row[-1], row.count(2)
            if len(row) == 1:
                probs[i, 1:] = torch.tensor([0.5, 0.45, 0.05])
            elif last == 1 or (last == 2 and twos == 3) or last == 3:
                probs[i, 3] = 0.9 if last == 1 else 0.95
            else:
                probs[i, 2] = 0.95
        return probs.log(), None


@pytest.mark.parametrize("penalty, winner", [(0.0, [1]), (0.1, [1]), (0.5, [2, 2, 2]), (1.0, [2, 2, 2])])
def test_length_penalty_divides_the_final_score_like_wenet(penalty, winner):
    """WeNet ranks the final beam by score / length ** length_penalty: the longer B overtakes A from some penalty
    on (a per-token bonus of the same size would rank differently: -0.80 + 0.1 < -0.95 + 0.3 already at 0.1)."""
    memory, mask = torch.zeros(1, 6, 8), torch.ones(1, 1, 6, dtype=torch.bool)
    res = attention_beam_search(ScriptedDecoder(), memory, mask, beam_size=3, sos=3, eos=3,
                                length_penalty=penalty)[0]
    assert res.tokens == winner
    raw = {(1,): math.log(0.5) + math.log(0.9), (2, 2, 2): math.log(0.45) + 3 * math.log(0.95)}
    assert res.score == pytest.approx(raw[tuple(winner)] / len(winner) ** penalty, abs=1e-4)
    others = [s / len(h) ** penalty for h, s in raw.items() if list(h) != winner]
    assert all(res.score > o for o in others)


def test_attention_beam_stops_each_utterance_at_its_own_length():
    """A looping hypothesis of a short utterance stops at that utterance's encoder length, in any batch."""
    class Looping(torch.nn.Module):  # always prefers token 1, never eos
        def memory_caches(self, memory):
            return []

        def forward_one_step(self, memory, memory_mask, tgt, tgt_mask, cache, memory_caches):
            return torch.tensor([[-9.0, -0.01, -9.0, -9.0]]).repeat(tgt.size(0), 1), None

    memory = torch.zeros(3, 29, 8)
    mask = torch.ones(3, 1, 29, dtype=torch.bool)
    mask[1, :, 6:] = False
    mask[2, :, 11:] = False
    res = attention_beam_search(Looping(), memory, mask, beam_size=2, sos=3, eos=3)
    assert [len(r.tokens) for r in res] == [29, 6, 11]
    alone = attention_beam_search(Looping(), memory[1:2, :6], mask[1:2, :, :6], beam_size=2, sos=3, eos=3)
    assert alone[0].tokens == res[1].tokens and alone[0].score == pytest.approx(res[1].score)


def test_attention_beam_drops_finished_utterances_from_the_batch(monkeypatch):
    """Each utterance costs the decoder the rows it costs decoded alone: finished ones leave the batch, so a batch
    runs no step for them while a slower one searches on (and results stay those of decoding alone)."""
    dec = tiny_decoder()
    torch.manual_seed(3)
    memory = torch.randn(4, 30, 8) * 3
    mask = torch.ones(4, 1, 30, dtype=torch.bool)
    mask[1, :, 5:] = False
    mask[2, :, 17:] = False
    rows = {"n": 0}
    step_fn = dec.forward_one_step

    def counting(memory, memory_mask, tgt, *args):
        rows["n"] += tgt.size(0)
        assert memory.size(0) == memory_mask.size(0) and tgt.size(0) == 3 * memory.size(0)
        return step_fn(memory, memory_mask, tgt, *args)

    monkeypatch.setattr(dec, "forward_one_step", counting)
    batched = attention_beam_search(dec, memory, mask, beam_size=3, sos=6, eos=6)
    batched_rows, alone_rows = rows["n"], 0
    for b in range(4):
        n = int(mask[b].sum())
        rows["n"] = 0
        alone = attention_beam_search(dec, memory[b:b + 1, :n], mask[b:b + 1, :, :n], beam_size=3, sos=6, eos=6)
        alone_rows += rows["n"]
        assert alone[0].tokens == batched[b].tokens
        assert alone[0].score == pytest.approx(batched[b].score, abs=1e-5)
    assert batched_rows == alone_rows


def eos_suppressed_decoder(eos=6):
    """A random decoder that never emits end-of-sentence (the case of issue 47's 5-minute utterance)."""
    dec = tiny_decoder()
    with torch.no_grad():
        dec.output_layer.bias[eos] = -1e4
    return dec


def test_attention_length_is_bounded_by_the_encoder_frames():
    """Issue 47, case 23: without eos, a hypothesis grows to ceil(max_len_ratio * T') tokens and the search ends
    there (the documented bound: default ratio 1.0, one token per encoder frame, as WeNet)."""
    dec = eos_suppressed_decoder()
    memory = torch.randn(2, 40, 8)
    mask = torch.ones(2, 1, 40, dtype=torch.bool)
    mask[1, :, 25:] = False
    res = attention_beam_search(dec, memory, mask, beam_size=2, sos=6, eos=6)
    assert [len(r.tokens) for r in res] == [40, 25]
    res = attention_beam_search(dec, memory, mask, beam_size=2, sos=6, eos=6, max_len_ratio=0.3)
    assert [len(r.tokens) for r in res] == [12, 8]  # ceil(0.3 * 40), ceil(0.3 * 25)
    with pytest.raises(ValueError, match="max_len_ratio must be > 0"):
        attention_beam_search(dec, memory, mask, beam_size=2, sos=6, eos=6, max_len_ratio=0.0)


def test_five_minute_utterance_without_eos_finishes_within_its_bound():
    """300 s at 40 ms encoder frames is T' = 7500: with a ratio the search stops after ceil(ratio * T') steps, and
    a step no longer costs the prefix squared (the causal mask's last row only), so it ends in seconds."""
    import time
    dec = eos_suppressed_decoder()
    frames = 300 * 25
    memory = torch.randn(1, frames, 8)
    mask = torch.ones(1, 1, frames, dtype=torch.bool)
    start = time.perf_counter()
    res = attention_beam_search(dec, memory, mask, beam_size=2, sos=6, eos=6, max_len_ratio=0.04)
    assert len(res[0].tokens) == 300
    assert time.perf_counter() - start < 60


class FullPrefixDecoder(torch.nn.Module):
    """The uncached reference: each step runs ``decoder.forward`` over the whole prefix (no cache of any kind)."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def memory_caches(self, memory):
        return []

    def forward_one_step(self, memory, memory_mask, tgt, tgt_mask, cache, memory_caches):
        beam = tgt.size(0) // memory.size(0)  # the search passes each utterance's memory once
        logits = self.decoder(memory.repeat_interleave(beam, 0), memory_mask.repeat_interleave(beam, 0), tgt,
                              torch.full((tgt.size(0),), tgt.size(1)))[0]
        return logits[:, -1].log_softmax(-1), None


@pytest.mark.parametrize("name", list(DECODER_CLASSES))
@pytest.mark.parametrize("self_type,src_type", [("selfattn", "crossattn"), ("udps_selfattn", "udps_crossattn")])
def test_cached_beam_search_equals_decoding_the_whole_prefix_each_step(name, self_type, src_type):
    """The cached search (prefix entries appended once per position, memory projected once per search, both
    reordered with the surviving beams and cut when utterances finish) returns the hypotheses and scores of running
    the decoder over the whole prefix at every step, for padded memories of different lengths."""
    torch.manual_seed(4)
    conf = dict(vocab_size=7, encoder_output_size=8, attention_heads=2, linear_units=16, num_blocks=2,
                selfattention_layer_type=self_type, src_attention_layer_type=src_type,
                attention_conf={"alpha_init": 4.0} if "udps" in self_type else None)
    dec = DECODER_CLASSES[name](**conf, **({"r_num_blocks": 1} if name == "bitransformer" else {})).eval()
    memory = torch.randn(3, 12, 8) * 3
    mask = torch.ones(3, 1, 12, dtype=torch.bool)
    mask[1, :, 5:] = False
    mask[2, :, 9:] = False
    for kwargs in ({}, {"suppress_eos": True}):
        cached = attention_beam_search(dec, memory, mask, beam_size=3, sos=6, eos=6, **kwargs)
        full = attention_beam_search(FullPrefixDecoder(dec), memory, mask, beam_size=3, sos=6, eos=6, **kwargs)
        for c, f in zip(cached, full):
            assert c.tokens == f.tokens
            assert c.score == pytest.approx(f.score, abs=1e-4)


def test_suppress_eos_runs_every_hypothesis_to_its_step_limit():
    """The bench's worst case: eos never wins, so each utterance's hypothesis has ceil(max_len_ratio * T') tokens,
    none of them eos, and its score is that of the tokens alone (eos at -inf would make it -inf)."""
    dec = tiny_decoder()
    with torch.no_grad():
        dec.output_layer.bias[6] = 20.0  # a decoder that ends every sentence at once
    memory = torch.randn(2, 10, 8)
    mask = torch.ones(2, 1, 10, dtype=torch.bool)
    mask[1, :, 4:] = False
    normal = attention_beam_search(dec, memory, mask, beam_size=2, sos=6, eos=6)
    res = attention_beam_search(dec, memory, mask, beam_size=2, sos=6, eos=6, suppress_eos=True)
    assert [len(r.tokens) for r in normal] == [0, 0]
    assert [len(r.tokens) for r in res] == [10, 4]
    assert all(6 not in r.tokens and math.isfinite(r.score) for r in res)


def reference_biased_cut(live, beam_size, context, last):
    """The hotword cut by its definition (``search._biased_cut``'s docstring), every prefix scanned: the beam's best
    by log P + bonus, and one more, the best by kept bonus of those left out, where it passes the beam's best."""
    total = [(log_add(e[0], e[1]) + e[3], kv) for kv in live for e in (kv[1],)]
    kept = [(score - context.node_score[kv[1][2]], kv) for score, kv in total]
    if last:
        order = sorted(range(len(live)), key=lambda i: kept[i][0], reverse=True)
        return [live[i] for i in order[:beam_size]]
    order = sorted(range(len(live)), key=lambda i: total[i][0], reverse=True)
    ranked = [live[i] for i in order[:beam_size]]
    rest = order[beam_size:]
    if rest:
        inside = max(kept[i][0] for i in order[:beam_size])
        best = max(rest, key=lambda i: kept[i][0])  # (the first of equals, as in the search)
        if kept[best][0] > inside:
            ranked.append(live[best])
    return ranked


@settings(max_examples=500, deadline=None)
@given(data=st.data())
def test_the_hotword_cut_is_its_definition(data):
    """The cut scans the prefixes outside the beam only when one could pass the beam's best by kept bonus (1ee10b9):
    the same prefixes, in the same order, as scanning them all, ties and open matches of every size included."""
    graph = ContextGraph([((1, 2, 3), data.draw(st.sampled_from([0.5, 1.0, 3.0]))), ((2, 4), 1.0)])
    logp = st.sampled_from([-math.inf, -6.0, -3.0, -2.0, -1.5, -1.0, -0.75, -0.5, -0.25, 0.0])
    entries = data.draw(st.lists(st.tuples(logp, logp, st.sampled_from(range(len(graph))),
                                           st.sampled_from([0.0, 0.5, 1.0, 3.0])), min_size=1, max_size=30))
    # a prefix's bonus holds its open match's (node_score) and what completed phrases locked in
    live = [(node, [pb, pnb, state, graph.node_score[state] + locked])
            for node, (pb, pnb, state, locked) in enumerate(entries)
            if log_add(pb, pnb) > -math.inf]  # (as the search gives it: no impossible prefix)
    assume(live)
    beam, last = data.draw(st.integers(1, 12)), data.draw(st.booleans())
    assert _biased_cut(live, beam, graph, last) == reference_biased_cut(live, beam, graph, last)


def test_the_cut_keeps_a_prefix_that_passes_the_beam_by_a_hair():
    """The shortcut's edge: the best prefix outside the beam passes the beam's best by kept bonus by 0.1, so it is
    the one more kept (a cut that skipped the scan unless it passed by more would drop it)."""
    graph = ContextGraph([((1, 2, 3), 1.0)])
    state = graph.memo[graph.memo[0, 1][0], 2][0]  # two units into the phrase: an open match of bonus 2
    assert graph.node_score[state] == 2.0
    inside = (0, [-1.0, -math.inf, state, 2.0])      # log P -1.0 + 2.0; kept -1.0
    outside = (1, [-0.9, -math.inf, 0, 0.0])         # log P -0.9;       kept -0.9
    assert _biased_cut([inside, outside], 1, graph, last=False) == [inside, outside]
    assert reference_biased_cut([inside, outside], 1, graph, last=False) == [inside, outside]
