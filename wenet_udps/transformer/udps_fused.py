"""Memory-lean UDPS attention: query-blocked forward and a hand-derived backward (pure PyTorch, any device).

The straightforward formula makes a separate pass over a full (B, H, T1, T2) tensor for every step and autograd keeps
several of them alive for the backward. Here the score matrix only ever exists one tile at a time (one batch item,
all heads, a block of query rows), small enough to stay in the CPU cache while the elementwise steps run over it, and
the backward recomputes each tile instead of saving it (flash-attention style). Nothing of size T1 x T2 is saved.
Batch items are spread over torch's CPU threads, each running single-threaded ops (see ``_for_each_item``).

Math (per head; a_i = |q_i|, n_j = key norm, N = q k~^T, den = a_i + n_j, D = max(den^2, eps), S = N / D,
P = softmax(S), O = P v), with dO the output gradient and delta_i = sum_c dO_ic O_ic:

    dv = P^T dO          dS = P * (dO v^T - delta)          dN = dS / D
    dq = dN k~ + (da_i) q_i / a_i                            dk~ = dN^T q
    G = dD * 2 den = -2 dN * S * den  (0 where den^2 < eps)   da_i = sum_j G_ij     dn_j = sum_i G_ij

Padding: with a key-only mask (B, 1, T2) whose kept keys of a batch item are a prefix (the usual padding mask),
the padded key columns are skipped altogether, which gives exactly the reference's numbers (their probabilities are
exactly 0 there). Other masks are applied to each tile. Query rows with no kept key give zeros, as the reference.
"""
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Tuple

import torch

# Elements of one score tile: 4 MiB in float32, held in the L2/L3 cache while the elementwise steps run. Larger
# tiles mean fewer parallel regions, which keeps the kernel fast when other processes compete for the cores.
DEFAULT_TILE_ELEMS = 1 << 20


def _key_lengths(mask: Optional[torch.Tensor], batch: int, t2: int) -> Tuple[Optional[List[int]], bool]:
    """For a (B|1, 1, T2) mask whose kept keys form a prefix per batch item: ([L_b] * B, True); else (None, False).

    ``None`` mask: every key kept ([T2] * B, True).
    """
    if mask is None:
        return [t2] * batch, True
    if mask.size(1) != 1:
        return None, False
    keep = mask[:, 0, :]
    lengths = keep.sum(-1)
    prefix = torch.arange(t2, device=mask.device).unsqueeze(0) < lengths.unsqueeze(1)
    if not torch.equal(prefix, keep):
        return None, False
    lengths = lengths.expand(batch) if lengths.size(0) == 1 else lengths
    return [int(x) for x in lengths.tolist()], True


