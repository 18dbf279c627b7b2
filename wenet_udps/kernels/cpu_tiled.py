"""UDPS attention on CPU: tiled forward and hand-derived backward, each tile one compiled kernel.

The straightforward formula makes a separate pass over a full (B, H, T1, T2) tensor for every step and autograd keeps
several of them alive for the backward. Here the work is cut into tiles (a group of batch items, or a block of query
rows of one item, at most ``tile_elems`` score elements) and each tile runs pure functions (:data:`TILE_FUNCTIONS`)
compiled by ``torch.compile`` (inductor), so the elementwise steps and row reductions of a tile are a few fused
loops over cache-resident data between the matmuls. For long inputs the backward recomputes the tile's scores from
q, k and the saved row log-sum-exp (flash-attention style): nothing of size T1 x T2 is kept between forward and
backward. Up to ``save_elems`` score elements per call the forward keeps the scores instead (one matmul less; naive
attention keeps as much). Keys past the last kept key of a tile (padding) are not computed at all.

Math (per head; a_i = |q_i|, n_j = key norm, N = q k~^T, den = a_i + n_j, D = max(den^2, eps), S = N / D,
P = softmax(S), O = P v), with dO the output gradient and delta_i = sum_c dO_ic O_ic:

    dv = P^T dO          dS = P * (dO v^T - delta)          dN = dS / D
    dq = dN k~ + da_i q_i / a_i                              dk~ = dN^T q
    G = dN * S * den (0 where den^2 < eps)    da_i = -2 sum_j G_ij     dn_j = -2 sum_i G_ij

Compilation happens once per process and input layout (dynamic shapes; inductor's on-disk cache makes later
processes start in seconds). Where it is unavailable (no C++ compiler, ``WENET_UDPS_COMPILE=0``) the same tile
functions run eagerly: slower, and equal to the compiled tiles up to float rounding only (the compiled loops sum in
another order, set by the vector width inductor picks for this CPU: docs/reproducibility.md).
"""
import functools
import logging
import math
import threading
from typing import Callable, Dict, List, Optional, Tuple

import torch

from wenet_udps.utils.env import compiling

logger = logging.getLogger(__name__)

# Score elements per tile: 4 MiB in float32, so a tile's temporaries stay in the CPU caches while the fused loops run
# over them, yet large enough that the matmuls run at full speed and the per-call overhead (about 0.1 ms) is small.
DEFAULT_TILE_ELEMS = 1 << 20
# Up to this many score elements per attention call (16 MiB in float32) the forward saves the score tiles for the
# backward instead of recomputing them: one matmul less, and no more memory than naive attention keeps (its softmax).
DEFAULT_SAVE_ELEMS = 1 << 22


