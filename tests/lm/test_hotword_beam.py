"""The lexicon search's beam with hotwords (issue 82, F2): its last frame is cut by the kept bonus, so a hypothesis
that completed a phrase is not lost to ones whose open match the end takes back."""
import math

import numpy as np

from wenet_udps.lm.context import TriePaths, WordContext
from wenet_udps.lm.lexicon_search import LexiconBeamSearch, LexiconTrie, SearchOptions
from wenet_udps.transformer.context_graph import ContextGraph

SPELLING = {0: [1, 2], 1: [1, 4], 2: [3, 4]}  # three two-unit words (unit 0 is the blank and the word boundary)


class FlatLm:
    """Every word and the end of sentence at log10 probability 0: the hotwords' bonus alone tells words apart."""

    def start(self, _):
        return ()

    def score(self, state, word):
        return state + (word,), 0.0

    def finish(self, state):
        return state, 0.0


def test_the_last_frame_is_cut_by_the_kept_bonus():
    trie = LexiconTrie()
    for word, units in SPELLING.items():
        trie.insert(units, word, 0.0)
    trie.smear()
    # "1 2" (word 0) completes a phrase; "1 4" and "3 4" are open matches of long phrases, worth more while open
    graph = ContextGraph([((1, 2), 1.0), ((1, 4, 4, 4), 5.0), ((3, 4, 4, 4), 5.0)])
    emissions = np.full((2, 5), math.log(1e-4), dtype=np.float32)
    emissions[0, 1], emissions[0, 3] = math.log(0.6), math.log(0.4)
    emissions[1, 2], emissions[1, 4] = math.log(0.5), math.log(0.5)
    search = LexiconBeamSearch(trie, FlatLm(), 0, 0, SearchOptions(beam_size=2, beam_threshold=25.0, lm_weight=0.0,
                                                                   word_score=0.0))
    bias = WordContext(graph, SPELLING, TriePaths(SPELLING, trie.children), None)
    got = search.search(emissions, bias)
    assert got[0][0] == (0,)
    assert got[0][1] == float(emissions[0, 1]) + float(emissions[1, 2]) + 2.0
    plain = search.search(emissions)
    assert plain[0][0] == (0,) or plain[0][1] < got[0][1]
