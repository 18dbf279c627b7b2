// The per-row loops of udps_cpu.cpp: the denominator, the mask and the exponential of one query row against a range
// of keys, in vector types of the build's widest registers (GCC/Clang vector extensions: 16 floats with AVX-512, 8
// with AVX, 4 otherwise; the compiler's auto-vectoriser gives up on these loops, and types wider than the registers
// are lowered badly).
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace udps_cpu {

#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif
using V = float __attribute__((vector_size(kVectorBytes)));
using VI = int32_t __attribute__((vector_size(kVectorBytes)));
constexpr int64_t kLanes = kVectorBytes / sizeof(float);
constexpr float kInf = std::numeric_limits<float>::infinity();

inline V splat(float x) {
  return V{} + x;
}

// The first m <= kLanes floats at p; lanes past m hold ``fill``.
inline V load(const float* p, int64_t m, float fill) {
  V x;
  if (m == kLanes) {
    std::memcpy(&x, p, sizeof(x));
  } else {
    x = splat(fill);
    for (int64_t l = 0; l < m; ++l) x[l] = p[l];
  }
  return x;
}

inline void store(float* p, V x, int64_t m) {
  if (m == kLanes) {
    std::memcpy(p, &x, sizeof(x));
  } else {
    for (int64_t l = 0; l < m; ++l) p[l] = x[l];
  }
}

// All-ones lanes for the first m.
inline VI first_lanes(int64_t m) {
  VI lane;
  for (int64_t l = 0; l < kLanes; ++l) lane[l] = static_cast<int32_t>(l);
  return lane < static_cast<int32_t>(m);
}

inline V vmax(V a, V b) {
  return a > b ? a : b;
}

// exp(x) for x <= 88 to about 1 ulp: x = k ln2 + r with |r| <= ln2 / 2, exp(r) by the degree-6 minimax polynomial of
// its relative error on that range (below 2e-9), 2^k from the exponent bits. Exactly 0 below -87 and for -inf. The
// callers pass S - max S or S - lse, never above 0, so there is no upper clamp (each operation here is about 1 % of
// the forward at equal work: issue 49).
inline V vexp(V x) {
  const V lo = splat(-87.0f);
  const V xc = x < lo ? lo : x;
  // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer (|x log2 e| < 2^22).
  const V magic = splat(12582912.0f);
  const V kf = (xc * 1.44269504088896341f + magic) - magic;
  const V r = (xc - kf * 0.693145751953125f) - kf * 1.42860682028622680e-6f;
  V p = splat(1.3836845755577087e-3f);
  p = p * r + 8.374815806746483e-3f;
  p = p * r + 4.166822507977486e-2f;
  p = p * r + 1.6666419804096222e-1f;
  p = p * r + 4.9999991059303284e-1f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const VI bits = (__builtin_convertvector(kf, VI) + 127) << 23;
  V scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return x < lo ? V{} : p * scale;
}

inline float hmax(V x) {
  float m = x[0];
  for (int64_t l = 1; l < kLanes; ++l) m = std::max(m, x[l]);
  return m;
}

inline float hsum(V x) {
  float s = 0.0f;
  for (int64_t l = 0; l < kLanes; ++l) s += x[l];
  return s;
}

// Runs chunk(j, kLanes) over the full chunks of 0..n, then chunk(j, m) on the m < kLanes keys left: inlined twice, the
// main loop's chunk has a constant width (no tail branches, nothing spilled).
template <typename F>
inline void for_chunks(int64_t n, F&& chunk) {
  const int64_t full = n - n % kLanes;
  for (int64_t j = 0; j < full; j += kLanes) chunk(j, kLanes);
  if (full < n) chunk(full, n - full);
}

// 1 / max(t, sqrt(eps)) for the denominators t = |q_i| + n_j, the one per-score term SDPA does not have. With
// AVX-512: vrcp14ps (relative error below 2^-14) and one Newton step (about 2^-28, within float rounding of the
// quotient): a vdivps per 16 scores cost about a fifth of the row loops' time (issue 49, no padding). Elsewhere a
// division. Forward and backward both take it from here, so the backward's P = exp(S - lse) sees the forward's S.
inline V inv_denominator(V t, float sqrt_eps) {
  const V x = vmax(t, splat(sqrt_eps));
#if defined(__AVX512F__)
  __m512 xm;
  std::memcpy(&xm, &x, sizeof(x));
  const __m512 rm = _mm512_rcp14_ps(xm);
  V r;
  std::memcpy(&r, &rm, sizeof(r));
  return r * (2.0f - x * r);
#else
  return 1.0f / x;
#endif
}

// Forward, first pass over one query row and a block of keys: the dots in ``row`` become S = N r r (-inf where
// masked: ``bias`` (kMasked) is the row's mask as 0 / -inf); returns max S (-inf when no key is kept).
template <bool kMasked>
inline float row_scores(float* row, int64_t n, float a, const float* norms, const float* bias, float sqrt_eps) {
  const V neg_inf = splat(-kInf);
  V mx = neg_inf;
  for_chunks(n, [&](int64_t j, int64_t m) __attribute__((always_inline)) {
    const V r = inv_denominator(a + load(norms + j, m, 1.0f), sqrt_eps);
    V s = load(row + j, m, 0.0f) * r * r;
    if (kMasked) {
      s += load(bias + j, m, -kInf);
    } else if (m < kLanes) {
      s = first_lanes(m) ? s : neg_inf;
    }
    store(row + j, s, m);
    mx = vmax(mx, s);
  });
  return hmax(mx);
}

// Forward, second pass: S in ``row`` becomes exp(S - mx) (mx finite); returns the sum.
inline float row_exp(float* row, int64_t n, float mx) {
  V acc{};
  for_chunks(n, [&](int64_t j, int64_t m) __attribute__((always_inline)) {
    const V p = vexp(load(row + j, m, -kInf) - mx);
    store(row + j, p, m);
    acc += p;
  });
  return hsum(acc);
}

// Backward of one query row: the dots in ``nrow`` become P, dP in ``grow`` becomes dN; G is added to the keys' ``dn``
// and its row sum returned (-2 is applied by the caller). A row with no kept key has lse = +inf, so P = 0 there.
template <bool kMasked>
inline float row_backward(float* nrow, float* grow, float* dn, int64_t n, float a, const float* norms, const float* bias,
                   float sqrt_eps, float eps, float lse, float delta) {
  V acc{};
  for_chunks(n, [&](int64_t j, int64_t m) __attribute__((always_inline)) {
    const V t = a + load(norms + j, m, 1.0f);
    const V r = inv_denominator(t, sqrt_eps);
    const V s = load(nrow + j, m, 0.0f) * r * r;
    V p = vexp(kMasked ? s + load(bias + j, m, -kInf) - lse : s - lse);
    if (!kMasked && m < kLanes) p = first_lanes(m) ? p : V{};
    const V y = p * (load(grow + j, m, 0.0f) - delta) * r;
    // The eps floor is a constant: no gradient reaches the norms where it is active.
    const V g = t * t >= eps ? y * s : V{};
    store(nrow + j, p, m);
    store(grow + j, y * r, m);
    store(dn + j, load(dn + j, m, 0.0f) + g, m);
    acc += g;
  });
  return hsum(acc);
}

// The dot products of ``rows`` rows of x and y (length d each, consecutive) into out.
inline void row_dots(const float* x, const float* y, int64_t rows, int64_t d, float* out) {
  for (int64_t i = 0; i < rows; ++i) {
    V acc{};
    for_chunks(d, [&](int64_t c, int64_t m) __attribute__((always_inline)) {
      acc += load(x + i * d + c, m, 0.0f) * load(y + i * d + c, m, 0.0f);
    });
    out[i] = hsum(acc);
  }
}

// The mask rows i0.. of a block, keys j0..j0+n, as 0 (kept) / -inf rows of stride ld: one row for a mask shared by
// every query. The row loops add it to the scores (the compiler makes poor code of byte masks in vector types).
// Returns whether any of those keys is masked; when none is (a batch of equal lengths), nothing is written and the
// rows skip the mask. (memchr first: a flag or-ed inside the conversion loop kept it from vectorising, which made
// the forward of causal masks 10-20 % slower.)
inline bool mask_bias(const uint8_t* keep, int64_t stride, int64_t rows, int64_t n, float* out, int64_t ld) {
  const int64_t count = stride == 0 ? 1 : rows;
  bool masked = false;
  for (int64_t i = 0; i < count && !masked; ++i) masked = std::memchr(keep + i * stride, 0, n) != nullptr;
  if (!masked) {
    return false;
  }
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t* row = keep + i * stride;
    for (int64_t j = 0; j < n; ++j) out[i * ld + j] = row[j] ? 0.0f : -kInf;
  }
  return true;
}

}  // namespace udps_cpu
