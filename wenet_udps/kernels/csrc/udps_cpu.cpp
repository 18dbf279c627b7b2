// UDPS attention on CPU, blockwise in cache (float32): the math of wenet_udps/kernels/cpu_fused.py without any
// (B, H, T1, T2) tensor.
//
//   forward   N = q k~^T;  r = 1 / max(|q_i| + n_j, sqrt(eps));  S = N r r (masked keys: -inf);  P = softmax(S);
//             O = P v;  lse_i = log sum_j exp(S_ij) is kept for the backward (+inf for a row with no kept key)
//   backward  P = exp(S - lse);  dv = P^T dO;  dS = P (dO v^T - dO_i . O_i);  Y = dS r;  G = Y S (0 where the floor
//             is active);  da_i = -2 sum_j G_ij;  dn_j = -2 sum_i G_ij;  dN = Y r;  dq = dN k~ + da_i q_i / |q_i|;
//             dk~ = dN^T q
//
// Each (b, h) is owned by one thread and walks its query rows in blocks: the block's scores come from one GEMM, one
// loop per row applies the denominator, the mask and the exponential while the row is in L1, and the products with
// v (forward) or dO, k~, q (backward) are GEMMs again. The forward also splits the keys into blocks, with the online
// softmax (a row's running max and sum, its row of P v rescaled when the max grows), as SDPA's CPU flash kernel does.
// Keys outside the block's first..last kept key are skipped (padding, causal masks). Gradients of the keys are summed
// over query blocks in order, so results are bitwise reproducible; a batch-1 k~ / v gets one gradient per batch
// entry, summed by the caller.
//
// Threads: the build passes -fopenmp (cpu_ext.py), so at::parallel_for is torch's OpenMP loop (without it the header
// compiles to a serial loop) and a call makes one parallel region. Inside it every GEMM runs on one MKL thread
// (GemmThreads, udps_gemm.h): an MKL sgemm_ with more threads opens a parallel region of its own, and with thousands
// of small GEMMs per training step each region's barrier waits for every thread to be scheduled, which on
// oversubscribed cores made the extension 2-3x slower than SDPA (docs/benchmarks.md, "Why is UDPS slower beside
// another job?").
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "udps_gemm.h"
#include "udps_rows.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace udps_cpu {

// Shapes and pointers of one (b, h) slice; batch-1 keys, values and masks are shared by every b.
struct Slice {
  const float *q, *k, *norms, *v;
  const uint8_t* keep;  // (T1 | 1, T2) rows of the mask, or nullptr
  int64_t keep_row_stride;
  int64_t t1, t2, d, dv;
};

struct Problem {
  at::Tensor q, k, norms, v, keep;  // keep undefined when there is no mask
  int64_t batch, heads, t1, t2, d, dv;

