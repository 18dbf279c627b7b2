"""Token times from the CTC alignment: the most likely CTC path that spells a given hypothesis (Viterbi over the
blank-interleaved label sequence), as WeNet's Python API reports times for whatever mode produced the text."""
from typing import List, Sequence, Tuple

import torch


def ctc_forced_align(logp: torch.Tensor, tokens: Sequence[int], blank_id: int = 0) -> List[Tuple[int, int]]:
    """Frames of each token on the best CTC path of ``tokens``.

    Args:
        logp: (T, V) CTC log-probabilities of one utterance (its valid frames only).
        tokens: the hypothesis, token ids without blanks.
    Returns:
        one (first frame, last frame) per token, inclusive, in order; [] for no tokens. A hypothesis that no path
        of T frames can spell (more tokens and needed blanks than frames) gets ValueError.
    """
    labels = [blank_id]
    for tok in tokens:
        labels += [int(tok), blank_id]
    num_frames, num_states = logp.size(0), len(labels)
    repeats = sum(1 for a, b in zip(tokens, tokens[1:]) if a == b)
    if len(tokens) + repeats > num_frames:
        raise ValueError(f"{len(tokens)} tokens cannot be aligned to {num_frames} CTC frames")
    if not tokens:
        return []
    lab = torch.tensor(labels)
    emit = logp[:, lab].double()  # (T, S)
    neg = float("-inf")
    # A state may come from itself, the state before, or two before when that skips a blank between different tokens.
    skip = torch.zeros(num_states, dtype=torch.bool)
    skip[2:] = (lab[2:] != blank_id) & (lab[2:] != lab[:-2])
    score = torch.full((num_states,), neg, dtype=torch.float64)
    score[0], score[1] = emit[0, 0], emit[0, 1]
    back = torch.zeros(num_frames, num_states, dtype=torch.long)
    for t in range(1, num_frames):
        stay = score
        step = torch.cat([torch.tensor([neg], dtype=torch.float64), score[:-1]])
        jump = torch.cat([torch.tensor([neg, neg], dtype=torch.float64), score[:-2]])
        jump = torch.where(skip, jump, torch.full_like(jump, neg))
        best, arg = torch.stack([stay, step, jump]).max(dim=0)
        back[t] = torch.arange(num_states) - arg
        score = best + emit[t]
    state = num_states - 1 if score[-1] >= score[-2] else num_states - 2
    path = [state]
    for t in range(num_frames - 1, 0, -1):
        state = int(back[t, state])
        path.append(state)
    path.reverse()
    spans: List[Tuple[int, int]] = []
    for t, s in enumerate(path):
        if s % 2 == 1:
            k = s // 2
            if len(spans) <= k:
                spans.append((t, t))
            else:
                spans[k] = (spans[k][0], t)
    return spans


def token_times(spans: Sequence[Tuple[int, int]], frame_seconds: float) -> List[Tuple[float, float]]:
    """(start, end) seconds of each span; ``frame_seconds`` is one encoder frame (subsampling x frame shift)."""
    return [(round(a * frame_seconds, 3), round((b + 1) * frame_seconds, 3)) for a, b in spans]
