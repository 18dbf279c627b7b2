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


def test_phrase_words_outside_the_lm_are_named_in_one_warning(tmp_path, caplog):
    """Issue 82, F8: a phrase holding a word the LM lacks can never be completed by the lexicon search; the
    *_lm modes say so once, naming the words, however many batches they decode."""
    import logging

    import torch

    from tests.lm.lm_helpers import need_flashlight, write_units
    from tests.lm.test_search import write_arpa
    from wenet_udps.decode.hotwords import context_graph
    from wenet_udps.lm.search import LmSearch, LmSearchConfig
    from wenet_udps.text import CharTokenizer

    need_flashlight()
    write_units(tmp_path / "units.txt", ["<blank>", "<unk>", "a", "b", "c", "▁", "<sos/eos>"])
    tok = CharTokenizer(symbol_table_path=str(tmp_path / "units.txt"))
    search = LmSearch(write_arpa(tmp_path / "lm.arpa", {"a": -0.9, "ab": -0.9, "c": -0.9}), tok, 0,
                      LmSearchConfig(beam_size=4))
    graph = context_graph(["ab c", "abc ba", "cab"], tok, 2.0)
    logp = torch.randn(1, 12, 7, generator=torch.Generator().manual_seed(0)).log_softmax(-1)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            search(logp, torch.tensor([12]), graph)
    named = [r.getMessage() for r in caplog.records if "not words of the LM" in r.getMessage()]
    assert len(named) == 1 and "(abc ba cab)" in named[0], caplog.text