  Problem(const at::Tensor& q_, const at::Tensor& k_, const at::Tensor& n_, const at::Tensor& v_,
          const c10::optional<at::Tensor>& keep_)
      : q(q_), k(k_), norms(n_), v(v_) {
    for (const auto& x : {q, k, norms, v}) {
      TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous() && x.device().is_cpu(),
                  "udps_cpu: inputs must be contiguous float32 CPU tensors");
    }
    TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && norms.dim() == 3 && v.dim() == 4, "udps_cpu: tensor ranks");
    batch = q.size(0), heads = q.size(1), t1 = q.size(2), d = q.size(3), t2 = k.size(2), dv = v.size(3);
    auto batch_ok = [&](int64_t b) { return b == batch || b == 1; };
    TORCH_CHECK(batch_ok(k.size(0)) && k.size(1) == heads && k.size(3) == d && batch_ok(v.size(0)) &&
                    v.size(1) == heads && v.size(2) == t2 && norms.size(0) == k.size(0) && norms.size(1) == heads &&
                    norms.size(2) == t2,
                "udps_cpu: shapes q (B, H, T1, d), k (B|1, H, T2, d), n (B|1, H, T2), v (B|1, H, T2, dv)");
    if (keep_.has_value() && keep_->defined()) {
      keep = *keep_;
      TORCH_CHECK(keep.scalar_type() == at::kBool && keep.is_contiguous() && keep.dim() == 3 &&
                      batch_ok(keep.size(0)) && (keep.size(1) == t1 || keep.size(1) == 1) && keep.size(2) == t2,
                  "udps_cpu: the mask must be a contiguous bool (B|1, T1|1, T2) tensor");
    }
  }

  Slice slice(int64_t bh) const {
    const int64_t b = bh / heads, h = bh % heads;
    const int64_t kb = k.size(0) == 1 ? 0 : b, vb = v.size(0) == 1 ? 0 : b;
    Slice s{q.data_ptr<float>() + bh * t1 * d,
            k.data_ptr<float>() + (kb * heads + h) * t2 * d,
            norms.data_ptr<float>() + (kb * heads + h) * t2,
            v.data_ptr<float>() + (vb * heads + h) * t2 * dv,
            nullptr, 0, t1, t2, d, dv};
    if (keep.defined()) {
      const int64_t rows = keep.size(1);
      s.keep = reinterpret_cast<const uint8_t*>(keep.data_ptr<bool>()) + (keep.size(0) == 1 ? 0 : b) * rows * t2;
      s.keep_row_stride = rows == 1 ? 0 : t2;
    }
    return s;
  }
};

int64_t round_up(int64_t n) {
  constexpr int64_t kAlign = 16;  // floats: a multiple of every vector width, and 64-byte rows
  return (n + kAlign - 1) / kAlign * kAlign;
}

// The forward's blocks, query rows x keys: SDPA's (torch's CPU flash kernel, float32, T >= 768). The GEMMs pack a
// block of k~ and of v once per 256 query rows, and the 256 x 512 scores (512 KiB) stay in L2; 64 rows by the whole
// key range timed 2-6 % slower at T = 1024-2048 with no padding (issue 49).
constexpr int64_t kForwardRows = 256, kForwardKeys = 512;

// Query rows per block of the backward, and of the forward under a mask with a row per query: with T2 = 2048 the
// backward's three blocks of scores (1.5 MiB) still fit a 2 MiB L2, and each GEMM packs k~ and v for 64 rows at once
// (32 or 128 rows timed no better from T = 256 to 2048).
constexpr int64_t kBlockRows = 64;

// [first, last] kept key over rows i0..i1-1, as a half-open range; empty (0, 0) when no key is kept.
std::pair<int64_t, int64_t> key_range(const Slice& s, int64_t i0, int64_t i1) {
  if (s.keep == nullptr) {
    return {0, s.t2};
  }
  int64_t lo = s.t2, hi = 0;
  const int64_t rows = s.keep_row_stride == 0 ? 1 : i1 - i0;
  for (int64_t i = 0; i < rows; ++i) {
    const uint8_t* row = s.keep + (i0 + i) * s.keep_row_stride;
    int64_t j = 0;
    while (j < lo && !row[j]) ++j;
    lo = std::min(lo, j);
    int64_t e = s.t2;
    while (e > hi && !row[e - 1]) --e;
    hi = std::max(hi, e);
  }
  if (lo >= hi) {
    return {0, 0};
  }
  // Whole 16-key chunks where the keys allow: the extra keys are masked, and the row loops skip their tail step.
  return {lo, std::min(s.t2, lo + round_up(hi - lo))};
}

// |q_i| for the rows of a slice.
void row_norms(const float* x, int64_t rows, int64_t d, float* out) {
  row_dots(x, x, rows, d, out);
  for (int64_t i = 0; i < rows; ++i) out[i] = std::sqrt(out[i]);
}

// Scratch of one thread: ``count`` blocks of scores, each row 64-byte aligned (ld a multiple of 16).
at::Tensor score_blocks(int64_t count, int64_t rows, int64_t t2) {
  return at::empty({count, rows, round_up(t2)}, at::TensorOptions().dtype(at::kFloat));
}

}  // namespace udps_cpu

