"""The CPU fused UDPS kernel (hand-derived backward, eager): its backward against finite differences. What it
shares with the C++ kernel (parity per mask kind, eps floor, zero rows, bits) is in test_cpu_kernels.py."""
import torch

from wenet_udps.kernels.cpu_fused import UDPSFusedFunction

from tests.kernels.udps_inputs import make_inputs


def test_gradcheck_float64():
    """The hand-derived backward against finite differences, with every mask kind and the eps floor active."""
    q, k, v, _ = make_inputs(2, 2, 5, 6, 3, dtype=torch.float64)
    k_norm = torch.linalg.vector_norm(k, dim=-1)
    pad = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool).view(2, 1, 1, 6)
    holes = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 0, 1, 1, 1, 1]], dtype=torch.bool).view(2, 1, 1, 6)
    causal = torch.tril(torch.ones(5, 6, dtype=torch.bool)).expand(2, 1, 5, 6)
    empty_row = causal.clone()
    empty_row[1, 0, 2] = False
    for keep, eps in ((None, 1e-6), (pad, 1e-6), (holes, 1e-6), (causal, 1e-6), (empty_row, 1e-6), (pad, 0.5)):
        # eps = 0.5: the floor (|q| + |k|)^2 >= 0.5 is active for some pairs after scaling q down.
        scale = 0.3 if eps == 0.5 else 1.0
        inputs = [x.clone().requires_grad_(True) for x in (scale * q, 3 * k, scale * k_norm, v)]
        assert torch.autograd.gradcheck(lambda *x, keep=keep, eps=eps: UDPSFusedFunction.apply(*x, keep, eps),
                                        inputs, eps=1e-6, atol=1e-6)
