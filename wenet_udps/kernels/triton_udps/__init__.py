"""UDPS attention on CUDA: a FlashAttention-2 style Triton kernel, forward and deterministic backward.

Per head, with a_i = |q_i| (float32), n_j the key norms, den = a_i + n_j, D = max(den^2, eps), S = (q k~^T) / D,
P = softmax(S) over the kept keys, O = P v (see ``reference``); dO the output gradient, delta_i = sum_c dO_ic O_ic:

    dv = P^T dO        dS = P * (dO v^T - delta)        dN = dS / D
    dq = dN k~ + (da_i / a_i) q_i        dk~ = dN^T q
    G = dN * S * den (0 where den^2 < eps)        da_i = -2 sum_j G_ij        dn_j = -2 sum_i G_ij

Three launches: the forward (one program per block of query rows: online softmax over key blocks, saving only the
row log-sum-exp, so memory is O(T)); the backward's query pass (dq, da and delta, per query block) and key pass (dk~,
dv, dn, per key block). Each gradient element is written by one program and summed in a fixed order: no atomics, so
the same inputs give bitwise the same gradients. Dot operands are in the input dtype (fp16/bf16, or fp32 as IEEE
fp32 unless torch allows TF32 matmuls), accumulating in fp32; norms, D, S and softmax are fp32. On an NVIDIA GPU
1 / D is PTX's approximate reciprocal (within 1 ulp; one instruction where a division takes eight), in the
interpreter a division.

Masks: a bool keep-mask (B|1, 1|T1, T2) is read tile by tile, so any mask works; before its loop each program scans
its rows (or key columns) of the mask for the range of kept keys (queries), so padding, causal and chunk masks skip
the blocks they mask out entirely. A row with no kept key gets output 0, row log-sum-exp +inf, and gradient 0.
The dq/dk~ dots are scaled per row (column) by max(a^2, eps) (max(n^2, eps)) and divided back afterwards, which
bounds their fp16 operands by |dS|: dN itself reaches |dS| / eps for near-zero vectors.
"""
from typing import NamedTuple, Optional

import torch
import triton
from triton.runtime.jit import JITFunction

from wenet_udps.kernels.reference import DEFAULT_EPS
from wenet_udps.kernels.triton_udps.jit import udps_bwd_dkv, udps_bwd_dq, udps_fwd


class Blocks(NamedTuple):
    """Block sizes (rows x keys) and warps of the three launches; fixed (no timing-based autotuning), so a given
    input always runs the same summation order.

    The defaults are the FA2 Triton tutorial's shapes. The key pass runs 4 warps, as the tutorial's backward: with
    8 warps and 2 stages, triton 3.6 compiled it wrongly for fp16/bf16 without a per-row mask on an H200 (dk~ off by
    3.7e-2 relative at T=203, fp16; 4 warps, 1 stage or 64x64 blocks gave 2.9e-4; docs/gpu.md, 2026-11-26).
    At 4 warps it spills registers for sm_90 (d_k=64, bf16: 576-672 bytes a thread under triton 3.6 and 3.9,
    bench/kernel_sass.py); the forward and the query pass do not. A new default comes from a GPU table that checks
    each setting before timing it (bench/attention_gpu.py --tune).
    """
    fwd_m: int = 128
    fwd_n: int = 64
    fwd_warps: int = 8
    dq_m: int = 128
    dq_n: int = 32
    dq_warps: int = 8
    dkv_m: int = 32
    dkv_n: int = 128
    dkv_warps: int = 4
    stages: int = 2
    dkv_stages: Optional[int] = None  # the key pass's own pipeline depth; None: ``stages``


DEFAULT_BLOCKS = Blocks()


def _strides(x: torch.Tensor, dims: int):
    """The strides of x's first ``dims`` dimensions (0 for a broadcast dimension)."""
    return tuple(x.stride(i) for i in range(dims))


def _precision(dtype: torch.dtype) -> str:
    """fp32 dots in IEEE fp32 unless torch allows TF32 matmuls (as torch's own fp32 matmuls); halves ignore it."""
    return "tf32" if dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32 else "ieee"


# The kernels take 1 / D with PTX's approximate reciprocal where they are compiled for an NVIDIA GPU: not in the
# interpreter (which runs no PTX; it takes an exact division), nor on ROCm.
_PTX = isinstance(udps_fwd, JITFunction) and torch.version.hip is None


def _fast_reciprocal(x: torch.Tensor) -> bool:
    return _PTX and x.is_cuda


def _fit(block: int, length: int) -> int:
    """A block size no larger than needed for ``length`` (>= 16, the smallest tl.dot operand)."""
    return min(block, max(16, triton.next_power_of_2(length)))


