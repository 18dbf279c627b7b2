"""CTC forced alignment: the best path that spells the hypothesis, its frames per token."""
import pytest
import torch

from wenet_udps.decode.align import ctc_forced_align, token_times


def emissions(best, vocab=5):
    """(T, V) log-probs whose best symbol at frame t is ``best[t]`` (probability 0.9)."""
    logp = torch.full((len(best), vocab), 0.1 / (vocab - 1)).log()
    for t, s in enumerate(best):
        logp[t, s] = torch.tensor(0.9).log()
    return logp


def test_spans_follow_the_best_path_and_repeats_need_a_blank():
    logp = emissions([0, 2, 2, 0, 3, 0, 3, 3, 0])
    assert ctc_forced_align(logp, [2, 3, 3]) == [(1, 2), (4, 4), (6, 7)]
    # A hypothesis the frames disagree with still gets a path (the best one that spells it).
    assert len(ctc_forced_align(logp, [4])) == 1
    assert ctc_forced_align(logp, []) == []
    assert token_times([(1, 2), (4, 4)], 0.04) == [(0.04, 0.12), (0.16, 0.2)]


def test_too_many_tokens_for_the_frames():
    with pytest.raises(ValueError, match="3 tokens cannot be aligned to 3 CTC frames|4 tokens"):
        ctc_forced_align(emissions([1, 1, 1]), [1, 1, 2])


def test_an_optional_unit_takes_a_frame_where_ctc_emitted_it_and_none_where_it_did_not():
    """Issue 80 round 7, F9: an LM search puts the space unit between two words whether CTC emitted it or not, so
    'A ▁ B' on two frames could not be aligned (a ValueError traceback from transcribe(timestamps=True)). The space
    may take no frame; where CTC emitted it, it has its frame."""
    assert ctc_forced_align(emissions([2, 3]), [2, 4, 3], optional={4}) == [(0, 0), (1, 0), (1, 1)]
    assert ctc_forced_align(emissions([2, 4, 3]), [2, 4, 3], optional={4}) == [(0, 0), (1, 1), (2, 2)]
    assert ctc_forced_align(emissions([2, 0, 3, 3]), [2, 4, 3], optional={4}) == [(0, 0), (1, 0), (2, 3)]
    # two equal units around a skipped space still need a blank between them; a required unit is never skipped
    with pytest.raises(ValueError, match="3 tokens cannot be aligned to 2 CTC frames"):
        ctc_forced_align(emissions([2, 2]), [2, 4, 2], optional={4})
    spans = ctc_forced_align(emissions([2, 0, 2]), [2, 4, 2], optional={4})
    assert spans[0] == (0, 0) and spans[2] == (2, 2) and spans[1][1] - spans[1][0] <= 0
    with pytest.raises(ValueError, match="3 tokens cannot be aligned to 2 CTC frames"):
        ctc_forced_align(emissions([2, 3]), [2, 4, 3])
