"""The context graph (transformer/context_graph.py): the trie and failure arcs against brute force on random phrase
sets, and the bonus rule (a completed phrase keeps its bonus, a partial one is taken back at the end)."""
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wenet_udps.transformer.context_graph import ContextGraph


def occurrences(phrase, seq):
    n = len(phrase)
    return sum(1 for i in range(len(seq) - n + 1) if tuple(seq[i:i + n]) == tuple(phrase))


def paid(units, free):
    """How many of ``units`` earn a bonus: all but the free ones."""
    return sum(1 for u in units if u not in free)


def brute_node_score(phrases, prefix, free=()):
    """The open match's bonus of a phrase prefix: its paid length times the best score of the phrases through it."""
    return paid(prefix, free) * max(s for p, s in phrases if tuple(p[:len(prefix)]) == tuple(prefix))


def brute_bonus(phrases, seq, free=()):
    """(kept, open) by brute force: every occurrence of every phrase in ``seq`` (overlapping, nested) paid its own
    score times its paid length; the open match is the longest suffix of ``seq`` that some phrase starts with."""
    kept = sum(occurrences(p, seq) * s * paid(p, free) for p, s in phrases)
    prefixes = {tuple(p[:k]) for p, _ in phrases for k in range(1, len(p) + 1)}
    longest = max((j for j in range(1, len(seq) + 1) if tuple(seq[len(seq) - j:]) in prefixes), default=0)
    return kept, brute_node_score(phrases, seq[len(seq) - longest:], free) if longest else 0.0


def random_phrases(rng, vocab, count, longest):
    out = {}
    for _ in range(count):
        units = tuple(rng.randrange(vocab) for _ in range(rng.randint(1, longest)))
        out[units] = max(out.get(units, 0.0), rng.choice([0.5, 1.0, 2.5]))
    return list(out.items())


@pytest.mark.parametrize("free", [(), (0,)], ids=["no_free_unit", "unit_0_free"])
@pytest.mark.parametrize("seed", range(40))
def test_matches_and_kept_bonus_equal_brute_force(seed, free):
    """Each step's match count (phrases ending there, through the output links) sums to the brute-force number
    of phrase occurrences, overlapping and nested ones included; the kept bonus is each occurrence's own score
    times its paid length (free units earn nothing); the bonus while searching is the kept one plus the open
    match, and the end takes the open match back."""
    rng = random.Random(seed)
    vocab = rng.choice([2, 3, 5])  # small alphabets: many shared prefixes, overlaps and failure arcs
    phrases = random_phrases(rng, vocab, rng.randint(1, 12), 5)
    graph = ContextGraph(phrases, free_units=free)
    for _ in range(5):
        seq = [rng.randrange(vocab) for _ in range(rng.randint(0, 40))]
        state, bonus, count = 0, 0.0, 0
        for i, unit in enumerate(seq):
            state, delta = graph.step(state, unit)
            bonus += delta
            count += graph.matches[state]
            kept, open_part = brute_bonus(phrases, seq[:i + 1], free)
            assert bonus == pytest.approx(kept + open_part)
        assert count == sum(occurrences(p, seq) for p, _ in phrases)
        kept = brute_bonus(phrases, seq, free)[0]
        assert bonus + graph.end(state) == pytest.approx(kept)
        assert graph.final_bonus(seq) == pytest.approx(kept)


@given(st.lists(st.tuples(st.lists(st.integers(0, 2), min_size=1, max_size=4),
                          st.sampled_from([0.5, 1.0, 2.5, 4.0])), min_size=1, max_size=8),
       st.lists(st.integers(0, 2), max_size=24), st.sampled_from([(), (0,)]))
@settings(max_examples=300, deadline=None)
def test_property_bonus_equals_a_brute_force_matcher(listed, seq, free):
    """Issue 82, F1: over any phrase set on a 3-unit alphabet (shared prefixes, overlaps, a phrase inside another
    with another score), with or without a free unit, the bonus after each unit is the brute-force kept bonus plus
    the open match, and the final bonus is the kept one."""
    phrases = {}
    for units, score in listed:
        phrases[tuple(units)] = max(phrases.get(tuple(units), 0.0), score)
    phrases = list(phrases.items())
    graph = ContextGraph(phrases, free_units=free)
    state, bonus = 0, 0.0
    for i, unit in enumerate(seq):
        state, delta = graph.step(state, unit)
        bonus += delta
        assert bonus == pytest.approx(sum(brute_bonus(phrases, seq[:i + 1], free)))
    assert graph.final_bonus(seq) == pytest.approx(brute_bonus(phrases, seq, free)[0])


def test_a_phrase_inside_a_longer_one_is_paid_its_own_score():
    graph = ContextGraph([((1, 2), 5.0), ((1, 2, 3), 1.0)])
    assert graph.final_bonus([1, 2]) == pytest.approx(10.0)
    assert graph.final_bonus([1, 2, 3]) == pytest.approx(10.0 + 3.0)
    assert graph.final_bonus([9, 2]) == 0.0


