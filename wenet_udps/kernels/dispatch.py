"""Which kernel runs an attention call: by device, dtype, size, and whether a graph is being recorded.

UDPS (:func:`udps_attention`):

| where | runs |
|---|---|
| tracing, scripting, ONNX export, inside an enclosing ``torch.compile`` | ``reference`` (recordable, fusable) |
| an additive ``bias`` (``pos_norm: qp``), or dropout on the probabilities while training | ``reference`` |
| CUDA, fp32/fp16/bf16, triton importable, and its self-check passed for this key | ``triton_udps`` |
| CPU, T1 >= 2 (>= ``FEATURE_MAJOR_MIN_ROWS`` over feature-major keys), the C++ extension builds | ``cpu_ext`` |
| CPU without the extension, T1 and T2 >= ``TILED_MIN_LEN`` and B*H*T1*T2 >= ``TILED_MIN_SCORES`` | ``cpu_tiled`` |
| CPU, any other size (one query row; a decoding step over the memory cache; no extension: short T) | ``cpu_fused`` |
| via :func:`udps_attention_from_keys`: one query row, no gradient, no forced kernel | ``one_query`` |
| anything else (float64 on CUDA, no triton, a failed self-check) | ``reference`` |

``one_query`` (any device) folds the denominators into the keys and runs torch's SDPA; it needs the raw keys and the
numerator scale, which is why the modules that compute their keys per call (plain UDPS self-attention) call
:func:`udps_attention_from_keys`, and those with a ready ``k~`` (the cross-attention cache) :func:`udps_attention`.

The first Triton call per (dtype, head dim, value dim, mask kind) is checked against the reference
(:mod:`~wenet_udps.kernels.selfcheck`); a failure warns once and the reference serves that key from then on.
``WENET_UDPS_KERNEL=reference`` runs the reference for every UDPS call; ``WENET_UDPS_KERNEL=triton`` runs Triton for
every call it can serve (no bias, no dropout, not recording a graph), unchecked.

Scaled-dot has one implementation (:func:`scaled_dot_attention`, torch's SDPA), re-exported here so the attention
modules import every kernel from one place; so is :func:`prefix_pool_attention`, both families' decoder
self-attention step over a beam's pooled prefixes (:mod:`~wenet_udps.kernels.prefix_pool`).
"""
import functools
from typing import Optional

import torch

from wenet_udps.kernels import selfcheck
from wenet_udps.kernels import cpu_ext
from wenet_udps.kernels.cpu_fused import udps_attention_fused
from wenet_udps.kernels.cpu_tiled import udps_attention_tiled
from wenet_udps.kernels.one_query import udps_attention_one_query
from wenet_udps.kernels.prefix_pool import prefix_pool_attention
from wenet_udps.kernels.reference import DEFAULT_EPS, exporting, udps_attention_reference, upcast
from wenet_udps.kernels.scaled_dot import scaled_dot_attention
from wenet_udps.utils.cli import UserError

__all__ = ["udps_attention", "udps_attention_from_keys", "scaled_dot_attention", "prefix_pool_attention",
           "choose_udps_kernel",
           "TILED_MIN_LEN", "TILED_MIN_SCORES"]

# Below this many query rows or keys (e.g. one decoding step, T1 = 1) the untiled fused kernel is cheaper than the
# tiled kernel's fixed cost per call (measured: docs/benchmarks.md).
TILED_MIN_LEN = 64
# Below this many scores per call (B * H * T1 * T2) the compiled tiled kernel saves too little per call to earn back
# its compile cost (seconds per process, even from inductor's disk cache) within a run: cpu_fused runs, and a
# process that makes only such calls (short utterances, decoding) compiles nothing (bench/compile_cost.py).
TILED_MIN_SCORES = 1 << 20
# Over keys stored feature-major (the decoder's memory cache) the extension copies them contiguous per call; with
# fewer query rows than this (a decoding step: an utterance's hypotheses) cpu_fused, reading them in place, is cheaper.
FEATURE_MAJOR_MIN_ROWS = 64
TRITON_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# Devices whose tensors go to the Triton kernel; tests add "cpu" to run the whole path under TRITON_INTERPRET=1.
TRITON_DEVICES = ("cuda",)


@functools.lru_cache(maxsize=None)
def triton_available() -> bool:
    """Whether the Triton kernel module imports (triton installed, with a working backend)."""
    try:
        from wenet_udps.kernels import triton_udps  # noqa: F401
    except ImportError:
        return False
    return True


def triton_interpreting() -> bool:
    """Whether Triton runs kernels in its interpreter: Triton's own reading of ``TRITON_INTERPRET`` (it takes
    ``true`` / ``yes`` / ``on`` too; comparing with "1" here refused a run that Triton would interpret)."""
    try:
        from triton import knobs
    except ImportError:
        return False
    return bool(knobs.runtime.interpret)


