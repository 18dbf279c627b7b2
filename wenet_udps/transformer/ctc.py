"""CTC branch: projection of the encoder output to the vocabulary and the CTC loss."""
from typing import Tuple

import torch
from torch import nn
from torch.nn import functional as F


class CTC(nn.Module):
    """CTC head with WeNet's parameter name ``ctc_lo``.

    Args:
        odim: vocabulary size V (blank included).
        encoder_output_size: encoder dimension D.
        dropout_rate: dropout on the encoder output before the projection.
        reduce: sum the loss over the batch and divide by the batch size (WeNet's default); else per utterance.
        blank_id: index of the CTC blank (``ctc_conf.ctc_blank_id``).
    """

    def __init__(self, *, odim: int, encoder_output_size: int, dropout_rate: float = 0.0, reduce: bool = True,
                 blank_id: int = 0):
        super().__init__()
        if not 0 <= blank_id < odim:
            raise ValueError(f"ctc_conf.ctc_blank_id {blank_id} outside the vocabulary [0, {odim})")
        self.ctc_lo = nn.Linear(encoder_output_size, odim)
        self.dropout_rate = dropout_rate
        self.reduce = reduce
        self.blank_id = blank_id
        # zero_infinity: an utterance with more tokens than frames has no alignment; its inf loss would turn
        # every gradient into NaN, so it contributes 0 instead.
        self.ctc_loss = nn.CTCLoss(blank=blank_id, reduction="sum" if reduce else "none", zero_infinity=True)

    def forward(self, hs_pad: torch.Tensor, hlens: torch.Tensor, ys_pad: torch.Tensor,
                ys_lens: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """CTC loss.

        Args:
            hs_pad: (B, T, D) encoder output; hlens: (B,) valid frames.
            ys_pad: (B, L) targets padded with any id (only the first ys_lens[i] are read); ys_lens: (B,).
        Returns:
            loss (scalar if ``reduce`` else (B,)), divided by B; log-probabilities (B, T, V).
        """
        logits = self.ctc_lo(F.dropout(hs_pad, p=self.dropout_rate, training=self.training))
        # CTC in float32: fp16 log-probabilities underflow on long utterances.
        log_probs = logits.float().log_softmax(dim=2)
        targets = ys_pad.clamp(min=0)  # padding is never read, but negative ids upset some backends
        loss = self.ctc_loss(log_probs.transpose(0, 1), targets, hlens.long(), ys_lens.long())
        loss = loss / log_probs.size(0)
        return loss, log_probs

    def log_softmax(self, hs_pad: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T, V) log-probabilities."""
        return F.log_softmax(self.ctc_lo(hs_pad), dim=2)

    def argmax(self, hs_pad: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T) best token per frame."""
        return torch.argmax(self.ctc_lo(hs_pad), dim=2)
