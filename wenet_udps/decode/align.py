"""Token times from the CTC alignment: the most likely CTC path that spells a given hypothesis (Viterbi over the
blank-interleaved label sequence), as WeNet's Python API reports times for whatever mode produced the text."""
from typing import Collection, List, Sequence, Tuple

import torch


def ctc_forced_align(logp: torch.Tensor, tokens: Sequence[int], blank_id: int = 0,
                     optional: Collection[int] = ()) -> List[Tuple[int, int]]:
    """Frames of each token on the best CTC path of ``tokens``.

    Args:
        logp: (T, V) CTC log-probabilities of one utterance (its valid frames only).
        tokens: the hypothesis, token ids without blanks.
        optional: units that may take no frame where they stand between two other units: the space unit an LM
            search puts between two words whether CTC emitted it there or not (``LmSearch.units``).
    Returns:
        one (first frame, last frame) per token, inclusive, in order; an optional unit the path skips gets
        (t, t - 1): no frame, at the frame t where the path goes on; [] for no tokens. A hypothesis that no path
        of T frames can spell (more tokens and needed blanks than frames) gets ValueError.
    """
    labels = [blank_id]
    for tok in tokens:
        labels += [int(tok), blank_id]
    num_frames, num_states = logp.size(0), len(labels)
    skippable = [False] * len(tokens)
    for k in range(1, len(tokens) - 1):   # never two in a row, never the first or last
        skippable[k] = int(tokens[k]) in optional and not skippable[k - 1]
    required = [t for t, skip in zip(tokens, skippable) if not skip]
    repeats = sum(1 for a, b in zip(required, required[1:]) if a == b)
    if len(required) + repeats > num_frames:
        raise ValueError(f"{len(tokens)} tokens cannot be aligned to {num_frames} CTC frames")
    if not tokens:
        return []
    lab = torch.tensor(labels)
    emit = logp[:, lab].double()  # (T, S)
    neg = float("-inf")
    odd = torch.arange(num_states) % 2 == 1
    gone = torch.zeros(num_states + 2, dtype=torch.bool)   # a skippable token's state, seen from 1 and 2 ahead
    gone[1:2 * len(tokens):2] = torch.tensor(skippable)
    past1, past2 = gone[:num_states].roll(1), gone[:num_states].roll(2)   # state j-1 / j-2 is skippable
    # A state may come from itself, the state before, or two before when that skips a blank between different
    # tokens; around a skippable token, from the blank or token before it to the blank or token after it.
    allowed = torch.zeros(5, num_states, dtype=torch.bool)
    allowed[0] = True
    allowed[1, 1:] = True
    allowed[2, 2:] = (lab[2:] != blank_id) & (lab[2:] != lab[:-2])
    allowed[2] |= ~odd & past1
    allowed[3] = (~odd & past1) | (odd & past2)
    allowed[4, 4:] = (odd & past2)[4:] & (lab[4:] != lab[:-4])
    score = torch.full((num_states,), neg, dtype=torch.float64)
    score[0], score[1] = emit[0, 0], emit[0, 1]
    back = torch.zeros(num_frames, num_states, dtype=torch.long)
    pad = torch.full((4,), neg, dtype=torch.float64)
    for t in range(1, num_frames):
        shifted = torch.cat([pad, score])
        came = torch.stack([shifted[4 - d:4 - d + num_states] for d in range(5)])   # came[d, j] = score[j - d]
        best, arg = torch.where(allowed, came, torch.full_like(came, neg)).max(dim=0)
        back[t] = torch.arange(num_states) - arg
        score = best + emit[t]
    state = num_states - 1 if score[-1] >= score[-2] else num_states - 2
    path = [state]
    for t in range(num_frames - 1, 0, -1):
        state = int(back[t, state])
        path.append(state)
    path.reverse()
    spans: List[Tuple[int, int]] = []
    for k in range(len(tokens)):
        frames = [t for t, s in enumerate(path) if s == 2 * k + 1]
        if frames:
            spans.append((frames[0], frames[-1]))
        else:   # skipped: no frame, where the path goes past it
            after = next(t for t, s in enumerate(path) if s > 2 * k + 1)
            spans.append((after, after - 1))
    return spans


def token_times(spans: Sequence[Tuple[int, int]], frame_seconds: float) -> List[Tuple[float, float]]:
    """(start, end) seconds of each span; ``frame_seconds`` is one encoder frame (subsampling x frame shift)."""
    return [(round(a * frame_seconds, 3), round((b + 1) * frame_seconds, 3)) for a, b in spans]
