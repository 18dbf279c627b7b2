"""The prefix search's beam with hotwords (issue 82, F2): a prefix that completed a phrase is not lost to prefixes
whose open matches outscore it only until the end takes their open bonus back."""
import math

import torch

from wenet_udps.transformer.context_graph import ContextGraph
from wenet_udps.transformer.search import ctc_prefix_beam_search

TINY = 1e-4  # every other unit of a frame: never in its top two


def frames(*rows):
    """(1, T, 5) log-probabilities (blank 0) from one {unit: probability} a frame, the other units TINY."""
    logp = torch.full((1, len(rows), 5), math.log(TINY))
    for t, row in enumerate(rows):
        for unit, p in row.items():
            logp[0, t, unit] = math.log(p)
    return logp, torch.tensor([len(rows)])


# "1 2" is a phrase (kept: 2 x 1.0); "1 4 4 4" and "3 4 4 4" are long phrases whose open match after "1 4" or
# "3 4" is worth 2 x 5.0 while searching and nothing at the end.
GRAPH = ContextGraph([((1, 2), 1.0), ((1, 4, 4, 4), 5.0), ((3, 4, 4, 4), 5.0)])


def test_the_last_frame_is_cut_by_the_kept_bonus():
    logp, lens = frames({1: 0.6, 3: 0.4}, {2: 0.5, 4: 0.5})
    got = ctc_prefix_beam_search(logp, lens, 2, context=GRAPH)[0]
    assert got.tokens == [1, 2]
    assert got.nbest_context[0] == 2.0
    assert len(got.nbest) <= 2


def test_a_prefix_best_by_its_kept_bonus_outlives_a_frame_of_open_matches():
    logp, lens = frames({1: 0.6, 3: 0.4}, {2: 0.5, 4: 0.5}, {0: 0.9, 4: 0.1})
    got = ctc_prefix_beam_search(logp, lens, 2, context=GRAPH)[0]
    assert got.tokens == [1, 2]
    assert got.nbest_context[0] == 2.0
    plain = ctc_prefix_beam_search(logp, lens, 2)[0]
    assert plain.tokens != [1, 2] or plain.nbest_scores[0] < got.nbest_scores[0]
