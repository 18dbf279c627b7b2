import math

import pytest
import torch

from wenet_udps.utils.common import IGNORE_ID, add_sos_eos, log_add, pad_list, remove_duplicates_and_blank, \
    reverse_pad_list, th_accuracy


def test_pad_list_pads_with_value():
    out = pad_list([torch.tensor([1, 2, 3]), torch.tensor([4])], IGNORE_ID)
    assert out.tolist() == [[1, 2, 3], [4, -1, -1]]
    feats = pad_list([torch.ones(2, 3), torch.ones(4, 3)], 0.0)
    assert feats.shape == (2, 4, 3) and feats[0, 2:].abs().sum() == 0


def test_add_sos_eos():
    ys = torch.tensor([[1, 2, 3], [4, -1, -1]])
    ys_in, ys_out = add_sos_eos(ys, sos=9, eos=8, ignore_id=IGNORE_ID)
    assert ys_in.tolist() == [[9, 1, 2, 3], [9, 4, 8, 8]]
    assert ys_out.tolist() == [[1, 2, 3, 8], [4, 8, -1, -1]]


def test_reverse_pad_list():
    ys = torch.tensor([[1, 2, 3], [4, 5, -1]])
    out = reverse_pad_list(ys, torch.tensor([3, 2]), -1.0)
    assert out.tolist() == [[3, 2, 1], [5, 4, -1]]


def test_th_accuracy_ignores_padding():
    targets = torch.tensor([[0, 1, 2], [2, -1, -1]])
    logits = torch.full((2, 3, 3), -5.0)
    for b, row in enumerate([[0, 1, 0], [2, 0, 1]]):  # 2 of 3 right, 1 of 1 right; padding predictions wrong
        for t, k in enumerate(row):
            logits[b, t, k] = 5.0
    acc = th_accuracy(logits.view(-1, 3), targets, ignore_label=IGNORE_ID)
    assert float(acc) == pytest.approx(3 / 4)


def test_remove_duplicates_and_blank():
    assert remove_duplicates_and_blank([1, 1, 0, 1, 2, 2, 0, 0]) == [1, 1, 2]
    assert remove_duplicates_and_blank([3, 3, 3], blank_id=3) == []
    assert remove_duplicates_and_blank([0, 5, 5, 0], blank_id=0) == [5]


def test_log_add():
    assert log_add(math.log(0.25), math.log(0.5)) == pytest.approx(math.log(0.75))
    assert log_add(-math.inf, -math.inf) == -math.inf
    assert log_add(-math.inf, 0.0) == pytest.approx(0.0)
    assert log_add(-1000.0, -1000.0) == pytest.approx(-1000.0 + math.log(2))
