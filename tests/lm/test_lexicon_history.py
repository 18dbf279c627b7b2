"""The lexicon search's word histories as interned nodes (issue 80, F12): ordered as tuples of words are, and a
search's memory grows with the words it wrote, not with their square (each history was a tuple: every word end copied
it and the LM memo kept a copy per word asked)."""
import itertools
import math
import random
import tracemalloc

import numpy as np

from wenet_udps.lm import lexicon_search
from wenet_udps.lm.lexicon_search import LexiconBeamSearch, LexiconTrie, SearchOptions

SPELLING = {0: [1, 2], 1: [3], 2: [2, 4]}  # unit 0: the blank and the word boundary


class BigramLm:
    """A state of one word (O(1), as KenLM's are): scores depend on the last word only."""

    def start(self, _):
        return -1

    def score(self, state, word):
        return word, -0.1 * ((state + word) % 3)

    def finish(self, state):
        return state, -0.2


def test_histories_are_ordered_as_tuples_of_their_words():
    rng = random.Random(0)
    root = lexicon_search.History()
    seqs = {()} | {tuple(rng.randrange(3) for _ in range(rng.randint(1, 5))) for _ in range(60)}
    node = {}
    for seq in seqs:
        h = root
        for w in seq:
            h = h.then(w)
        node[seq] = h
        assert h.words() == seq
    for a, b in itertools.product(sorted(seqs), repeat=2):
        assert (node[a] < node[b]) == (a < b) and (node[a] > node[b]) == (a > b), (a, b)
        assert (node[a] == node[b]) == (a == b) and (node[a] is node[b]) == (a == b)


def search_peak(words):
    """Peak traced bytes of one search over an utterance of ``words`` word spikes (four frames each)."""
    trie = LexiconTrie()
    for word, units in SPELLING.items():
        trie.insert(units, word, -1.0)
    trie.smear()
    rng = np.random.default_rng(0)
    frames = np.full((4 * words, 5), math.log(0.02), dtype=np.float32)
    frames[:, 0] = math.log(0.9)
    for i, word in enumerate(rng.integers(0, 3, words).tolist()):
        for j, unit in enumerate(SPELLING[word]):
            frames[4 * i + j] = math.log(0.02)
            frames[4 * i + j, unit] = math.log(0.9)
    search = LexiconBeamSearch(trie, BigramLm(), 0, 0, SearchOptions(beam_size=4, beam_threshold=25.0, lm_weight=1.0,
                                                                     word_score=0.0))
    tracemalloc.start()
    try:
        best = search.search(frames)[0][0]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(best) >= words // 2
    return peak


def test_a_search_holds_memory_linear_in_its_words():
    small, large = search_peak(150), search_peak(600)
    assert large < 6 * small, (small, large)  # 4x the words: 4x the memory, where the tuples made it about 16x
