import pytest
import torch
import torch.nn.functional as F

from wenet_udps.transformer.ctc import CTC
from wenet_udps.transformer.label_smoothing_loss import LabelSmoothingLoss


def test_ctc_loss_equals_torch_sum_over_batch():
    ctc = CTC(odim=7, encoder_output_size=5, blank_id=0)
    hs = torch.randn(3, 12, 5)
    hlens = torch.tensor([12, 10, 6])
    ys = torch.tensor([[1, 2, 3, 4], [5, 5, -1, -1], [6, -1, -1, -1]])
    ylens = torch.tensor([4, 2, 1])
    loss, log_probs = ctc(hs, hlens, ys, ylens)
    expected_lp = F.log_softmax(ctc.ctc_lo(hs), dim=2)
    per_utt = [F.ctc_loss(expected_lp[i, :hlens[i]].unsqueeze(1), ys[i:i + 1, :ylens[i]], hlens[i:i + 1],
                          ylens[i:i + 1], blank=0, reduction="sum") for i in range(3)]
    assert torch.allclose(loss, sum(per_utt) / 3, atol=1e-4)
    assert torch.allclose(log_probs, expected_lp, atol=1e-5)
    assert torch.allclose(ctc.log_softmax(hs), expected_lp, atol=1e-5)
    assert torch.equal(ctc.argmax(hs), expected_lp.argmax(2))


def test_ctc_unreduced_and_other_blank():
    ctc = CTC(odim=4, encoder_output_size=3, reduce=False, blank_id=3)
    hs = torch.randn(2, 6, 3)
    loss, _ = ctc(hs, torch.tensor([6, 6]), torch.tensor([[0, 1], [2, 2]]), torch.tensor([2, 2]))
    assert loss.shape == (2,)
    lp = F.log_softmax(ctc.ctc_lo(hs), 2)
    ref = F.ctc_loss(lp.transpose(0, 1), torch.tensor([[0, 1], [2, 2]]), torch.tensor([6, 6]),
                     torch.tensor([2, 2]), blank=3, reduction="none") / 2
    assert torch.allclose(loss, ref, atol=1e-5)
    with pytest.raises(ValueError, match="ctc_blank_id"):
        CTC(odim=4, encoder_output_size=3, blank_id=4)


def test_ctc_impossible_alignment_gives_zero_not_inf():
    ctc = CTC(odim=5, encoder_output_size=3)
    hs = torch.randn(1, 2, 3, requires_grad=True)
    loss, _ = ctc(hs, torch.tensor([2]), torch.tensor([[1, 2, 3, 4]]), torch.tensor([4]))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(hs.grad).all()


@pytest.mark.parametrize("normalize_length", [False, True])
def test_label_smoothing_matches_direct_kl(normalize_length):
    V, smoothing = 6, 0.1
    crit = LabelSmoothingLoss(size=V, padding_idx=-1, smoothing=smoothing, normalize_length=normalize_length)
    x = torch.randn(2, 4, V)
    target = torch.tensor([[1, 2, 3, 5], [0, 4, -1, -1]])
    loss = crit(x, target)
    total = 0.0
    for b in range(2):
        for t in range(4):
            y = int(target[b, t])
            if y == -1:
                continue
            q = torch.full((V,), smoothing / (V - 1))
            q[y] = 1 - smoothing
            total += float((q * (q.log() - F.log_softmax(x[b, t], -1))).sum())
    assert float(loss) == pytest.approx(total / (6 if normalize_length else 2), rel=1e-5)


def test_label_smoothing_zero_is_cross_entropy():
    crit = LabelSmoothingLoss(size=5, padding_idx=-1, smoothing=0.0, normalize_length=True)
    x = torch.randn(3, 2, 5)
    target = torch.tensor([[1, 2], [3, -1], [4, 0]])
    assert float(crit(x, target)) == pytest.approx(float(F.cross_entropy(x.view(-1, 5), target.view(-1),
                                                                          ignore_index=-1)), rel=1e-5)
    with pytest.raises(ValueError, match="lsm_weight"):
        LabelSmoothingLoss(size=5, padding_idx=-1, smoothing=1.0)