class UDPSTritonFunction(torch.autograd.Function):
    """forward(q (B, H, T1, d), k_num (B, H, T2, d), k_norm (B, H, T2) fp32, v (B, H, T2, dv), keep (B, R, T2) uint8
    or None (R = 1 or T1), eps, blocks) -> (B, H, T1, dv) in v's dtype. q, k_num, v share one dtype; any strides
    (0 for broadcast dimensions)."""

    @staticmethod
    def forward(ctx, q, k_num, k_norm, v, keep, eps, blocks):
        batch, heads, t1, d = q.shape
        t2, dv = k_num.size(2), v.size(3)
        out = q.new_empty(batch, t1, heads, dv, dtype=v.dtype).transpose(1, 2)  # (B, T1, H, dv) as the module wants
        lse = q.new_empty(batch, heads, t1, dtype=torch.float32)
        mask_args = _mask_args(keep, q)
        bm, bn = _fit(blocks.fwd_m, t1), _fit(blocks.fwd_n, t2)
        udps_fwd[(triton.cdiv(t1, bm), batch * heads)](
            q, k_num, k_norm, v, mask_args[0], out, lse, *_strides(q, 4), *_strides(k_num, 4), *_strides(k_norm, 3),
            *_strides(v, 4), *mask_args[1:4], *_strides(out, 4), heads, t1, t2, d, dv, eps,
            HAS_MASK=keep is not None, MASK_ROWS=mask_args[4], PRECISION=_precision(q.dtype),
            FAST_RCP=_fast_reciprocal(q), BLOCK_M=bm, BLOCK_N=bn,
            BLOCK_D=_fit(256, d), BLOCK_DV=_fit(256, dv), num_warps=blocks.fwd_warps, num_stages=blocks.stages)
        ctx.save_for_backward(q, k_num, k_norm, v, keep, out, lse)
        ctx.eps, ctx.blocks = eps, blocks
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k_num, k_norm, v, keep, out, lse = ctx.saved_tensors
        blocks, eps = ctx.blocks, ctx.eps
        batch, heads, t1, d = q.shape
        t2, dv = k_num.size(2), v.size(3)
        grad_out = grad_out.to(out.dtype)
        dq = torch.empty(batch, heads, t1, d, dtype=q.dtype, device=q.device)
        dk = torch.empty(batch, heads, t2, d, dtype=k_num.dtype, device=q.device)
        dn = torch.empty(batch, heads, t2, dtype=torch.float32, device=q.device)
        dvv = torch.empty(batch, heads, t2, dv, dtype=v.dtype, device=q.device)
        delta = torch.empty_like(lse)
        mask_args = _mask_args(keep, q)
        common = dict(HAS_MASK=keep is not None, MASK_ROWS=mask_args[4], PRECISION=_precision(q.dtype),
                      FAST_RCP=_fast_reciprocal(q),
                      BLOCK_D=_fit(256, d), BLOCK_DV=_fit(256, dv))
        inputs = (*_strides(q, 4), *_strides(k_num, 4), *_strides(k_norm, 3), *_strides(v, 4), *mask_args[1:4],
                  *_strides(grad_out, 4))
        bm, bn = _fit(blocks.dq_m, t1), _fit(blocks.dq_n, t2)
        # The query pass first: it also writes delta, which the key pass reads.
        udps_bwd_dq[(triton.cdiv(t1, bm), batch * heads)](
            q, k_num, k_norm, v, mask_args[0], out, grad_out, lse, delta, dq, *inputs, *_strides(out, 4), heads, t1,
            t2, d, dv, eps, BLOCK_M=bm, BLOCK_N=bn, num_warps=blocks.dq_warps, num_stages=blocks.stages, **common)
        bm, bn = _fit(blocks.dkv_m, t1), _fit(blocks.dkv_n, t2)
        udps_bwd_dkv[(triton.cdiv(t2, bn), batch * heads)](
            q, k_num, k_norm, v, mask_args[0], grad_out, lse, delta, dk, dn, dvv, *inputs, heads, t1, t2, d, dv, eps,
            BLOCK_M=bm, BLOCK_N=bn, num_warps=blocks.dkv_warps,
            num_stages=blocks.stages if blocks.dkv_stages is None else blocks.dkv_stages, **common)
        return dq, dk, dn, dvv, None, None, None


def _mask_args(keep: Optional[torch.Tensor], q: torch.Tensor):
    """(pointer, batch / row / key strides, whether the mask has one row per query) for the kernels."""
    if keep is None:
        return q, 0, 0, 0, False
    return keep, keep.stride(0), keep.stride(1) if keep.size(1) > 1 else 0, keep.stride(2), keep.size(1) > 1


def udps_attention_triton(q: torch.Tensor, k_num: torch.Tensor, k_norm: torch.Tensor, v: torch.Tensor,
                          mask: Optional[torch.Tensor] = None, eps: float = DEFAULT_EPS,
                          blocks: Blocks = DEFAULT_BLOCKS) -> torch.Tensor:
    """UDPS attention through :class:`UDPSTritonFunction` (no bias, no dropout) on CUDA tensors (CPU tensors under
    ``TRITON_INTERPRET=1``).

    q (B, H, T1, d), k_num (B|1, H, T2, d), k_norm (B|1, H, T2), v (B, H, T2, dv), mask (B|1, 1|T1, T2) bool
    (True = attend) or None -> (B, H, T1, dv) in v's dtype. The dots run in q's dtype if it is fp16/bf16, else fp32;
    gradients reach k_num and k_norm, so scales folded into k_num outside (alpha, beta, the position term) get theirs
    through autograd, summed over heads and batch there (deterministically).
    """
    batch, heads = q.shape[:2]
    dtype = q.dtype if q.dtype in (torch.float16, torch.bfloat16) else torch.float32
    keep = None
    if mask is not None:
        keep = mask.expand(batch, -1, -1).view(torch.uint8)
    out = UDPSTritonFunction.apply(q.to(dtype), k_num.to(dtype).expand(batch, heads, -1, -1),
                                   k_norm.to(torch.float32).expand(batch, heads, -1), v.to(dtype), keep, eps, blocks)
    return out.to(v.dtype)
