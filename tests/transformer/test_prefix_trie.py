"""The prefix search's prefixes as trie nodes (issue 80, F12): the same bytes as the search over tuple prefixes it
replaced, ties included, with and without hotwords; no prefix copied per extension; the trie holds only the beam's
prefixes and their ancestors."""
import math
import random
import statistics
import tracemalloc
from typing import Any, Dict, List

import pytest
import torch

from wenet_udps.transformer.context_graph import ContextGraph
from wenet_udps.transformer.prefix_trie import ROOT, PrefixTrie
from wenet_udps.transformer import search
from wenet_udps.transformer.search import _biased_cut, _prefix_beam_one, ctc_prefix_beam_search
from wenet_udps.utils.common import log_add

pytestmark = pytest.mark.usefixtures("one_thread")


def tuple_prefix_search(logp, beam_size, blank_id, context=None):
    """The search as it was before the trie (prefixes as tuples, dictionary keys): the reference."""
    neg_inf = -math.inf
    steps = None if context is None else context.memo
    hyps = [((), 0.0, neg_inf, 0, 0.0)]
    top_logp, top_idx = logp.topk(min(beam_size, logp.size(1)), dim=1)
    top_logp, top_idx = top_logp.tolist(), top_idx.tolist()
    last = logp.size(0) - 1
    for t in range(logp.size(0)):
        nxt: Dict[Any, List[Any]] = {}

        def entry_of(prefix, state, got):
            if prefix not in nxt:
                nxt[prefix] = [neg_inf, neg_inf, state, got]
            return nxt[prefix]

        def extended(prefix, s, state, got):
            longer = prefix + (s,)
            if longer not in nxt:
                if steps is None:
                    nxt[longer] = [neg_inf, neg_inf, 0, 0.0]
                else:
                    state, delta = steps[state, s]
                    nxt[longer] = [neg_inf, neg_inf, state, got + delta]
            return nxt[longer]

        for ps, s in zip(top_logp[t], top_idx[t]):
            for prefix, pb, pnb, state, got in hyps:
                if s == blank_id:
                    entry = entry_of(prefix, state, got)
                    entry[0] = log_add(entry[0], pb + ps, pnb + ps)
                elif prefix and s == prefix[-1]:
                    entry = entry_of(prefix, state, got)
                    entry[1] = log_add(entry[1], pnb + ps)
                    entry = extended(prefix, s, state, got)
                    entry[1] = log_add(entry[1], pb + ps)
                else:
                    entry = extended(prefix, s, state, got)
                    entry[1] = log_add(entry[1], pb + ps, pnb + ps)
        live = [kv for kv in nxt.items() if log_add(kv[1][0], kv[1][1]) > neg_inf]
        if not live:
            break
        if steps is None:
            ranked = sorted(live, key=lambda kv: log_add(kv[1][0], kv[1][1]), reverse=True)[:beam_size]
        else:
            ranked = _biased_cut(live, beam_size, context, last=t == last)
        hyps = [(prefix, pb, pnb, state, got) for prefix, (pb, pnb, state, got) in ranked]
    if context is None:
        return [(prefix, log_add(pb, pnb)) for prefix, pb, pnb, _, _ in hyps]
    kept = [(prefix, log_add(pb, pnb), got + context.end(state)) for prefix, pb, pnb, state, got in hyps]
    return sorted(((prefix, score + b, b) for prefix, score, b in kept), key=lambda h: h[1], reverse=True)[:beam_size]


def emissions(rng, frames, vocab, blank, ties):
    """(T, V) log-probabilities: peaky (blank-heavy) or, with ``ties``, from a few integer logits so that equal
    scores are common; now and then a frame with -inf entries."""
    rows = []
    for _ in range(frames):
        if ties:
            logits = torch.tensor([float(rng.choice([0, 0, 1, 2])) for _ in range(vocab)])
        else:
            logits = torch.tensor([rng.gauss(0.0, 2.0) for _ in range(vocab)])
            logits[blank] += rng.choice([0.0, 4.0, 8.0])
        row = logits.log_softmax(-1)
        if rng.random() < 0.05:
            row[rng.randrange(vocab)] = -math.inf
        rows.append(row)
    return torch.stack(rows)


