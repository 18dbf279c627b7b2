"""Label-smoothed cross entropy of the attention decoder (KL divergence to a smoothed target, like WeNet)."""
import torch
from torch import nn


class LabelSmoothingLoss(nn.Module):
    """KL(smoothed target || softmax(x)) summed over tokens.

    The target puts ``1 - smoothing`` on the reference token and ``smoothing / (V - 1)`` on every other token.

    Args:
        size: vocabulary size V.
        padding_idx: target id of padding positions (ignored).
        smoothing: label smoothing weight (``model_conf.lsm_weight``).
        normalize_length: divide by the number of tokens (True) or by the batch size (False, WeNet's default).
    """

    def __init__(self, *, size: int, padding_idx: int, smoothing: float, normalize_length: bool = False):
        super().__init__()
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"model_conf.lsm_weight must be in [0, 1), got {smoothing}")
        self.criterion = nn.KLDivLoss(reduction="none")
        self.padding_idx = padding_idx
        self.confidence = 1.0 - smoothing
        self.smoothing = smoothing
        self.size = size
        self.normalize_length = normalize_length

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """x (B, L, V) logits, target (B, L) ids (``padding_idx`` where padded) -> scalar loss."""
        if x.size(2) != self.size:
            raise ValueError(f"decoder output has {x.size(2)} classes, the loss expects {self.size}")
        batch_size = x.size(0)
        x = x.reshape(-1, self.size).float()
        target = target.reshape(-1)
        ignore = target == self.padding_idx
        total = target.numel() - int(ignore.sum())
        true_dist = torch.full_like(x, self.smoothing / (self.size - 1))
        true_dist.scatter_(1, target.masked_fill(ignore, 0).unsqueeze(1), self.confidence)
        kl = self.criterion(torch.log_softmax(x, dim=1), true_dist)
        denom = max(total, 1) if self.normalize_length else batch_size
        return kl.masked_fill(ignore.unsqueeze(1), 0).sum() / denom
