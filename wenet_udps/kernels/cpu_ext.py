"""UDPS attention on CPU as a C++ extension (csrc/udps_cpu.cpp): blockwise in cache, like SDPA's CPU flash kernel.

The eager kernels (:mod:`cpu_fused`, :mod:`cpu_tiled`) materialise (B, H, T1, T2) score tensors and pass over them
several times; the extension computes each block of query rows against the keys while it is in cache (one GEMM for
the scores, one loop per row for the denominator, the mask and the exponential, GEMMs for the products) and keeps
only the per-row log-sum-exp for the backward, which recomputes P block by block. It is deterministic (one thread
per (batch, head), key gradients summed in order) and runs float32; float64 goes to :mod:`cpu_fused`. A call makes one
OpenMP parallel region (torch's threads over batch x heads) and its GEMMs run on one MKL thread each:
:func:`thread_use` says what a call runs with.

The extension is compiled on first use with ``torch.utils.cpp_extension.load`` (a C++ compiler and ninja needed; about
17 s, later loads take 0.1 s from torch's extension cache) as a library of torch operators,
``torch.ops.wenet_udps_cpu.{forward,backward,thread_use}`` (not a pybind11 module: half the compile time), for the
CPU's vector capability as torch reports it (AVX512, AVX2, default), which is part of the cached library's name so that
machines sharing a cache do not share instructions. :func:`ext_available` says whether it built; it warns once, naming
the reason, when it did not. ``bash tools/install.sh`` builds it, so that no training process waits for the compiler.
Builds are serialised by an ``flock`` of ours that dies with its holder (:func:`build_under_lock`): a build killed
half-way leaves nothing that makes a later process hang, and a process that waits longer than ``BUILD_WAIT_S`` for
another's build falls back to the eager kernels with the warning.
"""
import fcntl
import functools
import hashlib
import os
import threading
import time
import warnings
from pathlib import Path
from typing import Callable, Optional, TypeVar

import torch

from wenet_udps.kernels.cpu_fused import _sum_to, udps_attention_fused
from wenet_udps.kernels.reference import DEFAULT_EPS, upcast
from wenet_udps.utils.env import compiling

_SOURCE = Path(__file__).resolve().parent / "csrc" / "udps_cpu.cpp"

# Our build lock, in the build folder (see build_under_lock), and how long a process waits for another one's build
# (about 17 s on an idle machine) before it runs the eager kernels instead, with the one-time warning.
LOCK_NAME = "wenet_udps.flock"
BUILD_WAIT_S = 300.0
T = TypeVar("T")

# -fopenmp (compile and link): at::parallel_for is an inline header that runs serially unless _OPENMP is defined, so
# without it the (batch, head) loop ran on one thread and only MKL's own threads inside each small GEMM were
# parallel: thousands of parallel regions per step, which collapse on busy cores (issue 49). The libgomp linked is
# the one torch has loaded already (same soname), so there is one OpenMP thread pool in the process.
# Vector instructions per torch CPU capability. No -ffast-math: results stay IEEE and reproducible; contracting
# a * b + c into an FMA is the only liberty taken.
_CAPABILITY_FLAGS = {
    "AVX512": ["-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl", "-mavx2", "-mfma", "-mprefer-vector-width=512"],
    "AVX2": ["-mavx2", "-mfma"],
}


def _capability() -> str:
    try:
        return torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):
        return "DEFAULT"


