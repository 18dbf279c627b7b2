"""Inputs and comparisons shared by the UDPS kernel tests (imported by the test modules beside it)."""
import torch


def make_inputs(batch, heads, t1, t2, d, k_batch=None, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, t1, d, generator=gen, dtype=torch.float64).to(dtype)
    k = torch.randn(k_batch or batch, heads, t2, d, generator=gen, dtype=torch.float64).to(dtype)
    v = torch.randn(batch, heads, t2, d, generator=gen, dtype=torch.float64).to(dtype)
    alpha = torch.tensor([3.0, 7.0, -2.0, 5.0][:heads], dtype=dtype).view(1, -1, 1, 1)
    return q, k, v, alpha


def run_kernel(kernel, q, k, v, alpha, mask, grad_seed=1, **kwargs):
    """Output and gradients w.r.t. q, k (through both k_num and k_norm), v and alpha, as the attention module calls."""
    leaves = [x.detach().clone().requires_grad_(True) for x in (q, k, v, alpha)]
    q_, k_, v_, a_ = leaves
    k_norm = torch.linalg.vector_norm(k_.float() if k_.dtype != torch.float64 else k_, dim=-1)
    out = kernel(q_, 4.0 * a_ * k_, k_norm, v_, mask=mask, **kwargs)
    # Drawn in float32 (float64 stays) then cast: torch 2.11 draws a different stream for half-precision randn,
    # which would give the low-precision run other upstream gradients than its float32 reference.
    wide = torch.promote_types(out.dtype, torch.float32)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_seed), dtype=wide)
    grad = grad.to(out.device, out.dtype)
    out.backward(grad)
    return [out.detach()] + [x.grad for x in leaves]


def padding_mask(lengths, t):
    return (torch.arange(t).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).unsqueeze(1)


def chunk_mask(batch: int, t: int, chunk: int) -> torch.Tensor:
    """U2 streaming: query i sees every key of its own chunk and of the chunks before it, (B, T, T)."""
    pos = torch.arange(t)
    return ((pos.unsqueeze(0) // chunk) <= (pos.unsqueeze(1) // chunk)).expand(batch, t, t)


def assert_same(ref, got, atol=2e-5, rtol=1e-4):
    for name, r, g in zip(["out", "dq", "dk", "dv", "dalpha"], ref, got):
        assert torch.isfinite(g).all(), name
        torch.testing.assert_close(g, r, atol=atol, rtol=rtol, msg=lambda m, n=name: f"{n}: {m}")


# Masks every kernel's parity test covers: name -> (B, H, T1, T2, mask maker or None).
CASES = {
    "no mask": (2, 3, 20, 20, None),
    "padding": (3, 3, 20, 20, lambda: padding_mask([20, 13, 1], 20)),
    "padding with an empty utterance": (3, 3, 20, 20, lambda: padding_mask([20, 13, 0], 20)),
    "non-prefix key mask": (2, 3, 20, 20, lambda: torch.rand(2, 1, 20, generator=torch.Generator().manual_seed(3))
                            > 0.4),
    "causal (B, T1, T2)": (2, 3, 20, 20, lambda: torch.tril(torch.ones(20, 20, dtype=torch.bool)).expand(2, 20, 20)),
    "T1 != T2, fully masked rows": (2, 2, 9, 23, lambda: torch.cat(
        [torch.rand(2, 7, 23, generator=torch.Generator().manual_seed(4)) > 0.5,
         torch.zeros(2, 2, 23, dtype=torch.bool)], dim=1)),
    "mask batch 1": (3, 2, 20, 20, lambda: padding_mask([11], 20)),
}
