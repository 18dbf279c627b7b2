"""The Triton programs of the CUDA UDPS kernel: udps_fwd, udps_bwd_dq, udps_bwd_dkv (math and launch plan: the
package docstring)."""
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
KEY_SCAN = tl.constexpr(1024)  # keys per load when a program scans a padding mask for its range


@triton.jit
def _kept_range(m_ptr, smi, smj, i0, T1, T2, MASK_ROWS: tl.constexpr, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr):
    """(lo, hi): the keys kept by any of the rows i0:i0+BLOCK_M (lo = T2, hi = 0 when none)."""
    lo = tl.full([], 0, tl.int32) + T2
    hi = tl.full([], 0, tl.int32)
    if MASK_ROWS:
        offs_m = i0 + tl.arange(0, BLOCK_M)
        for j0 in range(0, T2, BLOCK_N):
            offs_n = j0 + tl.arange(0, BLOCK_N)
            tile = tl.load(m_ptr + offs_m[:, None] * smi + offs_n[None, :] * smj,
                           mask=(offs_m[:, None] < T1) & (offs_n[None, :] < T2), other=0)
            col = tl.max(tile.to(tl.int32), axis=0)
            lo = tl.minimum(lo, tl.min(tl.where(col > 0, offs_n, T2), axis=0))
            hi = tl.maximum(hi, tl.max(tl.where(col > 0, offs_n + 1, 0), axis=0))
    else:
        # One mask row for every query (padding): read in chunks of KEY_SCAN keys, not of BLOCK_N, since each
        # chunk is a round trip to memory before the loop over scores can start (4096 keys: 4 chunks, not 64-128).
        for j0 in range(0, T2, KEY_SCAN):
            offs_n = j0 + tl.arange(0, KEY_SCAN)
            col = tl.load(m_ptr + offs_n * smj, mask=offs_n < T2, other=0).to(tl.int32)
            lo = tl.minimum(lo, tl.min(tl.where(col > 0, offs_n, T2), axis=0))
            hi = tl.maximum(hi, tl.max(tl.where(col > 0, offs_n + 1, 0), axis=0))
    return lo, hi


@triton.jit
def _kept_rows(m_ptr, smi, smj, j0, T1, T2, MASK_ROWS: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr):
    """(lo, hi): the query rows that keep any of the keys j0:j0+BLOCK_N (lo = T1, hi = 0 when none)."""
    offs_n = j0 + tl.arange(0, BLOCK_N)
    lo = tl.full([], 0, tl.int32) + T1
    hi = tl.full([], 0, tl.int32)
    if MASK_ROWS:
        for i0 in range(0, T1, BLOCK_M):
            offs_m = i0 + tl.arange(0, BLOCK_M)
            tile = tl.load(m_ptr + offs_m[:, None] * smi + offs_n[None, :] * smj,
                           mask=(offs_m[:, None] < T1) & (offs_n[None, :] < T2), other=0)
            row = tl.max(tile.to(tl.int32), axis=1)
            lo = tl.minimum(lo, tl.min(tl.where(row > 0, offs_m, T1), axis=0))
            hi = tl.maximum(hi, tl.max(tl.where(row > 0, offs_m + 1, 0), axis=0))
    else:
        col = tl.load(m_ptr + offs_n * smj, mask=offs_n < T2, other=0).to(tl.int32)
        if tl.max(col, axis=0) > 0:
            lo = lo * 0
            hi = hi + T1
    return lo, hi


@triton.jit
def _keep(m_ptr, smi, smj, rows, keys, T1, T2, HAS_MASK: tl.constexpr, MASK_ROWS: tl.constexpr):
    """The keep tile of query positions ``rows`` and key positions ``keys``, one of them a column and the other a row
    ((M, 1) and (1, N) for a (rows, keys) tile, (1, M) and (N, 1) for the key pass's (keys, rows) tile), so that
    the tile comes out in the orientation its program computes in, never transposed: the mask's entries, or just the
    bounds without a mask. A key-only mask is read once per key and broadcast over the rows."""
    inside = (rows < T1) & (keys < T2)
    if HAS_MASK:
        if MASK_ROWS:
            tile = tl.load(m_ptr + rows * smi + keys * smj, mask=inside, other=0)
            return tile != 0
        col = tl.load(m_ptr + keys * smj, mask=keys < T2, other=0)
        return (col != 0) & inside
    return inside


