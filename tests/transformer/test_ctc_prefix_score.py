"""The vectorised CTC prefix score of the joint search against sums over every CTC alignment."""
import itertools
import math
from collections import defaultdict

import pytest
import torch

from wenet_udps.transformer.ctc_prefix_score import CtcPrefixScorer
from wenet_udps.utils.common import log_add, remove_duplicates_and_blank

pytestmark = pytest.mark.usefixtures("one_thread")

BLANK, EOS = 0, 4
V = 5


def exact_scores(logp, frames):
    """{labels: log P(labels)} and {prefix: log of the probability of every alignment whose labels start with it},
    by summing over all V ** frames alignments."""
    full, prefix = defaultdict(lambda: -math.inf), defaultdict(lambda: -math.inf)
    for path in itertools.product(range(V), repeat=frames):
        labels = tuple(remove_duplicates_and_blank(list(path), BLANK))
        p = sum(float(logp[t, k]) for t, k in enumerate(path))
        full[labels] = log_add(full[labels], p)
        for i in range(len(labels) + 1):
            prefix[labels[:i]] = log_add(prefix[labels[:i]], p)
    return full, prefix


def walk(scorer, rows, utt):
    """The forward variables of each prefix in ``rows`` (label tuples) of utterance ``utt``, made by extending the
    empty prefix one label at a time, as the search does."""
    r_n, r_b = scorer.initial(1)
    r_n, r_b = r_n[utt:utt + 1].repeat(len(rows), 1), r_b[utt:utt + 1].repeat(len(rows), 1)
    for i in range(max(map(len, rows))):
        token = torch.tensor([g[i] if i < len(g) else 1 for g in rows])
        last = torch.tensor([g[i - 1] if 0 < i <= len(g) else -1 for g in rows])
        new_n, new_b = scorer.extend(r_n, r_b, torch.full((len(rows),), utt), last, torch.full((len(rows),), i == 0),
                                     token)
        keep = torch.tensor([i < len(g) for g in rows]).unsqueeze(1)
        r_n, r_b = torch.where(keep, new_n, r_n), torch.where(keep, new_b, r_b)
    return r_n, r_b


@pytest.mark.parametrize("seed", [0, 1])
def test_prefix_scores_are_the_sums_over_all_alignments(seed):
    """Two utterances of 6 and 4 frames in one batch (the shorter padded), prefixes with repeats, every candidate:
    psi(g + c) is the sum over the alignments starting with g + c, eos the full probability of g, blank -inf."""
    g = torch.Generator().manual_seed(seed)
    logp = (torch.randn(2, 6, V, generator=g, dtype=torch.float64) * 2).log_softmax(-1)
    lengths = torch.tensor([6, 4])
    scorer = CtcPrefixScorer(logp, lengths, BLANK, EOS)
    rows = [(), (1,), (1, 1), (2, 1), (1, 2, 1), (3, 3, 3), (1, 2, 3, 1)]
    cand = torch.arange(V).repeat(len(rows), 1)
    checked = 0
    for utt, frames in enumerate(lengths.tolist()):
        full, prefix = exact_scores(logp[utt], frames)
        r_n, r_b = walk(scorer, rows, utt)
        last = torch.tensor([r[-1] if r else -1 for r in rows])
        empty = torch.tensor([not r for r in rows])
        psi = scorer.scores(r_n, r_b, torch.full((len(rows),), utt), last, empty, cand)
        for i, row in enumerate(rows):
            for c in range(V):
                want = (-math.inf if c == BLANK else full[row] if c == EOS else prefix[row + (c,)])
                got = float(psi[i, c])
                if want == -math.inf:  # e.g. 4 labels with a repeat in 4 frames: no alignment at all
                    assert got == -math.inf, (utt, row, c, got)
                else:
                    assert got == pytest.approx(want, abs=1e-5), (utt, row, c)
                    checked += 1
    assert checked > 40


def test_scores_do_not_depend_on_the_batch_or_its_padding():
    """A prefix's forward variables are the same bits alone or beside a longer utterance (padded frames, more rows);
    its prefix scores the same to the last few bits (a sum over the frames, whose grouping follows the padding)."""
    g = torch.Generator().manual_seed(3)
    logp = torch.randn(2, 50, V, generator=g).log_softmax(-1)
    both = CtcPrefixScorer(logp, torch.tensor([50, 31]), BLANK, EOS)
    alone = CtcPrefixScorer(logp[1:, :31], torch.tensor([31]), BLANK, EOS)
    rows = [(1, 2), (2, 2, 1)]
    r_n, r_b = walk(both, rows, 1)
    a_n, a_b = walk(alone, rows, 0)
    assert torch.equal(r_n[:, :31], a_n) and torch.equal(r_b[:, :31], a_b)
    cand = torch.tensor([[1, 2, 3, EOS]] * 2)
    last, empty = torch.tensor([2, 1]), torch.tensor([False, False])
    psi = both.scores(r_n, r_b, torch.tensor([1, 1]), last, empty, cand)
    psi_alone = alone.scores(a_n, a_b, torch.tensor([0, 0]), last, empty, cand)
    assert bool(torch.isfinite(psi).all()) and torch.allclose(psi, psi_alone, rtol=0, atol=1e-12)


def test_long_utterance_scores_stay_exact():
    """1,500 frames (a minute of speech): the cumulative sums reach -5,000 and more; the prefix score of a label still
    equals the frame-by-frame recursion (Algorithm 2 of Watanabe et al.) in float64."""
    g = torch.Generator().manual_seed(4)
    frames = 1500
    logp = (torch.randn(1, frames, V, generator=g, dtype=torch.float64) * 4).log_softmax(-1)
    scorer = CtcPrefixScorer(logp, torch.tensor([frames]), BLANK, EOS)
    r_n, r_b = walk(scorer, [(1, 2)], 0)
    psi = scorer.scores(r_n, r_b, torch.tensor([0]), torch.tensor([2]), torch.tensor([False]), torch.tensor([[3]]))
    # the recursion itself, one frame at a time, for g = (1, 2) then c = 3
    x = logp[0]
    ninf = -math.inf
    rn = [ninf] * frames
    rb = [float(x[: t + 1, BLANK].sum()) for t in range(frames)]
    for label, first in ((1, True), (2, False)):
        phi = [log_add(a, b) for a, b in zip(rn, rb)]  # (the labels differ from the one before)
        new_n, new_b = [ninf] * frames, [ninf] * frames
        for t in range(frames):
            before = (0.0 if first else ninf) if t == 0 else phi[t - 1]
            new_n[t] = log_add(new_n[t - 1] if t else ninf, before) + float(x[t, label])
            new_b[t] = log_add(new_b[t - 1] if t else ninf, new_n[t - 1] if t else ninf) + float(x[t, BLANK])
        rn, rb = new_n, new_b
    phi = [log_add(a, b) for a, b in zip(rn, rb)]
    want = -math.inf
    for t in range(1, frames):
        want = log_add(want, phi[t - 1] + float(x[t, 3]))
    assert float(psi[0, 0]) == pytest.approx(want, abs=1e-9)
    assert float(x[:, 3].sum()) < -5e3  # the regime the test is for
