"""Position-wise feed-forward block and the activation registry (``ACTIVATION_CLASSES``)."""
import torch
from torch import nn

# YAML ``activation_type`` values (WeNet's names); ``swish`` is x * sigmoid(x) (torch's SiLU).
ACTIVATION_CLASSES = {
    "relu": nn.ReLU,
    "swish": nn.SiLU,
    "gelu": nn.GELU,
    "tanh": nn.Tanh,
    "hardtanh": nn.Hardtanh,
    "selu": nn.SELU,
}


class PositionwiseFeedForward(nn.Module):
    """``w_2(dropout(activation(w_1(x))))`` applied to every frame.

    Args:
        idim: input and output size.
        hidden_units: inner size (``linear_units`` in the config).
        dropout_rate: dropout after the activation.
        activation: activation module (default ReLU).
    """

    def __init__(self, *, idim: int, hidden_units: int, dropout_rate: float, activation: nn.Module = None):
        super().__init__()
        self.w_1 = nn.Linear(idim, hidden_units)
        self.activation = activation if activation is not None else nn.ReLU()
        self.dropout = nn.Dropout(dropout_rate)
        self.w_2 = nn.Linear(hidden_units, idim)

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        """xs (B, T, idim) -> (B, T, idim)."""
        return self.w_2(self.dropout(self.activation(self.w_1(xs))))
