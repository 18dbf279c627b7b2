"""Small tensor helpers shared by the model, the losses and decoding (WeNet's conventions)."""
import math
from typing import List, Sequence

import torch

# Pads token targets; the losses and accuracy skip it.
IGNORE_ID = -1


def pad_list(xs: Sequence[torch.Tensor], pad_value: float) -> torch.Tensor:
    """Stack tensors of different lengths along a new batch dim, padding the first dim.

    Args:
        xs: B tensors of shape (T_i, *rest) (same rest and dtype).
        pad_value: value written past each T_i.
    Returns:
        (B, max T_i, *rest).
    """
    if len(xs) == 0:
        raise ValueError("pad_list needs at least one tensor")
    max_len = max(x.size(0) for x in xs)
    out = xs[0].new_full((len(xs), max_len) + tuple(xs[0].shape[1:]), pad_value)
    for i, x in enumerate(xs):
        out[i, :x.size(0)] = x
    return out


def add_sos_eos(ys_pad: torch.Tensor, sos: int, eos: int, ignore_id: int):
    """Make decoder input/output from padded targets.

    ys_pad (B, L) padded with ``ignore_id`` -> ys_in (B, L+1) = [sos, y...] padded with ``eos``,
    ys_out (B, L+1) = [y..., eos] padded with ``ignore_id``.
    """
    sos_t = torch.tensor([sos], dtype=torch.long, device=ys_pad.device)
    eos_t = torch.tensor([eos], dtype=torch.long, device=ys_pad.device)
    ys = [y[y != ignore_id] for y in ys_pad]
    ys_in = [torch.cat([sos_t, y]) for y in ys]
    ys_out = [torch.cat([y, eos_t]) for y in ys]
    return pad_list(ys_in, eos), pad_list(ys_out, ignore_id)


def reverse_pad_list(ys_pad: torch.Tensor, ys_lens: torch.Tensor, pad_value: float = -1.0) -> torch.Tensor:
    """Reverse each sequence within its own length (right-to-left targets).

    ys_pad (B, L), ys_lens (B,) -> (B, max ys_lens) padded with ``pad_value``.
    """
    return pad_list([torch.flip(y[:int(n)], [0]) for y, n in zip(ys_pad, ys_lens)], pad_value)


def th_accuracy(pad_outputs: torch.Tensor, pad_targets: torch.Tensor, ignore_label: int) -> torch.Tensor:
    """Token accuracy of the argmax predictions over non-ignored positions.

    Args:
        pad_outputs: (B * L, V) scores.
        pad_targets: (B, L) targets, ``ignore_label`` where padded.
    Returns:
        scalar tensor in [0, 1] (0 when every position is ignored).
    """
    pad_pred = pad_outputs.view(pad_targets.size(0), pad_targets.size(1), pad_outputs.size(1)).argmax(2)
    mask = pad_targets != ignore_label
    numerator = torch.sum(pad_pred.masked_select(mask) == pad_targets.masked_select(mask))
    denominator = torch.sum(mask)
    return (numerator / torch.clamp(denominator, min=1)).detach()


def remove_duplicates_and_blank(hyp: Sequence[int], blank_id: int = 0) -> List[int]:
    """CTC collapse: merge repeats, then drop blanks ([1, 1, 0, 1, 2, 2] -> [1, 1, 2])."""
    out: List[int] = []
    prev = None
    for token in hyp:
        if token != prev and token != blank_id:
            out.append(token)
        prev = token
    return out


def log_add(*args: float) -> float:
    """Stable log(sum(exp(a) for a in args)); all -inf gives -inf."""
    a_max = max(args)
    if a_max == -math.inf:
        return -math.inf
    return a_max + math.log(sum(math.exp(a - a_max) for a in args))