using namespace udps_cpu;

// q (B, H, T1, d), k~ (B|1, H, T2, d), n (B|1, H, T2), v (B|1, H, T2, dv), keep (B|1, T1|1, T2) bool or None
// -> out (B, H, T1, dv), lse (B, H, T1).
std::vector<at::Tensor> udps_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& norms,
                                     const at::Tensor& v, const c10::optional<at::Tensor>& keep, double eps) {
  const Problem pr(q, k, norms, v, keep);
  auto out = at::empty({pr.batch, pr.heads, pr.t1, pr.dv}, q.options());
  auto lse = at::empty({pr.batch, pr.heads, pr.t1}, q.options());
  const float sqrt_eps = std::sqrt(static_cast<float>(eps));
  // A mask with a row per query (causal, chunks) gives each block the key range of its last row: there, 64-row
  // blocks skip the masked keys 256-row ones would compute.
  const bool rows_differ = pr.keep.defined() && pr.keep.size(1) > 1;
  const int64_t bq = std::min(pr.t1, rows_differ ? kBlockRows : kForwardRows), bk = kForwardKeys;
  at::parallel_for(0, pr.batch * pr.heads, 1, [&](int64_t begin, int64_t end) {
    const GemmThreads one_gemm_thread;
    const int64_t width = std::min(bk, pr.t2);
    const at::Tensor buf = score_blocks(2, bq, width);
    float* scores = buf.data_ptr<float>();
    float* bias = scores + bq * round_up(width);
    std::vector<float> a(pr.t1), mx(bq), sum(bq);
    for (int64_t bh = begin; bh < end; ++bh) {
      const Slice s = pr.slice(bh);
      float* o = out.data_ptr<float>() + bh * pr.t1 * pr.dv;
      float* l = lse.data_ptr<float>() + bh * pr.t1;
      row_norms(s.q, s.t1, s.d, a.data());
      for (int64_t i0 = 0; i0 < s.t1; i0 += bq) {
        const int64_t rows = std::min(bq, s.t1 - i0);
        const auto [j0, j1] = key_range(s, i0, i0 + rows);
        float* ob = o + i0 * s.dv;
        std::fill(mx.begin(), mx.end(), -kInf);
        std::fill(sum.begin(), sum.end(), 0.0f);
        if (j0 == j1) std::fill(ob, ob + rows * s.dv, 0.0f);
        // Key blocks with the online softmax: a row's sum and its row of P v so far are rescaled when a block raises
        // its max (one block, the whole key range, when T2 <= kForwardKeys).
        for (int64_t c0 = j0; c0 < j1; c0 += bk) {
          const int64_t n = std::min(bk, j1 - c0), ld = round_up(n);
          gemm(false, true, rows, n, s.d, s.q + i0 * s.d, s.d, s.k + c0 * s.d, s.d, 0.0f, scores, ld);
          const bool masked = s.keep != nullptr &&
                              mask_bias(s.keep + i0 * s.keep_row_stride + c0, s.keep_row_stride, rows, n, bias, ld);
          for (int64_t r = 0; r < rows; ++r) {
            float* row = scores + r * ld;
            const float* bias_row = bias + (s.keep_row_stride == 0 ? 0 : r * ld);
            const float block_max = masked ? row_scores<true>(row, n, a[i0 + r], s.norms + c0, bias_row, sqrt_eps)
                                           : row_scores<false>(row, n, a[i0 + r], s.norms + c0, nullptr, sqrt_eps);
            const float row_max = std::max(mx[r], block_max);
            if (row_max == -kInf) {
              std::fill(row, row + n, 0.0f);  // no key of the row kept yet
              continue;
            }
            if (row_max > mx[r] && mx[r] > -kInf) {
              const float c = std::exp(mx[r] - row_max);
              sum[r] *= c;
              for (int64_t e = 0; e < s.dv; ++e) ob[r * s.dv + e] *= c;
            }
            mx[r] = row_max;
            sum[r] += row_exp(row, n, row_max);
          }
          gemm(false, false, rows, s.dv, n, scores, ld, s.v + c0 * s.dv, s.dv, c0 == j0 ? 0.0f : 1.0f, ob, s.dv);
        }
        for (int64_t r = 0; r < rows; ++r) {
          const float inv = mx[r] == -kInf ? 0.0f : 1.0f / sum[r];
          for (int64_t e = 0; e < s.dv; ++e) ob[r * s.dv + e] *= inv;
          l[i0 + r] = mx[r] == -kInf ? kInf : mx[r] + std::log(sum[r]);
        }
      }
    }
  });
  return {out, lse};
}

