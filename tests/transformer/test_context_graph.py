"""The context graph (transformer/context_graph.py): the trie and failure arcs against brute force on random phrase
sets, and the bonus rule (a completed phrase keeps its bonus, a partial one is taken back at the end)."""
import random

import pytest

from wenet_udps.transformer.context_graph import ContextGraph


def occurrences(phrase, seq):
    n = len(phrase)
    return sum(1 for i in range(len(seq) - n + 1) if tuple(seq[i:i + n]) == tuple(phrase))


def brute_node_score(phrases, prefix):
    """The bonus of a phrase prefix: per unit, the best score of the phrases that start with the prefix so far."""
    total = 0.0
    for i in range(1, len(prefix) + 1):
        total += max(s for p, s in phrases if tuple(p[:i]) == tuple(prefix[:i]))
    return total


def random_phrases(rng, vocab, count, longest):
    out = {}
    for _ in range(count):
        units = tuple(rng.randrange(vocab) for _ in range(rng.randint(1, longest)))
        out[units] = max(out.get(units, 0.0), rng.choice([0.5, 1.0, 2.5]))
    return list(out.items())


@pytest.mark.parametrize("seed", range(40))
def test_matches_and_kept_bonus_equal_brute_force(seed):
    """Each step's match count (phrases ending there, through the output links) sums to the brute-force number
    of phrase occurrences, overlapping and nested ones included; the kept bonus is each occurrence's prefix
    bonus; the bonus while searching is the kept one plus the open match, and the end takes the open match back."""
    rng = random.Random(seed)
    vocab = rng.choice([2, 3, 5])  # small alphabets: many shared prefixes, overlaps and failure arcs
    phrases = random_phrases(rng, vocab, rng.randint(1, 12), 5)
    graph = ContextGraph(phrases)
    for _ in range(5):
        seq = [rng.randrange(vocab) for _ in range(rng.randint(0, 40))]
        state, bonus, count = 0, 0.0, 0
        for i, unit in enumerate(seq):
            state, delta = graph.step(state, unit)
            bonus += delta
            count += graph.matches[state]
            # the state is the longest suffix of seq[:i+1] that is a phrase prefix
            prefixes = {p[:k] for p, _ in phrases for k in range(1, len(p) + 1)}
            longest = max((j for j in range(1, i + 2) if tuple(seq[i + 1 - j:i + 1]) in prefixes), default=0)
            kept = sum(occurrences(p, seq[:i + 1]) * brute_node_score(phrases, p) for p, _ in phrases)
            open_part = brute_node_score(phrases, seq[i + 1 - longest:i + 1]) if longest else 0.0
            assert bonus == pytest.approx(kept + open_part)
        assert count == sum(occurrences(p, seq) for p, _ in phrases)
        kept = sum(occurrences(p, seq) * brute_node_score(phrases, p) for p, _ in phrases)
        assert bonus + graph.end(state) == pytest.approx(kept)
        assert graph.final_bonus(seq) == pytest.approx(kept)


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


def test_nested_phrases_each_count_once():
    graph = ContextGraph([((2, 3), 1.0), ((1, 2, 3, 4), 1.0)])
    assert graph.final_bonus([1, 2, 3, 4]) == pytest.approx(2.0 + 4.0)
    assert graph.final_bonus([1, 2, 3]) == pytest.approx(2.0)  # "2 3" completed; "1 2 3 4" not


@pytest.mark.parametrize("phrases", [[((), 1.0)], [((1,), 0.0)], [((1,), -1.0)]])
def test_bad_phrases_are_refused(phrases):
    with pytest.raises(ValueError):
        ContextGraph(phrases)
