import pytest
import torch

from wenet_udps.utils.mask import (add_optional_chunk_mask, make_non_pad_mask, make_pad_mask, mask_finished_preds,
                                   mask_finished_scores, subsequent_chunk_mask, subsequent_mask)

T, F = True, False


def test_make_pad_mask_marks_padding():
    lengths = torch.tensor([5, 3, 2])
    expected = torch.tensor([[F, F, F, F, F],
                             [F, F, F, T, T],
                             [F, F, T, T, T]])
    assert torch.equal(make_pad_mask(lengths), expected)
    assert torch.equal(make_non_pad_mask(lengths), ~expected)


def test_make_pad_mask_explicit_max_len():
    mask = make_pad_mask(torch.tensor([2, 1]), max_len=4)
    assert torch.equal(mask, torch.tensor([[F, F, T, T], [F, T, T, T]]))


def test_subsequent_mask_is_lower_triangular():
    expected = torch.tensor([[T, F, F],
                             [T, T, F],
                             [T, T, T]])
    assert torch.equal(subsequent_mask(3), expected)


def test_subsequent_chunk_mask_full_left_context():
    expected = torch.tensor([[T, T, F, F, F],
                             [T, T, F, F, F],
                             [T, T, T, T, F],
                             [T, T, T, T, F],
                             [T, T, T, T, T]])
    assert torch.equal(subsequent_chunk_mask(5, 2), expected)


def test_subsequent_chunk_mask_limited_left_chunks():
    expected = torch.tensor([[T, T, F, F, F, F],
                             [T, T, F, F, F, F],
                             [T, T, T, T, F, F],
                             [T, T, T, T, F, F],
                             [F, F, T, T, T, T],
                             [F, F, T, T, T, T]])
    assert torch.equal(subsequent_chunk_mask(6, 2, num_left_chunks=1), expected)
    # No left chunk: each chunk sees only itself.
    only_self = subsequent_chunk_mask(4, 2, num_left_chunks=0)
    assert torch.equal(only_self, torch.tensor([[T, T, F, F], [T, T, F, F], [F, F, T, T], [F, F, T, T]]))


def test_subsequent_chunk_mask_rejects_bad_chunk():
    with pytest.raises(ValueError, match="chunk_size"):
        subsequent_chunk_mask(4, 0)


def _pad_masks(lengths, max_len):
    return make_non_pad_mask(torch.tensor(lengths), max_len).unsqueeze(1)


def test_add_optional_chunk_mask_without_chunking_returns_padding_mask():
    xs = torch.zeros(2, 4, 3)
    masks = _pad_masks([4, 2], 4)
    out = add_optional_chunk_mask(xs, masks, False, False, 0, 0, -1)
    assert torch.equal(out, masks)


def test_add_optional_chunk_mask_static_chunk_combines_padding():
    xs = torch.zeros(1, 4, 3)
    masks = _pad_masks([3], 4)
    out = add_optional_chunk_mask(xs, masks, False, False, 0, static_chunk_size=2, num_decoding_left_chunks=-1)
    expected = torch.tensor([[[T, T, F, F],
                              [T, T, F, F],
                              [T, T, T, F],
                              [T, T, T, F]]])
    assert torch.equal(out, expected)


def test_add_optional_chunk_mask_dynamic_decoding_settings():
    xs = torch.zeros(1, 6, 3)
    masks = _pad_masks([6], 6)
    full = add_optional_chunk_mask(xs, masks, True, False, -1, 0, -1)
    assert full.shape == (1, 6, 6) and bool(full.all())
    chunked = add_optional_chunk_mask(xs, masks, True, False, 2, 0, 1)
    assert torch.equal(chunked[0], subsequent_chunk_mask(6, 2, 1))


def _chunk_size_of(mask_row_block: torch.Tensor) -> int:
    """Chunk size of a chunk mask with full left context: the width of row 0."""
    return int(mask_row_block[0].sum())


def test_add_optional_chunk_mask_dynamic_training_draws_wenet_distribution():
    torch.manual_seed(123)
    max_len = 100
    xs = torch.zeros(1, max_len, 3)
    masks = _pad_masks([max_len], max_len)
    sizes = []
    for _ in range(400):
        out = add_optional_chunk_mask(xs, masks, True, False, 0, 0, -1)[0]
        size = _chunk_size_of(out)
        sizes.append(size)
        assert torch.equal(out, subsequent_chunk_mask(max_len, size))
    sizes = torch.tensor(sizes)
    full = sizes == max_len
    # Draws in 1..99 above 50 give full context: 49/99 of the time.
    assert 0.4 < full.float().mean().item() < 0.6
    assert int(sizes[~full].min()) >= 1 and int(sizes[~full].max()) <= 25
    assert len(set(sizes[~full].tolist())) > 15


def test_add_optional_chunk_mask_dynamic_left_chunks_limits_context():
    torch.manual_seed(7)
    max_len = 60
    xs = torch.zeros(1, max_len, 3)
    masks = _pad_masks([max_len], max_len)
    limited = 0
    for _ in range(100):
        out = add_optional_chunk_mask(xs, masks, True, True, 0, 0, -1)[0]
        if not bool(out[-1, 0]):  # the last frame cannot see the first one: left context was limited
            limited += 1
    assert limited > 20


def test_mask_finished_scores_and_preds():
    score = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.7, -0.9]])
    flag = torch.tensor([[True], [False]])
    out = mask_finished_scores(score.clone(), flag)
    assert out[0].tolist() == [0.0, -float("inf"), -float("inf")]
    assert torch.equal(out[1], score[1])
    preds = mask_finished_preds(torch.tensor([[4, 5, 6], [7, 8, 9]]), flag, eos=2)
    assert preds.tolist() == [[2, 2, 2], [7, 8, 9]]


def test_mask_finished_scores_beam_one():
    out = mask_finished_scores(torch.tensor([[-1.0], [-2.0]]), torch.tensor([[True], [False]]))
    assert out.tolist() == [[0.0], [-2.0]]
