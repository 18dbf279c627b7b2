"""Global cepstral mean and variance normalisation: WeNet's ``global_cmvn`` layer, from the JSON stats file that
:mod:`wenet_udps.utils.cmvn_stats` reads.
"""
from pathlib import Path
from typing import Tuple, Union

import torch
from torch import nn

from wenet_udps.utils.cmvn_stats import read_cmvn_stats


class GlobalCMVN(nn.Module):
    """``(x - mean) * istd`` over the last dimension; buffers ``mean`` and ``istd`` are saved (WeNet's names).

    Args:
        mean: (D,) feature means.
        istd: (D,) inverse standard deviations.
        norm_var: also scale by ``istd`` (False: mean subtraction only).
    """

    def __init__(self, mean: torch.Tensor, istd: torch.Tensor, norm_var: bool = True):
        super().__init__()
        if mean.shape != istd.shape or mean.dim() != 1:
            raise ValueError(f"cmvn mean and istd must be 1-D of the same size, got {tuple(mean.shape)} "
                             f"and {tuple(istd.shape)}")
        self.norm_var = norm_var
        self.register_buffer("mean", mean)
        self.register_buffer("istd", istd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, D) -> normalised (B, T, D)."""
        if x.size(-1) != self.mean.size(0):
            raise ValueError(f"features have {x.size(-1)} dimensions but the cmvn stats have {self.mean.size(0)}")
        x = x - self.mean
        if self.norm_var:
            x = x * self.istd
        return x


def load_cmvn_json(path: Union[str, Path]) -> Tuple[torch.Tensor, torch.Tensor]:
    """WeNet's JSON cmvn stats as ``(mean, istd)`` float32 tensors of shape (D,)
    (:func:`wenet_udps.utils.cmvn_stats.read_cmvn_stats`: malformed stats raise CmvnError naming the file)."""
    mean, istd = read_cmvn_stats(path)
    return torch.tensor(mean, dtype=torch.float32), torch.tensor(istd, dtype=torch.float32)