def _scores(q: torch.Tensor, k_num: torch.Tensor, k_norm: torch.Tensor, keep: Optional[torch.Tensor], eps: float
            ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(a, den, S): |q| (n, H, r, 1), |q| + n (n, H, r, K) and the scores, -inf where ``keep`` is False."""
    a = torch.linalg.vector_norm(q, dim=-1, keepdim=True)
    den = a + k_norm.unsqueeze(-2)
    s = torch.matmul(q, k_num.transpose(-2, -1)) / (den * den).clamp_min(eps)
    if keep is not None:
        s = s.masked_fill(~keep, -math.inf)
    return a, den, s


def _softmax_matmul(s: torch.Tensor, v: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """softmax(S) v and the row log-sum-exp of S (+inf for a row with no kept key, whose output is 0)."""
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(m == -math.inf, torch.zeros_like(m), m)
    e = torch.exp(s - m)
    total = e.sum(dim=-1, keepdim=True)
    # Normalising after the matmul touches r x dv elements instead of r x K.
    out = torch.matmul(e, v) / total.clamp_min(torch.finfo(total.dtype).tiny)
    return out, torch.where(total > 0, m + torch.log(total), torch.full_like(total, math.inf))


def tile_forward(q: torch.Tensor, k_num: torch.Tensor, k_norm: torch.Tensor, v: torch.Tensor,
                 keep: Optional[torch.Tensor], eps: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """One tile of the forward.

    q (n, H, r, d), k_num (n, H, K, d), k_norm (n, H, K), v (n, H, K, dv), keep (n, H, r|1, K) bool or None
    -> out (n, H, r, dv), lse (n, H, r, 1).
    """
    return _softmax_matmul(_scores(q, k_num, k_norm, keep, eps)[2], v)


def tile_forward_saving(q: torch.Tensor, k_num: torch.Tensor, k_norm: torch.Tensor, v: torch.Tensor,
                        keep: Optional[torch.Tensor], eps: float
                        ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`tile_forward` that also returns the scores S (n, H, r, K) for :func:`tile_backward_saved`."""
    s = _scores(q, k_num, k_norm, keep, eps)[2]
    return _softmax_matmul(s, v) + (s,)


def _grads(q, k_num, v, keep, a, den, s, lse, out, d_out, eps: float):
    """dq, dk_num, dk_norm, dv of a tile from its scores S (see the module docstring)."""
    den2 = den * den
    d = den2.clamp_min(eps)
    p = torch.exp(s - lse)
    if keep is not None:
        p = torch.where(keep, p, torch.zeros_like(p))
    delta = (d_out * out).sum(dim=-1, keepdim=True)
    d_num = p * (torch.matmul(d_out, v.transpose(-2, -1)) - delta) / d
    # G: the denominator's share of the gradient; clamp_min passes none where the eps floor is active. Masked
    # entries (S = -inf, d_num = 0) give 0 through the same select.
    live = den2 >= eps if keep is None else (den2 >= eps) & keep
    g = torch.where(live, d_num * s * den, torch.zeros_like(s))
    da = -2.0 * g.sum(dim=-1, keepdim=True)
    # d|q|/dq = q / |q| (0 at q = 0, as torch's norm backward).
    dq = torch.matmul(d_num, k_num) + torch.where(a > 0, da / a, torch.zeros_like(a)) * q
    return dq, torch.matmul(d_num.transpose(-2, -1), q), -2.0 * g.sum(dim=-2), torch.matmul(p.transpose(-2, -1), d_out)


def tile_backward(q: torch.Tensor, k_num: torch.Tensor, k_norm: torch.Tensor, v: torch.Tensor,
                  keep: Optional[torch.Tensor], out: torch.Tensor, lse: torch.Tensor, d_out: torch.Tensor, eps: float
                  ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One tile of the backward, recomputing the scores (shapes as :func:`tile_forward`; ``d_out`` like ``out``).

    Returns dq (n, H, r, d), dk_num (n, H, K, d), dk_norm (n, H, K), dv (n, H, K, dv): this tile's contributions.
    """
    a, den, s = _scores(q, k_num, k_norm, keep, eps)
    return _grads(q, k_num, v, keep, a, den, s, lse, out, d_out, eps)


def tile_backward_saved(q: torch.Tensor, k_num: torch.Tensor, k_norm: torch.Tensor, v: torch.Tensor,
                        keep: Optional[torch.Tensor], s: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                        d_out: torch.Tensor, eps: float
                        ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`tile_backward` with the scores S saved by :func:`tile_forward_saving`."""
    a = torch.linalg.vector_norm(q, dim=-1, keepdim=True)
    return _grads(q, k_num, v, keep, a, a + k_norm.unsqueeze(-2), s, lse, out, d_out, eps)


TILE_FUNCTIONS: Dict[str, Callable] = {
    "forward": tile_forward,
    "forward_saving": tile_forward_saving,
    "backward": tile_backward,
    "backward_saved": tile_backward_saved,
}


class _Kernels:
    """The tile functions, each compiled on first use; eager where compiling is off or fails (logged once)."""

    def __init__(self) -> None:
        self.compiled = compiling()
        self.functions: Dict[str, Callable] = {}

    def run(self, name: str, *args, compiled: bool = True):
        if compiled and self.compiled:
            if name not in self.functions:
                with _KERNELS_LOCK:  # one compiled function per name, whichever thread runs it first
                    self.functions.setdefault(name, torch.compile(TILE_FUNCTIONS[name], dynamic=True))
            try:
                return self.functions[name](*args)
            except Exception as exc:  # noqa: BLE001 - any compiler failure falls back to eager
                logger.warning("UDPS attention: torch.compile failed (%s: %s); running the tile kernels eagerly "
                               "(slower; equal up to rounding, so not bitwise the numbers of a compiled run). Set "
                               "WENET_UDPS_COMPILE=0 to skip compiling.",
                               type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
                self.compiled = False
        return TILE_FUNCTIONS[name](*args)


_KERNELS: Optional[_Kernels] = None
_KERNELS_LOCK = threading.Lock()  # threads of one process share the one _Kernels and its compiled functions


def kernels() -> _Kernels:
    """The process-wide tile kernels (created on first use, so importing the package compiles nothing)."""
    global _KERNELS
    with _KERNELS_LOCK:
        if _KERNELS is None:
            _KERNELS = _Kernels()
        return _KERNELS


def plan_tiles(extent: List[int], heads: int, t1: int, tile_elems: int) -> List[Tuple[int, int, int, int]]:
    """Cut the work into groups (b0, b1, keys, rows): items b0:b1 and their keys 0:keys, in blocks of ``rows`` queries.

    ``extent[b]`` is one past item b's last kept key (0: nothing kept, no tile). Consecutive items are grouped while
    the group's tile (items x heads x t1 x its largest extent) fits ``tile_elems``; an item too large alone is cut
    into blocks of query rows (a multiple of 8).
    """
    groups = []
    b, batch = 0, len(extent)
    while b < batch:
        if extent[b] == 0:
            b += 1
            continue
        keys, end = extent[b], b + 1
        while end < batch and (end + 1 - b) * heads * t1 * max(keys, extent[end]) <= tile_elems:
            keys, end = max(keys, extent[end]), end + 1
        rows = t1
        if end == b + 1 and heads * t1 * keys > tile_elems:
            rows = min(t1, max(8, tile_elems // (heads * keys) // 8 * 8))
        groups.append((b, end, keys, rows))
        b = end
    return groups


class UDPSTiledFunction(torch.autograd.Function):
    """UDPS attention tile by tile (see the module docstring for the math).

    forward(q (B, H, T1, d), k_num (B, H, T2, d), k_norm (B, H, T2), v (B, H, T2, dv), keep (B, 1, T1|1, T2) bool,
    eps, tile_elems, save_elems, compiled) -> (B, H, T1, dv). Inputs share one float dtype; ``compiled=False`` runs
    the tile functions eagerly.
    """

    @staticmethod
    def forward(ctx, q, k_num, k_norm, v, keep, eps, tile_elems, save_elems, compiled):
        batch, heads, t1, _ = q.shape
        # One past the last key any query of an item keeps: the keys after it are padding for the whole item.
        kept = keep.any(dim=2)[:, 0]
        extent_t = (kept.size(-1) - kept.flip(-1).to(torch.uint8).argmax(-1)).masked_fill(~kept.any(-1), 0)
        extent = extent_t.tolist()
        # A padding mask (every query keeps keys 0:extent) needs no mask inside a tile whose items all have that
        # extent: the tile is cut there.
        prefix = keep.size(2) == 1 and torch.equal(
            keep[:, 0, 0], torch.arange(keep.size(-1), device=keep.device) < extent_t.unsqueeze(1))
        groups = [(b0, b1, keys, rows, not (prefix and all(e == keys for e in extent[b0:b1])))
                  for b0, b1, keys, rows in plan_tiles(extent, heads, t1, tile_elems)]
        save = any(ctx.needs_input_grad[:4]) and sum(
            (b1 - b0) * heads * t1 * keys for b0, b1, keys, _, _ in groups) <= save_elems
        run = functools.partial(kernels().run, compiled=compiled)
        out = q.new_zeros(batch, heads, t1, v.size(-1))
        lse = q.new_full((batch, heads, t1, 1), math.inf)
        scores = []
        for b0, b1, keys, masked, i0, i1, (k_g, n_g, v_g) in _tiles(groups, t1, (k_num, k_norm, v)):
            result = run("forward_saving" if save else "forward", _fresh(q[b0:b1, :, i0:i1]), k_g, n_g, v_g,
                         _keep_tile(keep, b0, b1, i0, i1, keys, heads) if masked else None, eps)
            out[b0:b1, :, i0:i1], lse[b0:b1, :, i0:i1] = result[:2]
            scores.extend(result[2:])
        ctx.save_for_backward(q, k_num, k_norm, v, keep, out, lse, *scores)
        ctx.groups, ctx.eps, ctx.compiled = groups, eps, compiled
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k_num, k_norm, v, keep, out, lse, *scores = ctx.saved_tensors
        heads, t1 = q.size(1), q.size(2)
        d_out = grad_out.to(out.dtype)
        dq, dk, dn, dv = (torch.zeros_like(x) for x in (q, k_num, k_norm, v))
        run = functools.partial(kernels().run, compiled=ctx.compiled)
        tiles = _tiles(ctx.groups, t1, (k_num, k_norm, v))
        for n, (b0, b1, keys, masked, i0, i1, (k_g, n_g, v_g)) in enumerate(tiles):
            saved = (scores[n],) if scores else ()
            dq_t, dk_t, dn_t, dv_t = run(
                "backward_saved" if scores else "backward", _fresh(q[b0:b1, :, i0:i1]), k_g, n_g, v_g,
                _keep_tile(keep, b0, b1, i0, i1, keys, heads) if masked else None, *saved,
                _fresh(out[b0:b1, :, i0:i1]), _fresh(lse[b0:b1, :, i0:i1]), _fresh(d_out[b0:b1, :, i0:i1]), ctx.eps)
            dq[b0:b1, :, i0:i1] = dq_t
            dk[b0:b1, :, :keys] += dk_t
            dn[b0:b1, :, :keys] += dn_t
            dv[b0:b1, :, :keys] += dv_t
        return dq, dk, dn, dv, None, None, None, None, None


def _tiles(groups, t1: int, key_side: Tuple[torch.Tensor, ...]):
    """(b0, b1, keys, masked, i0, i1, key-side tensors of the group) for every query block i0:i1 of every group."""
    for b0, b1, keys, rows, masked in groups:
        group = tuple(_fresh(x[b0:b1, :, :keys]) for x in key_side)
        for i0 in range(0, t1, rows):
            yield b0, b1, keys, masked, i0, min(t1, i0 + rows), group


def _fresh(x: torch.Tensor) -> torch.Tensor:
    """x as a contiguous tensor of its own (offset 0).

    Compiled functions guard on their inputs' storage offsets and strides: fed slices, they would recompile for every
    new offset until dynamo's limit and then silently run eagerly.
    """
    if x.storage_offset() != 0 or not x.is_contiguous():
        return x.clone(memory_format=torch.contiguous_format)
    return x


def _keep_tile(keep: torch.Tensor, b0: int, b1: int, i0: int, i1: int, keys: int, heads: int) -> torch.Tensor:
    """The mask of a tile, (n, H, r|1, K), written out per head.

    Broadcasting over heads would stop the compiled kernels from merging (item, head, row) into one loop, and they
    parallelise the outermost loop only: a single-item tile would run on one thread.
    """
    rows = slice(i0, i1) if keep.size(2) > 1 else slice(None)
    return keep[b0:b1, :, rows, :keys].expand(-1, heads, -1, -1).contiguous()


def udps_attention_tiled(q: torch.Tensor, k_num: torch.Tensor, k_norm: torch.Tensor, v: torch.Tensor,
                         mask: Optional[torch.Tensor] = None, eps: float = 1e-6,
                         tile_elems: int = DEFAULT_TILE_ELEMS, save_elems: int = DEFAULT_SAVE_ELEMS,
                         compiled: bool = True) -> torch.Tensor:
    """UDPS attention through :class:`UDPSTiledFunction` (no bias, no dropout); any float dtype.

    q (B, H, T1, d), k_num (B|1, H, T2, d), k_norm (B|1, H, T2), v (B, H, T2, dv), mask (B|1, 1|T1, T2) bool
    (True = attend) or None -> (B, H, T1, dv) in v's dtype. Scores are computed in float32 (float64 for float64
    inputs), with autocast off. ``compiled=False`` runs the tile functions eagerly (what happens anyway where
    torch.compile is unavailable).
    """
    batch, _, t1, _ = q.shape
    t2 = k_num.size(2)
    dtype = torch.promote_types(q.dtype, torch.float32)  # float32, or float64 for float64 inputs
    if mask is None:
        keep = torch.ones(batch, 1, 1, t2, dtype=torch.bool, device=q.device)
    else:
        keep = mask.unsqueeze(1).expand(batch, 1, mask.size(1), t2).contiguous()
    with torch.autocast(device_type=q.device.type, enabled=False):
        out = UDPSTiledFunction.apply(q.to(dtype), k_num.to(dtype).expand(batch, -1, -1, -1),
                                      k_norm.to(dtype).expand(batch, -1, -1), v.to(dtype), keep, eps, tile_elems,
                                      save_elems, compiled)
    return out.to(v.dtype)