def test_completed_phrase_keeps_its_bonus_partial_one_is_taken_back():
    graph = ContextGraph([((1, 2, 3), 2.0)])
    assert graph.final_bonus([1, 2, 3]) == pytest.approx(6.0)
    assert graph.final_bonus([7, 1, 2, 3, 7]) == pytest.approx(6.0)
    assert graph.final_bonus([1, 2]) == 0.0            # a partial match at the end: nothing
    assert graph.final_bonus([1, 2, 7]) == 0.0         # left mid-way: taken back at once
    state, bonus = 0, 0.0
    for unit in (1, 2):
        state, delta = graph.step(state, unit)
        bonus += delta
    assert bonus == pytest.approx(4.0)                 # while searching, the open match counts ...
    assert bonus + graph.end(state) == 0.0             # ... and the end takes it back
    assert graph.final_bonus([1, 2, 1, 2, 3]) == pytest.approx(6.0)  # a restart through the failure arc
    assert graph.final_bonus([1, 2, 3, 1, 2, 3]) == pytest.approx(12.0)


def test_a_word_boundary_alone_earns_nothing():
    """Issue 82's no-harm check: with units of letters and a bare word boundary (AN4's), every phrase begins with
    the boundary, so a paid boundary gave every word start of every hypothesis a bonus (insertions 2 -> 11 with 100
    unrelated words). As a free unit it is matched but earns nothing: a word start alone, or a word that leaves the
    phrase after the boundary, is worth 0, and a completed phrase is paid for its letters only."""
    space, a, b = 0, 1, 2
    graph = ContextGraph([((space, a, b), 2.0)], free_units=(space,))
    state, delta = graph.step(0, space)
    assert delta == 0.0 and graph.node_score[state] == 0.0       # a word start alone: nothing, not even open
    assert graph.final_bonus([space, a, b]) == pytest.approx(4.0)  # two letters at 2, the boundary free
    assert graph.final_bonus([space, b, space, a, b]) == pytest.approx(4.0)
    assert graph.final_bonus([space, b, space, b]) == 0.0
    paid_space = ContextGraph([((space, a, b), 2.0)])
    assert paid_space.step(0, space)[1] == pytest.approx(2.0)        # what it was: every word start drawn


def test_nested_phrases_each_count_once():
    graph = ContextGraph([((2, 3), 1.0), ((1, 2, 3, 4), 1.0)])
    assert graph.final_bonus([1, 2, 3, 4]) == pytest.approx(2.0 + 4.0)
    assert graph.final_bonus([1, 2, 3]) == pytest.approx(2.0)  # "2 3" completed; "1 2 3 4" not


@pytest.mark.parametrize("phrases", [[((), 1.0)], [((1,), 0.0)], [((1,), -1.0)]])
def test_bad_phrases_are_refused(phrases):
    with pytest.raises(ValueError):
        ContextGraph(phrases)


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("rows", ["every state's", "per call, restarting"])
def test_step_rows_and_memo_give_the_numbers_of_step_bit_for_bit(seed, rows, monkeypatch):
    """The joint search's rows (context_table) and the prefix search's memo give exactly ``step`` (and ``end`` for
    the end unit): the same next state and the same float, whichever way the rows were made."""
    import numpy as np

    from wenet_udps.transformer import context_table
    if rows != "every state's":
        monkeypatch.setattr(context_table, "FULL_CELLS", 0)
        monkeypatch.setattr(context_table, "CALL_CELLS", 60)  # so the call's rows start afresh again and again
    rng = random.Random(seed)
    vocab = rng.choice([2, 3, 5, 17])
    graph = ContextGraph(random_phrases(rng, vocab, rng.randint(1, 30), 6))
    assert graph.arrays.full == (rows == "every state's")
    end = vocab + rng.choice([1, 30])
    table = graph.table(end)
    for _ in range(4):
        states = np.array([rng.randrange(len(graph)) for _ in range(12)], dtype=np.int64)
        units = np.array([[rng.randrange(vocab + 40) for _ in range(7)] for _ in states], dtype=np.int64)
        nxt, delta = table.lookup(states, units)
        want = [(0, graph.end(s)) if u == end else graph.step(s, u) for s, row in zip(states.tolist(), units.tolist())
                for u in row]
        assert nxt.ravel().tolist() == [n for n, _ in want]
        assert [d.hex() for d in delta.ravel().tolist()] == [d.hex() for _, d in want]
        for s, row in zip(states.tolist(), units.tolist()):
            for u in row:
                assert graph.memo[s, u] == graph.step(s, u)


def test_memory_grows_linearly_with_the_phrases_total_length():
    """States are at most one per unit of the phrases (plus the root), and the bytes per unit of total length do
    not grow from 1,000 to 8,000 phrases, over letters or over many units (bench/hotword_memory.py prints the
    numbers)."""
    for units, longest in ((26, 6), (500, 4)):  # letters (every state's step rows kept), BPE-like pieces (none)
        per_unit = {}
        for count in (1000, 2000, 4000, 8000):
            rng = random.Random(count)
            phrases = random_phrases(rng, units, count, longest)
            total = sum(len(p) for p, _ in phrases)
            graph = ContextGraph(phrases)
            assert len(graph) <= total + 1
            assert graph.arrays.full == (units == 26)
            graph.table()  # (the rows, where the graph keeps them, are made on first use)
            per_unit[count] = graph.nbytes / total
        assert max(per_unit.values()) <= 1.2 * per_unit[1000], (units, per_unit)