def build_under_lock(build_dir: str, build: Callable[[], T], wait_s: float = BUILD_WAIT_S) -> T:
    """``build()`` while holding our lock on ``build_dir``; TimeoutError after ``wait_s`` s of waiting for it.

    torch guards a build with a ``lock`` file that it creates and deletes: a build killed in between leaves the file,
    and every later ``cpp_extension.load`` of that name then waits for it forever. Ours is an ``flock`` on
    ``LOCK_NAME``, which the kernel releases when its holder dies; while we hold it no other process of ours is
    building, so a torch ``lock`` found then was left by a killed build and is removed (with a warning).
    """
    fd = os.open(os.path.join(build_dir, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"another process has been building the extension in {build_dir} for over "
                                       f"{wait_s:g} s") from None
                time.sleep(0.2)
        stale = os.path.join(build_dir, "lock")
        if os.path.exists(stale):
            warnings.warn(f"wenet_udps: removing {stale}, left by a C++ kernel build that was killed (torch would "
                          f"wait for it forever)", stacklevel=2)
            os.unlink(stale)
        return build()
    finally:
        os.close(fd)  # releases the flock


# Threads of one process load the extension one at a time: a second thread's build would wait for the first's flock
# and could time out, and the cached answer of the later one (an exception) would switch every later call to
# another kernel (issue 80, mechanism C). After the first load, a later one finds it built.
_LOAD_LOCK = threading.Lock()


@functools.lru_cache(maxsize=None)
def _load():
    """The compiled operators (``torch.ops.wenet_udps_cpu``), or the exception that kept them from building or
    loading (in time)."""
    with _LOAD_LOCK:
        return _build()


def _build():
    from torch.utils import cpp_extension

    cap = _capability()
    flags = _CAPABILITY_FLAGS.get(cap, [])
    try:
        # The checkout's path in the name too: torch's build files name the sources by path, so two checkouts
        # sharing one extension cache would otherwise rebuild it (about 17 s) each time the other one ran.
        where = hashlib.sha1(str(_SOURCE.parent).encode()).hexdigest()[:8]
        name = f"wenet_udps_udps_cpu_{cap.lower()}_{where}"
        # torch's own choice of folder (TORCH_EXTENSIONS_DIR, else its cache), made if absent: where install.sh built.
        build_dir = cpp_extension._get_build_directory(name, verbose=False)
        # The library registers torch operators (TORCH_LIBRARY in the source): loading it defines them.
        build_under_lock(build_dir, lambda: cpp_extension.load(
            name=name, sources=[str(_SOURCE)], extra_cflags=["-O3", "-ffp-contract=fast", "-fopenmp", *flags],
            extra_ldflags=["-fopenmp"], build_directory=build_dir, is_python_module=False, verbose=False))
        return torch.ops.wenet_udps_cpu
    except Exception as exc:  # no compiler, no ninja, a compile or link error, a build elsewhere too long: fall back
        return exc


def ext_available() -> bool:
    """Whether the extension builds and loads here (built on the first call); warns once with the reason if not.
    ``WENET_UDPS_COMPILE=0`` (or false/no/off: utils/env.py; compile nothing, docs/reproducibility.md) turns it off
    without a warning."""
    if not compiling():
        return False
    ext = _load()
    if isinstance(ext, Exception):
        _warn_once(f"{type(ext).__name__}: {str(ext).strip().splitlines()[-1] if str(ext).strip() else ''}")
        return False
    return True


@functools.lru_cache(maxsize=None)
def _warn_once(reason: str) -> None:
    warnings.warn(f"wenet_udps: the C++ UDPS CPU kernel is unavailable ({reason}); using the eager kernels",
                  RuntimeWarning, stacklevel=3)


def _module():
    ext = _load()
    if isinstance(ext, Exception):
        raise RuntimeError("the C++ UDPS CPU kernel did not build; check ext_available() first") from ext
    return ext


def thread_use(items: int) -> tuple:
    """(threads of the extension's (batch, head) loop, MKL threads per GEMM inside it) for a call over ``items`` =
    batch x heads at torch's current thread count; MKL's is 0 where torch has no MKL. Call :func:`ext_available`
    first."""
    return tuple(_module().thread_use(items))


class UDPSExtFunction(torch.autograd.Function):
    """forward(q (B, H, T1, d), k_num (B|1, H, T2, d), k_norm (B|1, H, T2), v (B|1, H, T2, dv),
    keep (B|1, T1|1, T2) bool or None, eps) -> (B, H, T1, dv); contiguous float32 inputs."""

    @staticmethod
    def forward(ctx, q, k_num, k_norm, v, keep, eps):
        out, lse = _module().forward(q, k_num, k_norm, v, keep, eps)
        ctx.save_for_backward(q, k_num, k_norm, v, keep, out, lse)
        ctx.eps = eps
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k_num, k_norm, v, keep, out, lse = ctx.saved_tensors
        dq, dk, dn, dv = _module().backward(q, k_num, k_norm, v, keep, out, lse, grad_out.contiguous(), ctx.eps)
        return dq, _sum_to(dk, k_num), _sum_to(dn, k_num), _sum_to(dv, v), None, None


def udps_attention_ext(q: torch.Tensor, k_num: torch.Tensor, k_norm: torch.Tensor, v: torch.Tensor,
                       mask: Optional[torch.Tensor] = None, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """UDPS attention (no bias, no dropout) with the reference's numbers up to float rounding; any float dtype.

    q (B, H, T1, d), k_num (B|1, H, T2, d), k_norm (B|1, H, T2), v (B, H, T2, dv), mask (B|1, 1|T1, T2) bool
    (True = attend) or None -> (B, H, T1, dv) in v's dtype. Half precision is computed in float32; float64 runs
    :func:`~wenet_udps.kernels.cpu_fused.udps_attention_fused`. Call :func:`ext_available` first.
    """
    if torch.float64 in (q.dtype, k_num.dtype, k_norm.dtype, v.dtype):
        return udps_attention_fused(q, k_num, k_norm, v, mask=mask, eps=eps)
    keep = None if mask is None or mask.size(-1) == 0 else mask.to(torch.bool).contiguous()
    with torch.autocast(device_type=q.device.type, enabled=False):
        args = [upcast(x).contiguous() for x in (q, k_num, k_norm, v)]
        if torch.is_grad_enabled() and any(x.requires_grad for x in args):
            out = UDPSExtFunction.apply(*args, keep, float(eps))
        else:
            out = _module().forward(*args, keep, float(eps))[0]
    return out.to(v.dtype)