def _row_blocks(t1: int, heads: int, keys: int, tile_elems: int) -> int:
    """Query rows per tile so a (heads, rows, keys) tile holds about ``tile_elems`` elements (a multiple of 8)."""
    rows = tile_elems // max(1, heads * keys)
    return max(8, min(t1, (rows // 8) * 8 or 8))


class UDPSBlockedFunction(torch.autograd.Function):
    """autograd Function computing UDPS attention tile by tile; see the module docstring for the math.

    forward(q (B, H, T1, d), k_num (B, H, T2, d), k_norm (B, H, T2), v (B, H, T2, dv), mask (B|1, 1|T1, T2) bool
    or None, eps, tile_elems) -> (B, H, T1, dv). Inputs share one float dtype and are batch-expanded by the caller.
    """

    @staticmethod
    def forward(ctx, q, k_num, k_norm, v, mask, eps, tile_elems):
        batch, heads, t1, _ = q.shape
        t2 = k_num.size(2)
        lengths, prefix = _key_lengths(mask, batch, t2)
        a = torch.linalg.vector_norm(q, dim=-1)
        out = q.new_zeros(batch, heads, t1, v.size(-1))
        row_valid = None if prefix else mask.any(-1)  # (B|1, 1|T1): rows that keep at least one key
        def item(b: int) -> None:
            keys = lengths[b] if prefix else t2
            if keys == 0:
                return  # every row fully masked: zeros, as the reference
            k_t = k_num[b, :, :keys].transpose(-2, -1)
            n = k_norm[b, :, None, :keys]
            v_b = v[b, :, :keys]
            rows = _row_blocks(t1, heads, keys, tile_elems)
            for i0 in range(0, t1, rows):
                i1 = min(t1, i0 + rows)
                s, _, _ = _scores_tile(q[b, :, i0:i1], a[b, :, i0:i1], k_t, n, eps, need_den=False)
                if not prefix:
                    s.masked_fill_(~_tile_keep(mask, b, i0, i1), torch.finfo(s.dtype).min)
                torch.softmax(s, dim=-1, out=s)
                out[b, :, i0:i1] = torch.matmul(s, v_b)

        _for_each_item(item, lengths if prefix else [t2] * batch)
        if row_valid is not None:
            out.mul_(row_valid.unsqueeze(1).expand(batch, 1, -1).unsqueeze(-1).to(out.dtype))
        ctx.save_for_backward(q, k_num, k_norm, v, a, out, mask if mask is not None else torch.empty(0))
        ctx.has_mask = mask is not None
        ctx.lengths, ctx.prefix, ctx.eps, ctx.tile_elems = lengths, prefix, eps, tile_elems
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k_num, k_norm, v, a, out, mask = ctx.saved_tensors
        mask = mask if ctx.has_mask else None
        lengths, prefix, eps = ctx.lengths, ctx.prefix, ctx.eps
        batch, heads, t1, _ = q.shape
        t2 = k_num.size(2)
        d_out = grad_out.to(out.dtype)
        if not prefix:
            # Fully masked rows have a constant zero output: no gradient flows through them.
            d_out = d_out * mask.any(-1).unsqueeze(1).expand(batch, 1, -1).unsqueeze(-1).to(d_out.dtype)
        delta = (d_out * out).sum(-1)  # (B, H, T1)
        dq = torch.zeros_like(q)
        da = torch.zeros_like(a)
        dk = torch.zeros_like(k_num)
        dn = torch.zeros_like(k_norm)
        dv = torch.zeros_like(v)
        def item(b: int) -> None:
            keys = lengths[b] if prefix else t2
            if keys == 0:
                return
            k_b = k_num[b, :, :keys]
            k_t = k_b.transpose(-2, -1)
            n = k_norm[b, :, None, :keys]
            v_b = v[b, :, :keys]
            rows = _row_blocks(t1, heads, keys, ctx.tile_elems)
            for i0 in range(0, t1, rows):
                i1 = min(t1, i0 + rows)
                q_blk = q[b, :, i0:i1]
                s, d, den = _scores_tile(q_blk, a[b, :, i0:i1], k_t, n, eps, need_den=True)
                if not prefix:
                    s.masked_fill_(~_tile_keep(mask, b, i0, i1), torch.finfo(s.dtype).min)
                p = torch.softmax(s, dim=-1)
                do_blk = d_out[b, :, i0:i1]
                dv[b, :, :keys].baddbmm_(p.transpose(-2, -1), do_blk)
                ds = torch.matmul(do_blk, v_b.transpose(-2, -1))
                ds.sub_(delta[b, :, i0:i1, None]).mul_(p)
                dnum = ds.div_(d)
                dq[b, :, i0:i1] = torch.matmul(dnum, k_b)
                dk[b, :, :keys].baddbmm_(dnum.transpose(-2, -1), q_blk)
                # G / -2 = dN * S * den; dN is 0 on masked entries, so S's fill value there does not matter.
                g = dnum.mul_(s).mul_(den)
                da[b, :, i0:i1] = g.sum(-1)
                dn[b, :, :keys] += g.sum(-2)

        _for_each_item(item, lengths if prefix else [t2] * batch)
        da.mul_(-2.0)
        dn.mul_(-2.0)
        # d|q|/dq = q / |q| (0 at q = 0, as torch's norm backward).
        dq.add_(torch.where(a > 0, da / a.clamp_min(torch.finfo(a.dtype).tiny), torch.zeros_like(a)).unsqueeze(-1)
                * q)
        return dq, dk, dn, dv, None, None, None


def _for_each_item(item: Callable[[int], None], work: List[int]) -> None:
    """Run ``item(b)`` for every batch item, spread over torch's CPU threads.

    Each worker runs its items with single-threaded torch ops, so the many small tile ops need no thread barrier:
    with torch's own intra-op threads every op is a parallel region, and on a machine where other processes compete
    for the cores each such region waits for a descheduled thread (the kernel became 10-20x slower that way). Items
    write disjoint slices of the outputs, so no locking is needed. ``work`` (keys per item) orders the items, longest
    first, for balance.
    """
    threads = torch.get_num_threads()
    order = sorted(range(len(work)), key=lambda b: -work[b])
    if threads < 2 or len(order) < 2:
        for b in order:
            item(b)
        return
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(max_workers=min(threads, len(order))) as pool:
            # Grad mode is thread-local: the workers must not record autograd history either.
            for future in [pool.submit(_no_grad_call, item, b) for b in order]:
                future.result()
    finally:
        torch.set_num_threads(threads)


def _no_grad_call(item: Callable[[int], None], b: int) -> None:
    with torch.no_grad():
        item(b)


def _scores_tile(q_blk: torch.Tensor, a_blk: torch.Tensor, k_t: torch.Tensor, n: torch.Tensor, eps: float,
                 need_den: bool) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
    """S = (q k~^T) / max((a + n)^2, eps) for one tile (H, rows, keys), in place in the matmul's buffer.

    Returns S and, when ``need_den``, D = max(den^2, eps) and den masked to 0 where the eps floor is active (the
    factor that carries the denominator's gradient).
    """
    s = torch.matmul(q_blk, k_t)
    den = a_blk.unsqueeze(-1) + n
    floored = float(a_blk.min()) + float(n.min()) < eps ** 0.5 if a_blk.numel() and n.numel() else False
    d = den * den  # not den.square(): torch's pow kernel is several times slower on CPU
    if floored:
        d.clamp_min_(eps)
    s.div_(d)
    if not need_den:
        return s, None, None
    if floored:
        den = den.masked_fill(den.square() < eps, 0.0)
    return s, d, den


def _tile_keep(mask: torch.Tensor, b: int, i0: int, i1: int) -> torch.Tensor:
    """The keep-mask of batch item ``b`` for query rows i0:i1, shaped (1, rows|1, T2) to broadcast over heads."""
    m = mask[b if mask.size(0) > 1 else 0]
    return (m if m.size(0) == 1 else m[i0:i1]).unsqueeze(0)


def udps_attention_blocked(q: torch.Tensor, k_num: torch.Tensor, k_norm: torch.Tensor, v: torch.Tensor,
                           mask: Optional[torch.Tensor] = None, eps: float = 1e-6,
                           tile_elems: int = DEFAULT_TILE_ELEMS) -> torch.Tensor:
    """UDPS attention through :class:`UDPSBlockedFunction` (no bias, no dropout); any float dtype.

    q (B, H, T1, d), k_num (B|1, H, T2, d), k_norm (B|1, H, T2), v (B, H, T2, dv), mask (B|1, 1|T1, T2) bool or
    None -> (B, H, T1, dv) in v's dtype. Scores are computed in float32 (float64 for float64 inputs).
    """
    batch = q.size(0)
    dtype = torch.promote_types(q.dtype, torch.float32)  # float32, or float64 for float64 inputs
    k_num = k_num.to(dtype).expand(batch, -1, -1, -1)
    k_norm = k_norm.to(dtype).expand(batch, -1, -1)
    out = UDPSBlockedFunction.apply(q.to(dtype), k_num, k_norm, v.to(dtype), mask, eps, tile_elems)
    return out.to(v.dtype)