@pytest.mark.parametrize("ties", [True, False])
@pytest.mark.parametrize("hotwords", [False, True])
def test_the_trie_search_gives_the_bytes_of_the_tuple_search(ties, hotwords):
    rng = random.Random(7 + ties + 2 * hotwords)
    for case in range(40):
        vocab, blank = rng.randint(2, 7), 0 if case % 3 else rng.randrange(2)
        blank = min(blank, vocab - 1)
        beam = rng.choice([1, 2, 3, 5, 10])
        graph = None
        if hotwords:
            units = [u for u in range(vocab) if u != blank]
            graph = ContextGraph(list({tuple(rng.choice(units) for _ in range(rng.randint(1, 3))): rng.choice(
                [0.5, 1.5, 4.0]) for _ in range(3)}.items()))
        logp = emissions(rng, rng.randint(1, 60), vocab, blank, ties)
        got = _prefix_beam_one(logp, beam, blank, graph)
        want = tuple_prefix_search(logp, beam, blank, graph)
        assert repr(got) == repr(want), (case, vocab, blank, beam)


def test_a_frame_costs_no_more_memory_late_in_a_long_utterance(monkeypatch):
    """A long utterance (a token every other frame): what a frame holds while it is searched (its candidates, up to
    beam x beam) does not grow with the prefixes' length. The tuple search copied the prefix for every extension,
    so a frame near the end held about six times what one near the start did (2026-12-03)."""
    beam, vocab, frames = 10, 11, 1200
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(frames, vocab, generator=g)
    logits[0::2] += torch.nn.functional.one_hot(torch.randint(1, vocab, (frames // 2,), generator=g), vocab) * 6.0
    logits[1::2, 0] += 6.0
    held: List[int] = []   # per frame: the memory at its cut above what the previous cut left
    last = [0]

    def measured_sorted(*args, **kwargs):  # the frame's cut: every candidate is in memory
        now, peak = tracemalloc.get_traced_memory()
        held.append(peak - last[0])
        out = sorted(*args, **kwargs)
        tracemalloc.reset_peak()
        last[0] = tracemalloc.get_traced_memory()[0]
        return out

    monkeypatch.setattr(search, "sorted", measured_sorted, raising=False)
    tracemalloc.start()
    try:
        best = search._prefix_beam_one(logits.log_softmax(-1), beam, 0)[0][0]
    finally:
        tracemalloc.stop()
    assert len(best) > frames // 3 and len(held) == frames
    early, late = held[frames // 10:frames // 5], held[-frames // 10:]
    # (medians: a frame that grows the trie's lists or table copies them once, which is not the frame's work)
    assert statistics.median(late) < 2 * statistics.median(early), (statistics.median(early), statistics.median(late))


def test_the_trie_releases_what_left_the_beam():
    trie = PrefixTrie(5)
    a = trie.make(ROOT, 1, 1)            # (1,)
    ab = trie.make(a, 2, a * 5 + 2)      # (1, 2)
    c = trie.make(ROOT, 3, 3)            # (3,)
    trie.keep([ROOT], [ab])              # (1,) stays as the ancestor of the beam's (1, 2); (3,) goes
    assert trie.tokens(ab) == (1, 2) and len(trie) == 3 and 3 not in trie.child
    abd = trie.make(ab, 4, ab * 5 + 4)
    assert abd == c                      # a released node is reused
    trie.keep([ab], [abd])               # (1, 2) left the beam but is the parent of (1, 2, 4)
    assert trie.tokens(abd) == (1, 2, 4) and len(trie) == 4
    e = trie.make(ROOT, 4, 4)
    trie.keep([abd], [e])                # nothing of (1, 2, 4) is in the beam: the whole branch goes
    assert len(trie) == 2 and trie.child == {4: e} and trie.tokens(e) == (4,)


def test_a_search_holds_only_the_beam_and_its_ancestors(monkeypatch):
    """After every frame's cut the trie holds exactly the beam's prefixes and their ancestors."""
    g = torch.Generator().manual_seed(1)
    logp = (torch.randn(600, 8, generator=g) * 3).log_softmax(-1)
    frames = []
    real = PrefixTrie.keep

    def checked(self, before, after):
        real(self, before, after)
        need = {ROOT}
        for node in after:
            while node not in need:
                need.add(node)
                node = self.parent[node]
        frames.append(need == {n for n in range(len(self.parent)) if self.unit[n] >= 0} | {ROOT})

    monkeypatch.setattr(PrefixTrie, "keep", checked)
    ctc_prefix_beam_search(logp.unsqueeze(0), torch.tensor([600]), beam_size=4)
    assert len(frames) == 600 and all(frames)