// The forward's inputs, its out and lse, and grad_out (B, H, T1, dv) -> dq (B, H, T1, d), dk~ (B, H, T2, d),
// dn (B, H, T2), dv (B, H, T2, dv): key and value gradients per batch entry even when k~ / v have batch 1.
std::vector<at::Tensor> udps_backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& norms,
                                      const at::Tensor& v, const c10::optional<at::Tensor>& keep, const at::Tensor& out,
                                      const at::Tensor& lse, const at::Tensor& grad_out, double eps) {
  const Problem pr(q, k, norms, v, keep);
  TORCH_CHECK(out.is_contiguous() && lse.is_contiguous() && grad_out.is_contiguous() &&
              grad_out.scalar_type() == at::kFloat && grad_out.sizes() == out.sizes(), "udps_cpu: grad_out");
  auto dq = at::empty_like(q);
  auto dk = at::zeros({pr.batch, pr.heads, pr.t2, pr.d}, q.options());
  auto dn = at::zeros({pr.batch, pr.heads, pr.t2}, q.options());
  auto dv = at::zeros({pr.batch, pr.heads, pr.t2, pr.dv}, q.options());
  const float sqrt_eps = std::sqrt(static_cast<float>(eps)), feps = static_cast<float>(eps);
  at::parallel_for(0, pr.batch * pr.heads, 1, [&](int64_t begin, int64_t end) {
    const GemmThreads one_gemm_thread;
    const int64_t bq = kBlockRows;
    const at::Tensor buf = score_blocks(3, bq, pr.t2);
    float* pbuf = buf.data_ptr<float>();
    float* gbuf = pbuf + bq * round_up(pr.t2);
    float* bias = gbuf + bq * round_up(pr.t2);
    std::vector<float> a(pr.t1), delta(pr.t1), ga(bq);
    for (int64_t bh = begin; bh < end; ++bh) {
      const Slice s = pr.slice(bh);
      const float* o = out.data_ptr<float>() + bh * pr.t1 * pr.dv;
      const float* go = grad_out.data_ptr<float>() + bh * pr.t1 * pr.dv;
      const float* l = lse.data_ptr<float>() + bh * pr.t1;
      float* dqp = dq.data_ptr<float>() + bh * pr.t1 * pr.d;
      float* dkp = dk.data_ptr<float>() + bh * pr.t2 * pr.d;
      float* dnp = dn.data_ptr<float>() + bh * pr.t2;
      float* dvp = dv.data_ptr<float>() + bh * pr.t2 * pr.dv;
      row_norms(s.q, s.t1, s.d, a.data());
      // rowsum(P * dP) = dO_i . O_i (0 for a row with no kept key, whose O is 0).
      row_dots(go, o, s.t1, s.dv, delta.data());
      for (int64_t i0 = 0; i0 < s.t1; i0 += bq) {
        const int64_t rows = std::min(bq, s.t1 - i0);
        const auto [j0, j1] = key_range(s, i0, i0 + rows);
        const int64_t n = j1 - j0;
        if (n == 0) {
          std::fill(dqp + i0 * s.d, dqp + (i0 + rows) * s.d, 0.0f);
          continue;
        }
        const float* qb = s.q + i0 * s.d;
        const float* gob = go + i0 * s.dv;
        const int64_t ld = round_up(n);
        gemm(false, true, rows, n, s.d, qb, s.d, s.k + j0 * s.d, s.d, 0.0f, pbuf, ld);
        gemm(false, true, rows, n, s.dv, gob, s.dv, s.v + j0 * s.dv, s.dv, 0.0f, gbuf, ld);
        const bool masked = s.keep != nullptr &&
                            mask_bias(s.keep + i0 * s.keep_row_stride + j0, s.keep_row_stride, rows, n, bias, ld);
        for (int64_t r = 0; r < rows; ++r) {
          float *prow = pbuf + r * ld, *grow = gbuf + r * ld;
          const float ai = a[i0 + r], li = l[i0 + r], di = delta[i0 + r];
          if (!masked) {
            ga[r] = row_backward<false>(prow, grow, dnp + j0, n, ai, s.norms + j0, nullptr, sqrt_eps, feps, li, di);
          } else {
            const float* bias_row = bias + (s.keep_row_stride == 0 ? 0 : r * ld);
            ga[r] = row_backward<true>(prow, grow, dnp + j0, n, ai, s.norms + j0, bias_row, sqrt_eps, feps, li, di);
          }
        }
        gemm(true, false, n, s.dv, rows, pbuf, ld, gob, s.dv, 1.0f, dvp + j0 * s.dv, s.dv);
        gemm(false, false, rows, s.d, n, gbuf, ld, s.k + j0 * s.d, s.d, 0.0f, dqp + i0 * s.d, s.d);
        gemm(true, false, n, s.d, rows, gbuf, ld, qb, s.d, 1.0f, dkp + j0 * s.d, s.d);
        for (int64_t r = 0; r < rows; ++r) {
          // d|q|/dq = q / |q|, 0 at q = 0 (as torch's norm backward).
          const float ai = a[i0 + r];
          const float f = ai > 0.0f ? -2.0f * ga[r] / ai : 0.0f;
          for (int64_t c = 0; c < s.d; ++c) dqp[(i0 + r) * s.d + c] += f * qb[r * s.d + c];
        }
      }
      for (int64_t j = 0; j < s.t2; ++j) dnp[j] *= -2.0f;
    }
  });
  return {dq, dk, dn, dv};
}