@triton.jit
def _reciprocal(x, FAST_RCP: tl.constexpr):
    """1 / x. FAST_RCP: PTX's ``rcp.approx.ftz.f32``, one MUFU instruction (at most 1 ulp off; x >= eps here, so
    never subnormal), where ``1.0 / x`` compiles to ``div.full.f32``'s eight; the interpreter runs no PTX."""
    if FAST_RCP:
        return tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                         is_pure=True, pack=1)
    return 1.0 / x


@triton.jit
def _scores(q, kt, a, nrm, eps, PRECISION: tl.constexpr, FAST_RCP: tl.constexpr):
    """S (rows, keys) from q (rows, d) and k~^T (d, keys); also den and 1 / D."""
    num = tl.dot(q, kt, input_precision=PRECISION)
    den = a[:, None] + nrm[None, :]
    inv = _reciprocal(tl.maximum(den * den, eps), FAST_RCP)
    return num * inv, den, inv


@triton.jit
def udps_fwd(Q, K, N, V, M, O, LSE, sqb, sqh, sqm, sqd, skb, skh, skn, skd, snb, snh, snn,
                svb, svh, svn, svd, smb, smi, smj, sob, soh, som, sod, H, T1, T2, D, DV, eps,
                HAS_MASK: tl.constexpr, MASK_ROWS: tl.constexpr, PRECISION: tl.constexpr, FAST_RCP: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
    i0 = tl.program_id(0) * BLOCK_M
    b = tl.program_id(1) // H
    h = tl.program_id(1) % H
    offs_m = i0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd,
                mask=(offs_m[:, None] < T1) & (offs_d[None, :] < D), other=0.0)
    qf = q.to(tl.float32)
    a = tl.sqrt(tl.sum(qf * qf, axis=1))
    m_ptr = M + b * smb
    lo, hi = 0, T2
    if HAS_MASK:
        lo, hi = _kept_range(m_ptr, smi, smj, i0, T1, T2, MASK_ROWS, BLOCK_M, BLOCK_N)
    k_ptr = K + b * skb + h * skh
    n_ptr = N + b * snb + h * snh
    v_ptr = V + b * svb + h * svh
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    for j0 in range(lo // BLOCK_N * BLOCK_N, hi, BLOCK_N):
        offs_n = j0 + tl.arange(0, BLOCK_N)
        kt = tl.load(k_ptr + offs_n[None, :] * skn + offs_d[:, None] * skd,
                     mask=(offs_n[None, :] < T2) & (offs_d[:, None] < D), other=0.0)
        nrm = tl.load(n_ptr + offs_n * snn, mask=offs_n < T2, other=0.0)
        s, den, inv = _scores(q, kt, a, nrm, eps, PRECISION, FAST_RCP)
        keep = _keep(m_ptr, smi, smj, offs_m[:, None], offs_n[None, :], T1, T2, HAS_MASK, MASK_ROWS)
        s = tl.where(keep, s * LOG2E, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        # A row with nothing kept so far keeps m = -inf; subtract 0 there so exp2 gives 0, not NaN.
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(s - m_safe[:, None])
        corr = tl.math.exp2(m_i - m_safe)
        l_i = l_i * corr + tl.sum(p, axis=1)
        v = tl.load(v_ptr + offs_n[:, None] * svn + offs_dv[None, :] * svd,
                    mask=(offs_n[:, None] < T2) & (offs_dv[None, :] < DV), other=0.0)
        acc = acc * corr[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    live = l_i > 0
    out = acc / tl.where(live, l_i, 1.0)[:, None]
    tl.store(O + b * sob + h * soh + offs_m[:, None] * som + offs_dv[None, :] * sod, out.to(O.dtype.element_ty),
             mask=(offs_m[:, None] < T1) & (offs_dv[None, :] < DV))
    lse = tl.where(live, m_i + tl.math.log2(tl.where(live, l_i, 1.0)), float("inf"))
    tl.store(LSE + (b * H + h) * T1 + offs_m, lse, mask=offs_m < T1)


@triton.jit
def udps_bwd_dq(Q, K, N, V, M, O, DO, LSE, DELTA, DQ, sqb, sqh, sqm, sqd, skb, skh, skn, skd, snb, snh, snn,
                   svb, svh, svn, svd, smb, smi, smj, sob, soh, som, sod, sdb, sdh, sdm, sdd, H, T1, T2, D, DV, eps,
                   HAS_MASK: tl.constexpr, MASK_ROWS: tl.constexpr, PRECISION: tl.constexpr, FAST_RCP: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
    i0 = tl.program_id(0) * BLOCK_M
    b = tl.program_id(1) // H
    h = tl.program_id(1) % H
    offs_m = i0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    rows_d = (offs_m[:, None] < T1) & (offs_d[None, :] < D)
    rows_dv = (offs_m[:, None] < T1) & (offs_dv[None, :] < DV)
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd, mask=rows_d, other=0.0)
    do = tl.load(DO + b * sob + h * soh + offs_m[:, None] * som + offs_dv[None, :] * sod, mask=rows_dv, other=0.0)
    o = tl.load(O + b * sdb + h * sdh + offs_m[:, None] * sdm + offs_dv[None, :] * sdd, mask=rows_dv, other=0.0)
    delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), axis=1)
    tl.store(DELTA + (b * H + h) * T1 + offs_m, delta, mask=offs_m < T1)
    lse = tl.load(LSE + (b * H + h) * T1 + offs_m, mask=offs_m < T1, other=float("inf"))
    qf = q.to(tl.float32)
    a = tl.sqrt(tl.sum(qf * qf, axis=1))
    scale = tl.maximum(a * a, eps)
    m_ptr = M + b * smb
    lo, hi = 0, T2
    if HAS_MASK:
        lo, hi = _kept_range(m_ptr, smi, smj, i0, T1, T2, MASK_ROWS, BLOCK_M, BLOCK_N)
    k_ptr = K + b * skb + h * skh
    n_ptr = N + b * snb + h * snh
    v_ptr = V + b * svb + h * svh
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    da = tl.zeros([BLOCK_M], tl.float32)
    for j0 in range(lo // BLOCK_N * BLOCK_N, hi, BLOCK_N):
        offs_n = j0 + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + offs_n[:, None] * skn + offs_d[None, :] * skd,
                    mask=(offs_n[:, None] < T2) & (offs_d[None, :] < D), other=0.0)
        vt = tl.load(v_ptr + offs_n[None, :] * svn + offs_dv[:, None] * svd,
                     mask=(offs_n[None, :] < T2) & (offs_dv[:, None] < DV), other=0.0)
        nrm = tl.load(n_ptr + offs_n * snn, mask=offs_n < T2, other=0.0)
        s, den, inv = _scores(q, tl.trans(k), a, nrm, eps, PRECISION, FAST_RCP)
        keep = _keep(m_ptr, smi, smj, offs_m[:, None], offs_n[None, :], T1, T2, HAS_MASK, MASK_ROWS)
        p = tl.where(keep, tl.math.exp2(s * LOG2E - lse[:, None]), 0.0)
        dp = tl.dot(do, vt, input_precision=PRECISION)
        dn = p * (dp - delta[:, None]) * inv
        da += tl.sum(tl.where(den * den >= eps, dn * s * den, 0.0), axis=1)
        dq += tl.dot((dn * scale[:, None]).to(k.dtype), k, input_precision=PRECISION)
    da = -2.0 * da
    dq = dq / scale[:, None] + tl.where(a > 0, da / tl.where(a > 0, a, 1.0), 0.0)[:, None] * qf
    tl.store(DQ + ((b * H + h) * T1 + offs_m[:, None]) * D + offs_d[None, :], dq.to(DQ.dtype.element_ty), mask=rows_d)


@triton.jit
def udps_bwd_dkv(Q, K, N, V, M, DO, LSE, DELTA, DK, DN, DV_, sqb, sqh, sqm, sqd, skb, skh, skn, skd, snb, snh,
                    snn, svb, svh, svn, svd, smb, smi, smj, sob, soh, som, sod, H, T1, T2, D, DV, eps,
                    HAS_MASK: tl.constexpr, MASK_ROWS: tl.constexpr, PRECISION: tl.constexpr, FAST_RCP: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
    """dk~, dv and dn of one key block; DK, DV_ and DN are contiguous (B, H, T2[, .]) outputs."""
    j0 = tl.program_id(0) * BLOCK_N
    b = tl.program_id(1) // H
    h = tl.program_id(1) % H
    offs_n = j0 + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    keys_d = (offs_n[:, None] < T2) & (offs_d[None, :] < D)
    keys_dv = (offs_n[:, None] < T2) & (offs_dv[None, :] < DV)
    k = tl.load(K + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :] * skd, mask=keys_d, other=0.0)
    v = tl.load(V + b * svb + h * svh + offs_n[:, None] * svn + offs_dv[None, :] * svd, mask=keys_dv, other=0.0)
    nrm = tl.load(N + b * snb + h * snh + offs_n * snn, mask=offs_n < T2, other=0.0)
    scale = tl.maximum(nrm * nrm, eps)
    m_ptr = M + b * smb
    lo, hi = 0, T1
    if HAS_MASK:
        lo, hi = _kept_rows(m_ptr, smi, smj, j0, T1, T2, MASK_ROWS, BLOCK_M, BLOCK_N)
    q_ptr = Q + b * sqb + h * sqh
    do_ptr = DO + b * sob + h * soh
    row_ptr = (b * H + h) * T1
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_DV], tl.float32)
    dn_sum = tl.zeros([BLOCK_N], tl.float32)
    for i0 in range(lo // BLOCK_M * BLOCK_M, hi, BLOCK_M):
        offs_m = i0 + tl.arange(0, BLOCK_M)
        q = tl.load(q_ptr + offs_m[:, None] * sqm + offs_d[None, :] * sqd,
                    mask=(offs_m[:, None] < T1) & (offs_d[None, :] < D), other=0.0)
        do = tl.load(do_ptr + offs_m[:, None] * som + offs_dv[None, :] * sod,
                     mask=(offs_m[:, None] < T1) & (offs_dv[None, :] < DV), other=0.0)
        lse = tl.load(LSE + row_ptr + offs_m, mask=offs_m < T1, other=float("inf"))
        delta = tl.load(DELTA + row_ptr + offs_m, mask=offs_m < T1, other=0.0)
        qf = q.to(tl.float32)
        a = tl.sqrt(tl.sum(qf * qf, axis=1))
        # Transposed tiles (keys, rows): the sums over rows then run along axis 1.
        st, den, inv = _scores(k, tl.trans(q), nrm, a, eps, PRECISION, FAST_RCP)
        keep = _keep(m_ptr, smi, smj, offs_m[None, :], offs_n[:, None], T1, T2, HAS_MASK, MASK_ROWS)
        pt = tl.where(keep, tl.math.exp2(st * LOG2E - lse[None, :]), 0.0)
        dv += tl.dot(pt.to(do.dtype), do, input_precision=PRECISION)
        dpt = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        dnt = pt * (dpt - delta[None, :]) * inv
        dn_sum += tl.sum(tl.where(den * den >= eps, dnt * st * den, 0.0), axis=1)
        dk += tl.dot((dnt * scale[:, None]).to(q.dtype), q, input_precision=PRECISION)
    key = (b * H + h) * T2 + offs_n
    tl.store(DK + key[:, None] * D + offs_d[None, :], (dk / scale[:, None]).to(DK.dtype.element_ty), mask=keys_d)
    tl.store(DV_ + key[:, None] * DV + offs_dv[None, :], dv.to(DV_.dtype.element_ty), mask=keys_dv)
    tl.store(DN + key, -2.0 * dn_sum, mask=offs_n < T2)
