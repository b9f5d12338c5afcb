// treduce::sum on CPU tensors: the seeds' serial loop, seed 003's pairwise
// recursion, and `auto`, our multi-threaded, vectorisable version.
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../convert.h"
#include "../sum_common.h"

namespace treduce {

namespace cpu {
inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
}  // namespace cpu

// Half to float without branches (c10's conversion has them), so that loops
// over half data vectorise: move exponent and mantissa into place and rebias;
// infinities and NaNs get the top exponent; subnormals are renormalised by
// one float subtraction. Selections are bit masks, not ternaries, which GCC
// would turn back into branches.
template <>
struct Lowp<c10::Half> : std::true_type {
  static float to_float(c10::Half v) {
    const uint32_t h = v.x;
    const uint32_t em = (h & 0x7fffu) << 13;
    const uint32_t exp = em & 0x0f800000u;
    const uint32_t inf_nan = 0u - uint32_t(exp == 0x0f800000u);
    const uint32_t subnormal = 0u - uint32_t(exp == 0);
    const uint32_t o = em + 0x38000000u + (inf_nan & 0x38000000u);  // (127 - 15) << 23
    const uint32_t renormalised = cpu::float_to_bits(cpu::bits_to_float(o + 0x00800000u) -
                                                     cpu::bits_to_float(0x38800000u));
    return cpu::bits_to_float((o & ~subnormal) | (renormalised & subnormal) | ((h & 0x8000u) << 16));
  }
  static c10::Half from_float(float v) { return c10::Half(v); }
};
template <>
struct Lowp<c10::BFloat16> : std::true_type {
  static float to_float(c10::BFloat16 v) { return cpu::bits_to_float(uint32_t(v.x) << 16); }
  static c10::BFloat16 from_float(float v) { return c10::BFloat16(v); }
};

namespace cpu {
namespace {

template <DType> struct CType;
template <> struct CType<DType::Bool> { using type = bool; };
template <> struct CType<DType::UInt8> { using type = uint8_t; };
template <> struct CType<DType::Int8> { using type = int8_t; };
template <> struct CType<DType::Int16> { using type = int16_t; };
template <> struct CType<DType::Int32> { using type = int32_t; };
template <> struct CType<DType::Int64> { using type = int64_t; };
template <> struct CType<DType::Half> { using type = c10::Half; };
template <> struct CType<DType::BFloat16> { using type = c10::BFloat16; };
template <> struct CType<DType::Float> { using type = float; };
template <> struct CType<DType::Double> { using type = double; };
template <DType D> using ctype_t = typename CType<D>::type;

enum class Variant { Serial, Pairwise, Auto };

constexpr VariantDoc kDocs[] = {
    {"serial", "serial_sum (cpu/sum_cpu.cpp)", "one loop, one accumulator",
     "000, 002, 003 (the CPU loop)", "first rung", false},
    {"pairwise", "pairwise_sum (cpu/sum_cpu.cpp)",
     "recursive halving: each half summed recursively, then the two added",
     "003 recursiveReduce", "rounding error grows with log n instead of n", false},
    {"auto", "auto_sum (cpu/sum_cpu.cpp)",
     "64K-element chunks on all threads, 16 independent accumulators per chunk, "
     "partials added in chunk order", "-", "threads and SIMD; bitwise reproducible", false},
};

template <class In, class Mid, class Acc>
Acc serial_sum(const In* x, int64_t n) {
  Acc s = Acc(0);
  for (int64_t i = 0; i < n; ++i) s += Load<In, Mid, Acc>::apply(x[i]);
  return s;
}

// Seed 003 folded the upper half onto the lower half in place, overwriting
// the input and dropping the last element of odd sizes. Recursing on the two
// halves builds the same kind of balanced tree from a read-only input; the
// recursion stops at 8 elements so calls do not dominate.
template <class In, class Mid, class Acc>
Acc pairwise_sum(const In* x, int64_t n) {
  if (n <= 8) return serial_sum<In, Mid, Acc>(x, n);
  const int64_t half = n / 2;
  return pairwise_sum<In, Mid, Acc>(x, half) + pairwise_sum<In, Mid, Acc>(x + half, n - half);
}

// Elements per parallel task. Chunk sums are combined in chunk order, so the
// result is the same bits whatever the number of threads.
constexpr int64_t kChunk = int64_t(1) << 16;

// Sixteen independent accumulators: no loop-carried dependence between
// lanes, so the compiler vectorises the loop without reassociating.
template <class In, class Mid, class Acc>
Acc chunk_sum(const In* x, int64_t n) {
  constexpr int kLanes = 16;
  Acc lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += Load<In, Mid, Acc>::apply(x[i + j]);
  for (int j = 0; i + j < n; ++j) lane[j] += Load<In, Mid, Acc>::apply(x[i + j]);
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) lane[j] += lane[j + w];
  return lane[0];
}

// A chunk of 1- and 2-byte integers is summed in 32 bits (twice as many lanes
// per vector as 64): 2^16 elements of at most 2^15 in magnitude cannot leave
// the int32 range.
template <class Mid, class Acc>
using ChunkAcc = std::conditional_t<std::is_same_v<Acc, int64_t> && std::is_integral_v<Mid> &&
                                        sizeof(Mid) <= 2,
                                    int32_t, Acc>;
static_assert(kChunk * 32768 <= int64_t(1) << 31, "int16 chunk sums must fit in int32");

template <class In, class Mid, class Acc>
Acc auto_sum(const In* x, int64_t n) {
  using Chunk = ChunkAcc<Mid, Acc>;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  if (chunks <= 1) return Acc(chunk_sum<In, Mid, Chunk>(x, n));
  std::vector<Acc> partial(chunks);
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c)
      partial[c] = Acc(chunk_sum<In, Mid, Chunk>(x + c * kChunk, std::min(kChunk, n - c * kChunk)));
  });
  return pairwise_sum<Acc, Acc, Acc>(partial.data(), chunks);
}