def choose_udps_kernel(q: torch.Tensor, k_num: torch.Tensor, bias: Optional[torch.Tensor], dropout_p: float,
                       training: bool) -> str:
    """The implementation :func:`udps_attention` runs: ``"reference"``, ``"cpu_ext"``, ``"cpu_fused"``,
    ``"cpu_tiled"`` or ``"triton"``."""
    # exporting() first: under tracing the size comparisons would be recorded as constants.
    if exporting() or bias is not None or (dropout_p > 0.0 and training):
        return "reference"
    forced = selfcheck.forced_kernel()
    if forced == "reference":
        return "reference"
    if forced == "triton":
        if not triton_available():
            raise UserError(f"{selfcheck.KERNEL_ENV}=triton, but triton does not import here; unset it")
        # Off CUDA, Triton runs only in its interpreter (TRITON_INTERPRET=1, as the tests use it); otherwise it
        # fails deep in its launcher looking for a GPU driver.
        if q.device.type != "cuda" and not triton_interpreting():
            raise UserError(f"{selfcheck.KERNEL_ENV}=triton, but the attention runs on {q.device.type}: the Triton "
                            f"kernel needs a CUDA GPU; unset {selfcheck.KERNEL_ENV} or use reference")
        return "triton"
    if q.device.type in TRITON_DEVICES:
        same = q.dtype in TRITON_DTYPES and k_num.dtype in TRITON_DTYPES
        return "triton" if same and triton_available() else "reference"
    if q.device.type != "cpu":
        return "reference"
    t1, t2 = q.size(-2), k_num.size(-2)
    # One query row, or a few over keys stored feature-major (a source-attention decoding step over the memory's
    # cache, one query row per hypothesis of the utterance), stays eager: the extension would copy the cached keys
    # contiguous at every step (most of a UDPS decoding step's time on a long utterance).
    few_rows_in_place = t1 < FEATURE_MAJOR_MIN_ROWS and k_num.stride(-1) != 1 and k_num.size(-1) > 1
    if t1 >= 2 and not few_rows_in_place and cpu_ext.ext_available():
        return "cpu_ext"
    if t1 >= TILED_MIN_LEN and t2 >= TILED_MIN_LEN and q.size(0) * q.size(1) * t1 * t2 >= TILED_MIN_SCORES:
        return "cpu_tiled"
    return "cpu_fused"


def udps_attention(q: torch.Tensor, k_num: torch.Tensor, k_norm: torch.Tensor, v: torch.Tensor,
                   mask: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
                   eps: float = DEFAULT_EPS, dropout_p: float = 0.0, training: bool = False) -> torch.Tensor:
    """UDPS attention through the implementation :func:`choose_udps_kernel` picks; all give the reference's numbers.

    Shapes as :func:`~wenet_udps.kernels.reference.udps_attention_reference`: q (B, H, T1, d), k_num (B|1, H, T2, d),
    k_norm (B|1, H, T2), v (B, H, T2, dv), mask bool (B, 1|T1, T2) or empty/None -> (B, H, T1, dv).
    """
    kernel = choose_udps_kernel(q, k_num, bias, dropout_p, training)
    if kernel == "triton" and (selfcheck.forced_kernel() == "triton" or selfcheck.triton_verified(q, v, mask)):
        from wenet_udps.kernels.triton_udps import udps_attention_triton
        return udps_attention_triton(q, k_num, k_norm, v, mask=_as_mask(mask), eps=eps)
    if kernel == "cpu_ext":
        return cpu_ext.udps_attention_ext(q, k_num, k_norm, v, mask=_as_mask(mask), eps=eps)
    if kernel == "cpu_tiled":
        return udps_attention_tiled(q, k_num, k_norm, v, mask=_as_mask(mask), eps=eps)
    if kernel == "cpu_fused":
        return udps_attention_fused(q, k_num, k_norm, v, mask=_as_mask(mask), eps=eps)
    return udps_attention_reference(q, k_num, k_norm, v, mask=mask, bias=bias, eps=eps,
                                    dropout_p=dropout_p, training=training)


def udps_attention_from_keys(q: torch.Tensor, k: torch.Tensor, scale: torch.Tensor, v: torch.Tensor,
                             mask: Optional[torch.Tensor] = None, eps: float = DEFAULT_EPS, dropout_p: float = 0.0,
                             training: bool = False) -> torch.Tensor:
    """Plain UDPS attention from the raw keys: k~ = ``scale`` k (``scale`` = 4 alpha, (1, H, 1, 1)) and n = |k|.

    One query row (nothing recording gradients or a graph, no forced kernel) runs ``one_query``; every other call
    forms k~ and n and goes through :func:`udps_attention`. q (B, H, T1, d), k (B, H, T2, d), v (B, H, T2, dv),
    mask (B, 1|T1, T2) bool or empty/None -> (B, H, T1, dv).
    """
    # exporting() first: under tracing the size comparison would be recorded as a constant.
    grads = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, scale, v))
    if (not exporting() and q.size(-2) == 1 and not grads and not (dropout_p > 0.0 and training)
            and selfcheck.forced_kernel() is None):
        return udps_attention_one_query(q, k, scale, v, mask=_as_mask(mask), eps=eps)
    return udps_attention(q, scale * k, torch.linalg.vector_norm(upcast(k), dim=-1), v, mask=mask, eps=eps,
                          dropout_p=dropout_p, training=training)


def _as_mask(mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """An empty mask means no mask."""
    return None if mask is None or mask.size(-1) == 0 else mask
