// The CPU loops of softmax, log_softmax and their backwards (normalize.h), torch-free: a task is
// a row (inner == 1) or a strip of up to kNormStrip adjacent columns of one outer index, whose
// statistics are kept side by side so that every pass reads the rows of the strip in memory
// order. Two reads forward (the maximum, then the sum of exps) and a third that writes, as
// torch's; the caller runs the tasks on its threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../convert.h"
#include "../normalize.h"

namespace treduce::cpu {

inline constexpr int64_t kNormStrip = 64;
inline constexpr int kNormLanes = 16;  // a row's partial maxima and sums side by side (they vectorise)

// exp(v) for v <= 0 or NaN (softmax's x - max), for a float or a GCC vector of floats (U: its
// bits' type), without branches or calls, so that it vectorises (libm's expf, a call an element,
// took about 8 ns an element): v = k ln2 + r with k rounded by the 1.5 * 2^23 shift (no
// float-to-int conversion), ln2 in two parts, e^r by Cephes expf's polynomial, times 2^k from
// k's bits; below ln(2^-126) (results under float's normal range, -inf included) 0; NaN stays
// NaN. Within 0.96 ulp of exp over [-87.3, 0]. The selects are masks and bit operations (GCC's
// vector ?: went element by element).
template <class V, class U>
inline V exp_nonpositive(V v) {
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: t's low mantissa bits hold k
  constexpr float kLow = -87.33654f;     // ln(2^-126)
  const U low = U(v < kLow);             // all ones where v is below (not where NaN)
  const V c = __builtin_bit_cast(V, (__builtin_bit_cast(U, v) & ~low) | (__builtin_bit_cast(U, V{} + kLow) & low));
  const V t = c * 1.44269504088896341f + kShift;
  const V k = t - kShift;
  V r = c - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  const V z = r * r;
  V y = r * 1.9875691500e-4f + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  constexpr uint32_t kShiftBits = 0x4B400000u;  // kShift's bits: t's bits minus these are k
  const V scale = __builtin_bit_cast(V, (__builtin_bit_cast(U, t) - kShiftBits + 127u) << 23);  // 2^k, k >= -126
  return __builtin_bit_cast(V, __builtin_bit_cast(U, y * scale) & ~low);
}

// The scalar form: the same operations, so a row's tail rounds as its vectors do.
inline float exp_nonpositive(float v) {
  using V1 = float __attribute__((vector_size(4)));
  using U1 = uint32_t __attribute__((vector_size(4)));
  return exp_nonpositive<V1, U1>(V1{v})[0];
}

// 16 bytes: the baseline's SSE registers (GCC lowers the compares of wider vectors element by
// element there); kNormVecs of them side by side.
using NormVec = float __attribute__((vector_size(16)));
using NormBits = uint32_t __attribute__((vector_size(16)));
inline constexpr int kNormVecs = kNormLanes / 4;

// The CPU's exp of softmax's arguments: the branch-free float version (4 lanes or one), libm's
// for double.
inline NormVec norm_exp_cpu(NormVec v) { return exp_nonpositive<NormVec, NormBits>(v); }
inline float norm_exp_cpu(float v) { return exp_nonpositive(v); }
inline double norm_exp_cpu(double v) { return norm_exp(v); }

// An element's forward result from it and the row's a = forward_scale (core/normalize.h):
// exp(x - max) * a (softmax) or x - max - a (log_softmax), for an element or a NormVec of them.
template <SoftmaxOp kOp, class V, class Acc>
inline V forward_value(V x, Acc max, Acc a) {
  if constexpr (kOp == SoftmaxOp::Softmax) return norm_exp_cpu(x - max) * a;
  else return x - max - a;
}

// 4 elements of x as floats.
template <class In>
inline NormVec norm_load(const In* x) {
  if constexpr (std::is_same_v<In, float>) {
    NormVec v;
    std::memcpy(&v, x, sizeof v);
    return v;
  } else {
    return NormVec{element_cast<float>(x[0]), element_cast<float>(x[1]), element_cast<float>(x[2]), element_cast<float>(x[3])};
  }
}

// The maximum that keeps a NaN, lane by lane (norm_max's), by masks.
inline NormVec norm_max_vec(NormVec m, NormVec v) {
  const NormBits take = NormBits((v > m) | (v != v));
  return __builtin_bit_cast(NormVec, (__builtin_bit_cast(NormBits, v) & take) | (__builtin_bit_cast(NormBits, m) & ~take));
}

// A forward row (inner 1) of n elements with a float accumulator: its maximum and sum of exps in
// kNormLanes lanes (combined in a fixed order), then the results; 1 / sum or log(sum) once a row.
template <SoftmaxOp kOp, class In, class Out>
void normalize_row(const In* x, Out* out, int64_t n) {
  const int64_t whole = n / kNormLanes * kNormLanes;
  NormVec lanes[kNormVecs];
  for (auto& l : lanes) l = NormVec{} - INFINITY;
  for (int64_t d = 0; d < whole; d += kNormLanes)
    for (int j = 0; j < kNormVecs; ++j) lanes[j] = norm_max_vec(lanes[j], norm_load(x + d + 4 * j));
  float m = -INFINITY;
  for (const auto& l : lanes)
    for (int k = 0; k < 4; ++k) m = norm_max(m, l[k]);
  for (int64_t d = whole; d < n; ++d) m = norm_max(m, element_cast<float>(x[d]));
  // (a maximum of -inf: every element -inf, whose x - m is NaN, as torch's)
  NormVec sums[kNormVecs] = {};
  for (int64_t d = 0; d < whole; d += kNormLanes)
    for (int j = 0; j < kNormVecs; ++j) sums[j] += norm_exp_cpu(norm_load(x + d + 4 * j) - m);
  float sum = 0.0f;
  for (const auto& l : sums)
    for (int k = 0; k < 4; ++k) sum += l[k];
  for (int64_t d = whole; d < n; ++d) sum += norm_exp_cpu(element_cast<float>(x[d]) - m);
  const float a = forward_scale<kOp>(sum);
  const int64_t fours = n / 4 * 4;
  for (int64_t d = 0; d < fours; d += 4) {
    const NormVec r = forward_value<kOp>(norm_load(x + d), m, a);
    if constexpr (std::is_same_v<Out, float>) {
      std::memcpy(out + d, &r, sizeof r);
    } else {
      for (int k = 0; k < 4; ++k) out[d + k] = element_cast<Out>(r[k]);
    }
  }
  for (int64_t d = fours; d < n; ++d) out[d] = element_cast<Out>(forward_value<kOp>(element_cast<float>(x[d]), m, a));
}

// Tasks of a call: its rows, or its strips.
inline int64_t normalize_tasks(const NormalizeArgs& a) {
  return a.inner == 1 ? a.outer : a.outer * ((a.inner + kNormStrip - 1) / kNormStrip);
}

template <SoftmaxOp kOp, class In, class Out, class Acc>
void normalize_task(const NormalizeArgs& a, int64_t task) {
  const In* x = static_cast<const In*>(a.x);
  const In* y = static_cast<const In*>(a.y);
  Out* out = static_cast<Out*>(a.out_data);
  const int64_t n = a.size, inner = a.inner;
  const auto load = [](In v) { return element_cast<Acc>(v); };
  int64_t o = task, i0 = 0, w = 1;
  if (inner > 1) {
    const int64_t strips = (inner + kNormStrip - 1) / kNormStrip;
    o = task / strips;
    i0 = (task % strips) * kNormStrip;
    w = std::min(kNormStrip, inner - i0);
  }
  const int64_t base = o * n * inner + i0;
  Acc first[kNormStrip], second[kNormStrip];
  if constexpr (!is_backward(kOp)) {
    if constexpr (std::is_same_v<Acc, float>) {
      if (inner == 1) return normalize_row<kOp, In, Out>(x + base, out + base, n);
    }
    for (int64_t i = 0; i < w; ++i) first[i] = -INFINITY, second[i] = Acc(0);
    for (int64_t d = 0; d < n; ++d) {
      const In* row = x + base + d * inner;
      for (int64_t i = 0; i < w; ++i) first[i] = norm_max(first[i], load(row[i]));
    }
    for (int64_t d = 0; d < n; ++d) {
      const In* row = x + base + d * inner;
      for (int64_t i = 0; i < w; ++i) second[i] += norm_exp_cpu(load(row[i]) - first[i]);
    }
    for (int64_t i = 0; i < w; ++i) second[i] = forward_scale<kOp>(second[i]);
    for (int64_t d = 0; d < n; ++d) {
      const In* row = x + base + d * inner;
      Out* dst = out + base + d * inner;
      for (int64_t i = 0; i < w; ++i) dst[i] = element_cast<Out>(forward_value<kOp>(load(row[i]), first[i], second[i]));
    }
  } else {
    for (int64_t i = 0; i < w; ++i) first[i] = Acc(0);
    for (int64_t d = 0; d < n; ++d) {
      const int64_t at = base + d * inner;
      for (int64_t i = 0; i < w; ++i) first[i] += backward_term<kOp, Acc>(load(x[at + i]), load(y[at + i]));
    }
    for (int64_t d = 0; d < n; ++d) {
      const int64_t at = base + d * inner;
      for (int64_t i = 0; i < w; ++i)
        out[at + i] = element_cast<Out>(normalize_one<kOp, Acc>(load(x[at + i]), load(y[at + i]), first[i], Acc(0)));
    }
  }
}

}  // namespace treduce::cpu