template <class Acc>
void store(at::Tensor& out, Acc v) {
  switch (out.scalar_type()) {
#define TREDUCE_STORE_CASE(D)                                                   \
  case to_scalar_type(DType::D):                                                \
    *out.mutable_data_ptr<ctype_t<DType::D>>() = element_cast<ctype_t<DType::D>>(v); \
    break;
    TREDUCE_DTYPES(TREDUCE_STORE_CASE)
#undef TREDUCE_STORE_CASE
    default: TORCH_INTERNAL_ASSERT(false, "unexpected result dtype");
  }
}

template <class In, class Mid, class Acc>
void run(Variant v, const at::Tensor& x, at::Tensor& out) {
  const In* p = x.const_data_ptr<In>();
  const int64_t n = x.numel();
  switch (v) {
    case Variant::Serial: return store(out, serial_sum<In, Mid, Acc>(p, n));
    case Variant::Pairwise: return store(out, pairwise_sum<In, Mid, Acc>(p, n));
    case Variant::Auto: return store(out, auto_sum<In, Mid, Acc>(p, n));
  }
}

at::Tensor sum_cpu(const at::Tensor& self, c10::string_view variant,
                   std::optional<at::ScalarType> dtype) {
  const SumTypes t = check_sum_args(self, dtype);
  const auto v = static_cast<Variant>(lookup_variant(c10::DeviceType::CPU, variant));
  const at::Tensor x = dense_input(self);
  at::Tensor out = at::empty({}, self.options().dtype(to_scalar_type(t.out)));
#define TREDUCE_DISPATCH(IN, MID, ACC)                                          \
  if (t.in == DType::IN && t.mid == DType::MID && t.acc == DType::ACC) {        \
    run<ctype_t<DType::IN>, ctype_t<DType::MID>, ctype_t<DType::ACC>>(v, x, out); \
    return out;                                                                 \
  }
  TREDUCE_SUM_COMBOS(TREDUCE_DISPATCH)
#undef TREDUCE_DISPATCH
  TORCH_INTERNAL_ASSERT(false, "no instantiation for this dtype combination");
}

}  // namespace
}  // namespace cpu

VariantTable cpu_variants() {
  return {cpu::kDocs, int(sizeof(cpu::kDocs) / sizeof(cpu::kDocs[0]))};
}

}  // namespace treduce

TORCH_LIBRARY_IMPL(treduce, CPU, m) { m.impl("sum", &treduce::cpu::sum_cpu); }
