// The matrix products of udps_cpu.cpp: MKL's Fortran sgemm_ where torch exports it (at::mm otherwise), and the
// guard that keeps them on one MKL thread inside the (batch, head) loop.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <limits>

// The Fortran BLAS sgemm that torch's x86 (MKL) wheels export; weak, so a torch without it still loads the
// extension and the GEMMs go through at::mm (a dispatcher call each, slower for small blocks).
extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                       const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                       const float* beta, float* c, const int* ldc) __attribute__((weak));
// MKL's per-thread thread count (0 restores the global one; returns the previous local setting), and its current
// maximum; weak as sgemm_.
extern "C" int MKL_Set_Num_Threads_Local(int n) __attribute__((weak));
extern "C" int MKL_Get_Max_Threads() __attribute__((weak));

namespace udps_cpu {

// Row-major C (m x n) = op(A) op(B) + beta C, beta 0 or 1; op(X) = X^T when the flag is set.
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) {
    return;
  }
  if (sgemm_ != nullptr && k > 0 && std::max({m, n, k, lda, ldb, ldc}) <= std::numeric_limits<int>::max()) {
    // Column-major BLAS sees each row-major matrix transposed: C^T = op(B)^T op(A)^T.
    const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
    const int mi = n, ni = m, ki = k, la = ldb, lb = lda, lc = ldc;
    const float one = 1.0f;
    sgemm_(&tb, &ta, &mi, &ni, &ki, &one, b, &la, a, &lb, &beta, c, &lc);
    return;
  }
  auto opts = at::TensorOptions().dtype(at::kFloat);
  auto view = [&](const float* p, int64_t rows, int64_t cols, int64_t ld, bool t) {
    auto x = at::from_blob(const_cast<float*>(p), {rows, cols}, {ld, 1}, opts);
    return t ? x.t() : x;
  };
  auto out = at::from_blob(c, {m, n}, {ldc, 1}, opts);
  auto lhs = view(a, trans_a ? k : m, trans_a ? m : k, lda, trans_a);
  auto rhs = view(b, trans_b ? n : k, trans_b ? k : n, ldb, trans_b);
  if (beta == 0.0f) {
    at::mm_out(out, lhs, rhs);
  } else {
    out.addmm_(lhs, rhs);
  }
}

// One MKL thread for the GEMMs of this thread while in scope: the parallelism is over (batch, head).
class GemmThreads {
 public:
  GemmThreads() : previous_(MKL_Set_Num_Threads_Local != nullptr ? MKL_Set_Num_Threads_Local(1) : 0) {}
  ~GemmThreads() {
    if (MKL_Set_Num_Threads_Local != nullptr) MKL_Set_Num_Threads_Local(previous_);
  }
  GemmThreads(const GemmThreads&) = delete;
  GemmThreads& operator=(const GemmThreads&) = delete;

 private:
  int previous_;
};

}  // namespace udps_cpu