// [threads of the (batch, head) loop, MKL threads of a GEMM inside it] for a call over ``items`` (batch * heads):
// what a forward or backward of that size runs with (0 for MKL's when the build has no MKL).
std::vector<int64_t> thread_use(int64_t items) {
  std::vector<int64_t> loop(static_cast<size_t>(std::max<int64_t>(items, 1)), -1);
  std::vector<int64_t> gemm(loop.size(), 0);
  at::parallel_for(0, items, 1, [&](int64_t begin, int64_t end) {
    const GemmThreads one_gemm_thread;
    for (int64_t i = begin; i < end; ++i) {
      loop[i] = at::get_thread_num();
      gemm[i] = MKL_Get_Max_Threads != nullptr ? MKL_Get_Max_Threads() : 0;
    }
  });
  std::sort(loop.begin(), loop.end());
  const int64_t threads = std::unique(loop.begin(), loop.end()) - loop.begin();
  return {threads, *std::max_element(gemm.begin(), gemm.end())};
}

// Registered as torch operators (torch.ops.wenet_udps_cpu.*), not as a Python module: no pybind11 and torch's
// Python headers to compile (about half of the build's time).
TORCH_LIBRARY(wenet_udps_cpu, m) {
  m.def("forward", &udps_forward);    // UDPS attention forward (float32, CPU): [out, lse]
  m.def("backward", &udps_backward);  // UDPS attention backward (float32, CPU): [dq, dk_num, dk_norm, dv]
  m.def("thread_use", &thread_use);   // [threads of the (batch, head) loop, MKL threads per GEMM] for batch * heads
}
