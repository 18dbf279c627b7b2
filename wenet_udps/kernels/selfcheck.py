"""Self-check of the Triton UDPS kernel against the reference formula, once per process and key, with fallback.

The first call that :mod:`~wenet_udps.kernels.dispatch` would send to the Triton kernel, for each (dtype, head dim,
value dim, mask kind), first runs both implementations on a small random input of that key and compares the output and
the gradients of q, k (through the numerator keys and the norms), the positional term p, v, alpha and beta. A mismatch
beyond the dtype's tolerance, a compile error or a launch error gives one :class:`KernelFallbackWarning` (naming
torch, triton, the device, CUDA and the largest error) and the reference runs for that key for the rest of the process.
A pass is logged at INFO (the training log). :func:`self_check_results` returns the verdicts for provenance.

``WENET_UDPS_KERNEL=triton`` runs the Triton kernel wherever it can serve a call, without the check (to debug or
benchmark the kernel itself); ``WENET_UDPS_KERNEL=reference`` runs the reference formula for every UDPS call.
"""
import logging
import os
import threading
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from wenet_udps.kernels.reference import udps_attention_reference
from wenet_udps.utils.cli import UserError

KERNEL_ENV = "WENET_UDPS_KERNEL"
KERNEL_CHOICES = ("triton", "reference")
# Relative (Frobenius) error allowed per tensor; an H200 gave at most 7e-7 (fp32), 6.6e-4 (fp16) and 7.7e-3 (bf16) at
# head dim 64 (docs/gpu.md, 2026-11-26).
TOLERANCE = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 3e-2}
TF32_TOLERANCE = 5e-3  # fp32 dots in TF32 when torch.backends.cuda.matmul.allow_tf32 is set (kernel and reference)
# (batch, heads, length) of the check: on CUDA several blocks of every launch (blocks of up to 128), under the
# interpreter (CPU tensors, CI) as small as still crosses a block of 16; odd lengths leave partial blocks.
CHECK_SHAPE = {"cuda": (2, 2, 203), "cpu": (2, 2, 37)}
GRADS = ("q", "k", "p", "v", "alpha", "beta")

Key = Tuple[torch.dtype, int, int, str]
_VERDICTS: Dict[Key, Dict] = {}
_VERDICTS_LOCK = threading.Lock()  # one check per key in a process, however many threads decode (_check_once)


class KernelFallbackWarning(UserWarning):
    """The Triton UDPS kernel failed its self-check: the reference formula runs instead (slower, same numbers)."""


def forced_kernel() -> Optional[str]:
    """``WENET_UDPS_KERNEL`` ("triton" or "reference"), or None when unset or empty (the dispatch chooses)."""
    value = os.environ.get(KERNEL_ENV, "").strip()
    if not value:
        return None
    if value not in KERNEL_CHOICES:
        raise UserError(f"{KERNEL_ENV}={value!r}; valid choices: {', '.join(KERNEL_CHOICES)} (or unset)")
    return value


def mask_kind(mask: Optional[torch.Tensor]) -> str:
    """"none", "keys" (one mask row for all queries: padding) or "rows" (one per query: causal, chunk)."""
    if mask is None or mask.size(-1) == 0:
        return "none"
    return "keys" if mask.size(-2) == 1 else "rows"


def _check_inputs(dtype: torch.dtype, d: int, dv: int, kind: str, device: torch.device):
    """Random leaves (q, k, p, v, alpha, beta) and a mask of ``kind``, from a private generator (the global RNG
    stays untouched, so a run with the check gives the same numbers as one without)."""
    batch, heads, t = CHECK_SHAPE["cuda" if device.type == "cuda" else "cpu"]
    gen = torch.Generator().manual_seed(0)
    shapes = [(batch, heads, t, d)] * 3 + [(batch, heads, t, dv), (1, heads, 1, 1), (1, heads, 1, 1)]
    leaves = [torch.randn(s, generator=gen).to(device, dtype) for s in shapes]
    leaves[4] = leaves[4].abs() + 1.0  # alpha, beta: positive scales as trained
    leaves[5] = leaves[5].abs() + 0.5
    lengths = torch.tensor([t - 11 * (i % 2) for i in range(batch)])
    keep = torch.arange(t)[None, :] < lengths[:, None]
    mask = None
    if kind == "keys":
        mask = keep.unsqueeze(1)
    elif kind == "rows":  # causal and padding, as the decoder's self-attention
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool)).unsqueeze(0) & keep.unsqueeze(1)
    grad = torch.randn(batch, heads, t, dv, generator=gen).to(device, dtype)
    return leaves, None if mask is None else mask.to(device), grad


def _run(kernel: Callable, leaves: List[torch.Tensor], mask, grad) -> List[torch.Tensor]:
    """Output and gradients of the leaves, the rel-pos UDPS way: k_num = 4 (alpha k + beta p), k_norm = |k|."""
    with torch.enable_grad(), torch.autocast(device_type=grad.device.type, enabled=False):
        leaves = [x.detach().clone().requires_grad_(True) for x in leaves]
        q, k, p, v, alpha, beta = leaves
        k_norm = torch.linalg.vector_norm(k.float(), dim=-1)
        out = kernel(q, 4.0 * (alpha * k + beta * p), k_norm, v, mask=mask)
        out.backward(grad)
    return [out.detach()] + [x.grad for x in leaves]


