"""Kernel checks of the GPU preflight (``python -m wenet_udps.bin.gpu_check``): parity and speed.

Each check is a dict ``{"check": name, "verdict": "pass" | "fail" | "skipped (...)" | "not measured (...)", ...}``
with its numbers; the command adds the model checks and writes them all to JSON.
"""
import statistics
import time
from typing import Dict, List, Sequence

import torch
import torch.nn.functional as F

from wenet_udps.kernels import selfcheck
from wenet_udps.kernels.dispatch import udps_attention

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
MASK_KINDS = ("none", "keys", "rows")


def parity(device: torch.device, head_dim: int, value_dim: int) -> List[Dict]:
    """The self-check's comparison for every dtype and mask kind. Under the Triton interpreter (CPU) fp32 only:
    the interpreter computes half-precision dots differently from a GPU (bf16 ``tl.dot`` wrongly)."""
    checks = []
    for name, dtype in DTYPES.items():
        for kind in MASK_KINDS:
            check = {"check": f"kernel parity {name} mask={kind} d={head_dim}"}
            if device.type != "cuda" and dtype != torch.float32:
                checks.append({**check, "verdict": "skipped (cpu)"})
                continue
            verdict = selfcheck.check_triton(dtype, head_dim, value_dim, kind, device)
            checks.append({**check, "verdict": "pass" if verdict["ok"] else "fail", **verdict})
    return checks


def _median_ms(fn, repeats: int = 10) -> float:
    fn()  # warm-up (Triton compiles here)
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _peak_mib(fn) -> float:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2 ** 20


def speed(device: torch.device, dtype: torch.dtype, lengths: Sequence[int], heads: int, head_dim: int,
          batch: int = 4) -> List[Dict]:
    """fwd+bwd of UDPS through the dispatch (Triton after its self-check) vs flash SDPA at each T: median ms and
    peak allocated MiB, with the ratios. Informational (a slow kernel is not a wrong one): the verdict is "measured"
    unless a run fails. Not measured on CPU (the dispatch's CPU path is benchmarked by bench/attention.py)."""
    if device.type != "cuda":
        return [{"check": f"speed/memory T={t}", "verdict": "not measured (cpu)"} for t in lengths]
    checks = []
    for t in lengths:
        gen = torch.Generator(device=device).manual_seed(0)
        q, k, v = (torch.randn(batch, heads, t, head_dim, device=device, dtype=dtype, generator=gen)
                   for _ in range(3))
        lengths_t = torch.randint(t // 2, t + 1, (batch,), device=device, generator=gen)
        mask = (torch.arange(t, device=device)[None, :] < lengths_t[:, None]).unsqueeze(1)
        grad = torch.randn_like(q)

        def udps():
            leaves = [x.detach().requires_grad_(True) for x in (q, k, v)]
            norm = torch.linalg.vector_norm(leaves[1].float(), dim=-1)
            udps_attention(leaves[0], 40.0 * leaves[1], norm, leaves[2], mask=mask).backward(grad)

        def flash():
            leaves = [x.detach().requires_grad_(True) for x in (q, k, v)]
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
                F.scaled_dot_product_attention(*leaves).backward(grad)
        check = {"check": f"speed/memory T={t}", "dtype": str(dtype).replace("torch.", ""), "batch": batch,
                 "heads": heads, "head_dim": head_dim}
        try:
            numbers = {"udps_ms": _median_ms(udps), "flash_ms": _median_ms(flash),
                       "udps_peak_mib": _peak_mib(udps), "flash_peak_mib": _peak_mib(flash)}
        except Exception as exc:  # noqa: BLE001 - reported as a failed check, the others still run
            checks.append({**check, "verdict": "fail", "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        numbers["time_ratio"] = numbers["udps_ms"] / numbers["flash_ms"]
        numbers["memory_ratio"] = numbers["udps_peak_mib"] / max(numbers["flash_peak_mib"], 1e-9)
        checks.append({**check, "verdict": "measured", **numbers})
    return checks
