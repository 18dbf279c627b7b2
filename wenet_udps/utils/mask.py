"""Boolean masks for padding, causal decoding and chunk-based (U2) streaming attention.

Convention (WeNet's): ``True`` = keep / attend, except :func:`make_pad_mask`, which marks padding with ``True``.
"""
import torch

# Dynamic-chunk training draws chunk sizes in 1..MAX_DYNAMIC_CHUNK (WeNet's U2 rule).
MAX_DYNAMIC_CHUNK = 25


def make_pad_mask(lengths: torch.Tensor, max_len: int = 0) -> torch.Tensor:
    """True at padded positions.

    Args:
        lengths: (B,) valid lengths.
        max_len: width of the mask; 0 means ``lengths.max()``.
    Returns:
        (B, max_len) bool, ``mask[b, t] = t >= lengths[b]``.
    """
    batch_size = lengths.size(0)
    max_len = max_len if max_len > 0 else int(lengths.max().item()) if batch_size > 0 else 0
    seq_range = torch.arange(0, max_len, dtype=torch.int64, device=lengths.device)
    return seq_range.unsqueeze(0).expand(batch_size, max_len) >= lengths.unsqueeze(-1)


def make_non_pad_mask(lengths: torch.Tensor, max_len: int = 0) -> torch.Tensor:
    """True at valid positions: (B,) -> (B, max_len) bool; the complement of :func:`make_pad_mask`."""
    return ~make_pad_mask(lengths, max_len)


def subsequent_mask(size: int, device: torch.device = torch.device("cpu")) -> torch.Tensor:
    """Causal mask (size, size): position i may attend to positions 0..i."""
    arange = torch.arange(size, device=device)
    return arange.unsqueeze(0) <= arange.unsqueeze(1)


def subsequent_chunk_mask(size: int, chunk_size: int, num_left_chunks: int = -1,
                          device: torch.device = torch.device("cpu")) -> torch.Tensor:
    """Chunk mask (size, size): position i attends to its whole chunk and ``num_left_chunks`` chunks before it.

    Args:
        size: sequence length.
        chunk_size: frames per chunk (> 0).
        num_left_chunks: left chunks visible; < 0 means all of them.
    Returns:
        (size, size) bool; row i is True on ``[start, end)`` with ``end = (i // chunk_size + 1) * chunk_size``
        (clipped to ``size``) and ``start = 0`` or ``(i // chunk_size - num_left_chunks) * chunk_size`` (>= 0).
    """
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    chunk_idx = torch.arange(size, device=device) // chunk_size
    end = (chunk_idx + 1) * chunk_size
    if num_left_chunks < 0:
        start = torch.zeros_like(end)
    else:
        start = ((chunk_idx - num_left_chunks) * chunk_size).clamp_min(0)
    cols = torch.arange(size, device=device).unsqueeze(0)
    return (cols >= start.unsqueeze(1)) & (cols < end.unsqueeze(1))


def add_optional_chunk_mask(xs: torch.Tensor, masks: torch.Tensor, use_dynamic_chunk: bool,
                            use_dynamic_left_chunk: bool, decoding_chunk_size: int, static_chunk_size: int,
                            num_decoding_left_chunks: int) -> torch.Tensor:
    """The encoder self-attention mask: padding combined with the chunk mask that the settings ask for.

    Rules (WeNet's U2):
    - ``use_dynamic_chunk``: ``decoding_chunk_size < 0`` -> full context; ``> 0`` -> that chunk size with
      ``num_decoding_left_chunks``; ``0`` (training) -> draw ``c`` uniformly in ``1..max_len-1``; if
      ``c > max_len // 2`` use full context, else chunk size ``c % 25 + 1`` with all left chunks, or, with
      ``use_dynamic_left_chunk``, a random number of left chunks in ``0..(max_len-1)//chunk-1``.
    - else ``static_chunk_size > 0``: that chunk size with ``num_decoding_left_chunks``.
    - else: the padding mask alone.

    Args:
        xs: (B, L, D) encoder input (only its length and device are used).
        masks: (B, 1, L) padding mask, True = valid.
    Returns:
        (B, L, L) chunk mask ANDed with ``masks``, or ``masks`` itself (B, 1, L) when no chunking applies.
    """
    max_len = xs.size(1)
    if use_dynamic_chunk:
        num_left_chunks = -1
        if decoding_chunk_size < 0:
            chunk_size = max_len
        elif decoding_chunk_size > 0:
            chunk_size = decoding_chunk_size
            num_left_chunks = num_decoding_left_chunks
        else:
            # torch.randint needs high > low; a 1-frame input can only be full context anyway.
            draw = int(torch.randint(1, max(max_len, 2), (1,)).item())
            if draw > max_len // 2:
                chunk_size = max_len
            else:
                chunk_size = draw % MAX_DYNAMIC_CHUNK + 1
                if use_dynamic_left_chunk:
                    max_left_chunks = (max_len - 1) // chunk_size
                    num_left_chunks = int(torch.randint(0, max(max_left_chunks, 1), (1,)).item())
        chunk_masks = subsequent_chunk_mask(max_len, max(chunk_size, 1), num_left_chunks, xs.device)
        return masks & chunk_masks.unsqueeze(0)
    if static_chunk_size > 0:
        chunk_masks = subsequent_chunk_mask(max_len, static_chunk_size, num_decoding_left_chunks, xs.device)
        return masks & chunk_masks.unsqueeze(0)
    return masks


def mask_finished_scores(score: torch.Tensor, flag: torch.Tensor) -> torch.Tensor:
    """Beam search: a finished hypothesis keeps exactly one continuation, with score 0 (in place).

    Args:
        score: (B*beam, beam) candidate scores.
        flag: (B*beam, 1) bool, True where the hypothesis has ended.
    Returns:
        ``score`` with finished rows set to ``[0, -inf, -inf, ...]``.
    """
    beam_size = score.size(-1)
    zero_mask = torch.zeros_like(flag, dtype=torch.bool)
    if beam_size > 1:
        unfinished = torch.cat((zero_mask, flag.repeat(1, beam_size - 1)), dim=1)
        finished = torch.cat((flag, zero_mask.repeat(1, beam_size - 1)), dim=1)
    else:
        unfinished = zero_mask
        finished = flag
    score.masked_fill_(unfinished, -float("inf"))
    score.masked_fill_(finished, 0)
    return score


def mask_finished_preds(pred: torch.Tensor, flag: torch.Tensor, eos: int) -> torch.Tensor:
    """Beam search: finished hypotheses can only emit ``eos`` (in place).

    Args:
        pred: (B*beam, beam) candidate token ids.
        flag: (B*beam, 1) bool, True where the hypothesis has ended.
        eos: end-of-sentence id.
    Returns:
        ``pred`` with finished rows filled with ``eos``.
    """
    return pred.masked_fill_(flag.repeat(1, pred.size(-1)), eos)