def rel_errors(got: List[torch.Tensor], ref: List[torch.Tensor],
               names: Sequence[str] = ("out",) + GRADS) -> Dict[str, float]:
    """Relative Frobenius error per tensor, by ``names`` (out, then the gradients); inf where ``got`` is not finite."""
    errors = {}
    for name, g, r in zip(names, got, ref):
        g, r = g.double().cpu(), r.double().cpu()
        finite = bool(torch.isfinite(g).all())
        errors[name] = ((g - r).norm() / r.norm().clamp_min(1e-30)).item() if finite else float("inf")
    return errors


def environment(device: torch.device) -> str:
    """torch, triton, the device and CUDA, as the warning and the gpu_check report name them."""
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (Triton interpreter)"
    return f"torch {torch.__version__}, triton {triton_version}, {name}, CUDA {torch.version.cuda}"


def tolerance(dtype: torch.dtype) -> float:
    if dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32:
        return TF32_TOLERANCE
    return TOLERANCE[dtype]


def check_triton(dtype: torch.dtype, d: int, dv: int, kind: str, device: torch.device) -> Dict:
    """Compare the Triton kernel with the reference on one key; a verdict dict (never raises for kernel faults)."""
    from wenet_udps.kernels import triton_udps  # only here: importing triton is the caller's choice
    verdict = {"dtype": str(dtype).replace("torch.", ""), "head_dim": d, "value_dim": dv, "mask": kind,
               "tolerance": tolerance(dtype), "environment": environment(device)}
    with torch.inference_mode(False):  # decoding may run under inference mode: the check needs autograd
        leaves, mask, grad = _check_inputs(dtype, d, dv, kind, device)
        # The reference in float32 on the same (rounded) leaves: a half-precision reference would add its own
        # rounding of every gradient to the kernel's error.
        ref = _run(udps_attention_reference, [x.float() for x in leaves], mask, grad.float())
        try:
            got = _run(triton_udps.udps_attention_triton, leaves, mask, grad)
        except Exception as exc:  # noqa: BLE001 - a compile or launch error of any kind means: do not use the kernel
            return {**verdict, "ok": False, "error": f"{type(exc).__name__}: {(str(exc) or '-').splitlines()[0][:300]}"}
    errors = rel_errors(got, ref)
    worst = max(errors, key=errors.get)
    return {**verdict, "ok": errors[worst] <= verdict["tolerance"], "max_rel_error": errors[worst],
            "worst": worst, "rel_errors": errors}


def triton_verified(q: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor]) -> bool:
    """Whether the Triton kernel may serve a call like this one: checked on the first such call of the process."""
    key = (q.dtype, q.size(-1), v.size(-1), mask_kind(mask))
    if key not in _VERDICTS:
        _check_once(key, q.device)
    return _VERDICTS[key]["ok"]


def _check_once(key: Key, device: torch.device) -> None:
    """The self-check of ``key``, unless another thread made it meanwhile (whichever thread calls first checks;
    the others wait for its verdict)."""
    with _VERDICTS_LOCK:
        if key in _VERDICTS:
            return
        verdict = check_triton(*key, device)
        _VERDICTS[key] = verdict
        what = (f"UDPS Triton kernel self-check ({verdict['dtype']}, head dim {key[1]}, value dim {key[2]}, mask "
                f"{key[3]}) on {verdict['environment']}")
        if verdict["ok"]:
            logging.info("%s: passed, largest relative error %.2e (%s; tolerance %.0e)", what,
                         verdict["max_rel_error"], verdict["worst"], verdict["tolerance"])
        else:
            reason = verdict.get("error") or (f"largest relative error {verdict['max_rel_error']:.2e} in "
                                              f"{verdict['worst']} (tolerance {verdict['tolerance']:.0e})")
            warnings.warn(f"{what} FAILED: {reason}. The reference formula runs instead for the rest of this process "
                          f"(same numbers, slower, O(T^2) memory). Please report this with the output of "
                          f"`python -m wenet_udps.bin.gpu_check`. {KERNEL_ENV}=reference silences this check.",
                          KernelFallbackWarning, stacklevel=4)


def self_check_results() -> Dict[str, Dict]:
    """The verdicts of this process's self-checks, by "dtype/head dim/value dim/mask" (for logs and provenance)."""
    return {f"{v['dtype']}/d{v['head_dim']}/dv{v['value_dim']}/{v['mask']}": dict(v) for v in _VERDICTS.values()}


def summary() -> str:
    """One line: each checked key and its verdict; empty when no Triton call was made (a CPU run has nothing to
    report, and a line naming Triton in its log would suggest it had)."""
    results = self_check_results()
    if not results:
        return ""
    return "; ".join(f"{key}: {'passed' if v['ok'] else 'FAILED (reference used)'}" for key, v in results.items())


def reset() -> None:
    """Forget the verdicts (tests; a process otherwise checks each key once)."""
    with _VERDICTS_LOCK:
        _VERDICTS.clear()
