// The loops of sum_simd.h, included once per instruction set by sum_simd.cpp inside
// namespace treduce::cpu::simd::TREDUCE_SIMD_ISA (every header they use is included before, so
// that no inline function of another header is compiled for the wider instruction set).
// TREDUCE_SIMD_AVX2: 16-bit loads by AVX2 and F16C intrinsics, else by generic vector operations.

// TREDUCE_SIMD_BYTES: the vector size (16 for the baseline: GCC kept 32-byte vectors it had to
// split in memory, 5x slower). Either way a row is 128 bytes of accumulators, so lane j of both
// builds sums the same elements in the same order.
constexpr int kBytes = TREDUCE_SIMD_BYTES;
using vf32 = float __attribute__((vector_size(kBytes)));
using vf64 = double __attribute__((vector_size(kBytes)));
using vu64 = uint64_t __attribute__((vector_size(kBytes)));
using vu32 = uint32_t __attribute__((vector_size(kBytes)));
using vu16 = uint16_t __attribute__((vector_size(kBytes / 2)));  // as many lanes as vu32
using vf32h = float __attribute__((vector_size(kBytes / 2)));   // as many lanes as vf64

template <class V, class T>
[[gnu::always_inline]] inline V load_as(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class To, class From>
[[gnu::always_inline]] inline To bit_cast_vec(const From& v) {
  static_assert(sizeof(To) == sizeof(From), "same size");
  To t;
  std::memcpy(&t, &v, sizeof t);
  return t;
}

struct LoadF32 {
  using V = vf32;
  using In = float;
  [[gnu::always_inline]] static V load(const float* p) { return load_as<V>(p); }
};

struct LoadF64 {
  using V = vf64;
  using In = double;
  [[gnu::always_inline]] static V load(const double* p) { return load_as<V>(p); }
};

struct LoadI64 {  // unsigned lanes: the sum wraps (signed overflow would be undefined)
  using V = vu64;
  using In = int64_t;
  [[gnu::always_inline]] static V load(const int64_t* p) { return load_as<V>(p); }
};

struct LoadBF16 {  // bfloat16 is the top half of a float
  using V = vf32;
  using In = uint16_t;
  [[gnu::always_inline]] static V load(const uint16_t* p) {
#if TREDUCE_SIMD_AVX2  // one widening load (GCC made two halves and an insert of the generic form)
    static_assert(kBytes == 32, "eight lanes");
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return bit_cast_vec<V>(_mm256_slli_epi32(w, 16));
#else
    return bit_cast_vec<V>(__builtin_convertvector(load_as<vu16>(p), vu32) << 16);
#endif
  }
};

struct LoadF16 {
  using V = vf32;
  using In = uint16_t;
  [[gnu::always_inline]] static V load(const uint16_t* p) {
#if TREDUCE_SIMD_AVX2  // F16C's conversion
    static_assert(kBytes == 32, "eight halves");
    return bit_cast_vec<V>(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#else
    // Lowp<c10::Half>::to_float (reduce_cpu.cpp) on every lane: exponent and mantissa moved into
    // place and rebiased, infinities and NaNs to the top exponent, subnormals renormalised by one
    // float subtraction.
    const vu32 h = __builtin_convertvector(load_as<vu16>(p), vu32);
    const vu32 em = (h & 0x7fffu) << 13;
    const vu32 exp = em & 0x0f800000u;
    const vu32 inf_nan = bit_cast_vec<vu32>(exp == 0x0f800000u);
    const vu32 subnormal = bit_cast_vec<vu32>(exp == 0u);
    const vu32 o = em + 0x38000000u + (inf_nan & 0x38000000u);
    const vf32 shifted = bit_cast_vec<vf32>(o + 0x00800000u) - bit_cast_vec<float>(0x38800000u);
    const vu32 renormalised = bit_cast_vec<vu32>(shifted);
    return bit_cast_vec<V>((o & ~subnormal) | (renormalised & subnormal) | ((h & 0x8000u) << 16));
#endif
  }
};

// The cascade's levels over `rows` rows: add_row(r, low) adds row r into low; 16 rows of low go
// into mid, and each 16 of those to the top level through to_top(mid). Every sum here runs it.
template <class V, int kN, class AddRow, class ToTop>
[[gnu::always_inline]] inline void cascade_levels(int64_t rows, const AddRow& add_row, const ToTop& to_top) {
  constexpr int64_t kStep = 16;
  V mid[kN], low[kN];
  for (int64_t r2 = 0; r2 < rows; r2 += kStep * kStep) {
    for (V& v : mid) v = V{};
    const int64_t end2 = std::min(rows, r2 + kStep * kStep);
    for (int64_t r1 = r2; r1 < end2; r1 += kStep) {
      for (V& v : low) v = V{};
      const int64_t end1 = std::min(end2, r1 + kStep);
      for (int64_t r = r1; r < end1; ++r) add_row(r, low);
      for (int k = 0; k < kN; ++k) mid[k] += low[k];
    }
    to_top(mid);
  }
}

// The lanes of top as a tree, lane j += lane j + w for w = lanes / 2, ..., 1: whole vectors
// while w spans them, then the lanes of the first.
template <class V, int kN>
[[gnu::always_inline]] inline auto lane_tree(V (&top)[kN]) {
  using A = std::remove_reference_t<decltype(V{}[0])>;
  constexpr int kWidth = int(sizeof(V) / sizeof(A));
  for (int w = kN / 2; w > 0; w /= 2)
    for (int k = 0; k < w; ++k) top[k] += top[k + w];
  A lane[kWidth];
  for (int j = 0; j < kWidth; ++j) lane[j] = top[0][j];
  for (int w = kWidth / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) lane[j] += lane[j + w];
  return lane[0];
}

// The tail of a run, fewer than kVecs * kWidth elements, converted through the same loader from
// a zero-padded copy and added as the full rows' lanes are (lane_tree: the vectors, then the
// lanes, as a tree; the padding adds zeros): runs under one vector (Cascade::short_run) and the
// compensated float64 sum's tail. Longer tails are read in place (in_place_tail_sum, below).
// Out of line: inlined, GCC zeroed the copy's memory on every call, tail or not (a tenth of the
// time of rows of 128).
template <class L, int kVecs, int kWidth>
[[gnu::noinline]] auto tail_sum(const typename L::In* x, int64_t tail) {
  typename L::In pad[kVecs * kWidth] = {};
  std::memcpy(pad, x, tail * sizeof(typename L::In));
  typename L::V v[kVecs];
  for (int k = 0; k < kVecs; ++k) v[k] = L::load(pad + k * kWidth);
  return lane_tree(v);
}

// The last `tail` (< kVecs * kWidth) elements of a run, x[0, tail), read in place (kWidth of
// them at least), as lanes whose sum lane_tree takes: where the run has at least kVecs * kWidth
// elements ending at x + tail (`window`), the vectors of that many ending there, the lanes
// before x zeroed; else element i in lane i, as tail_sum's copy: the whole vectors from x, then
// the vector ending at x + tail rotated so that its new elements come first, the rest zeroed.
// Either way an element's lane (of the kVecs * kWidth) does not depend on the vector width: the
// same bits on every instruction set. tail_sum's copy made every row's tail a store-to-load
// forwarding stall (vector loads over the copy's narrower stores): float32 sums over rows of 33
// took 3.6x torch's time on 2 threads, rows of 32 0.45x.
template <class L, int kVecs, int kWidth>
[[gnu::always_inline]] inline auto in_place_tail_sum(const typename L::In* x, int64_t tail, bool window) {
  using V = typename L::V;
  using A = std::remove_reference_t<decltype(V{}[0])>;
  constexpr int64_t kRow = int64_t(kVecs) * kWidth;
  V lane;
  for (int j = 0; j < kWidth; ++j) lane[j] = A(j);
  V v[kVecs];
  if (window) {
    const typename L::In* p = x + tail - kRow;
    const A first = A(kRow - tail);
    for (int k = 0; k < kVecs; ++k) {
      const V e = L::load(p + k * kWidth);
      v[k] = lane + A(k * kWidth) >= first ? e : V{};
    }
  } else {
    const int64_t whole = tail / kWidth, rest = tail % kWidth;
    for (int k = 0; k < kVecs; ++k) {
      if (k < whole) {
        v[k] = L::load(x + k * kWidth);
      } else if (k == whole && rest > 0) {
        using M = decltype(V{} != V{});  // integer lanes of the same width
        M turn;
        for (int j = 0; j < kWidth; ++j) turn[j] = (j + kWidth - int(rest)) & (kWidth - 1);
        const V e = __builtin_shuffle(L::load(x + tail - kWidth), turn);
        v[k] = lane < A(rest) ? e : V{};
      } else {
        v[k] = V{};
      }
    }
  }
  return lane_tree(v);
}

// 128 bytes of accumulators (kVecs vectors); each lane a cascade (sum_simd.h), then the lanes
// combined as a tree in a fixed order.
template <class L>
struct Cascade {
  using V = typename L::V;
  using In = typename L::In;
  using A = std::remove_reference_t<decltype(V{}[0])>;
  static constexpr int kWidth = int(sizeof(V) / sizeof(A));
  static constexpr int kVecs = 128 / kBytes;
  static constexpr int64_t kRow = kVecs * kWidth;

  // Out of line: inlined beside short_sum in rows, one accumulator of the bfloat16 loop went to
  // the stack (bfloat16 2^18 whole sums 16-22 -> 25 us on the development CPU).
  [[gnu::noinline]] static auto sum(const In* x, int64_t n) {
    if (n < kRow) return short_run(x, n);
    V top[kVecs];
    for (V& v : top) v = V{};
    const int64_t rows = n / kRow;
    cascade_levels<V, kVecs>(
        rows,
        [x](int64_t r, V(&low)[kVecs]) {
          const In* p = x + r * kRow;
          for (int k = 0; k < kVecs; ++k) low[k] += L::load(p + k * kWidth);
        },
        [&top](const V(&mid)[kVecs]) {
          for (int k = 0; k < kVecs; ++k) top[k] += mid[k];
        });
    return finish(top, x, n);
  }

  // A run of fewer than 16 rows: only the first level (the others would add it to zeros: the
  // same bits), without the cascade's loops (rows of 128 elements: a fifth of their time).
  [[gnu::always_inline]] static auto short_sum(const In* x, int64_t n) {
    if (n < kRow) return short_run(x, n);
    V low[kVecs];
    for (V& v : low) v = V{};
    for (int64_t r = 0; r < n / kRow; ++r)
      for (int k = 0; k < kVecs; ++k) low[k] += L::load(x + r * kRow + k * kWidth);
    return finish(low, x, n);
  }

  [[gnu::always_inline]] static A finish(V (&top)[kVecs], const In* x, int64_t n) {
    A lane0 = lane_tree(top);
    const int64_t done = n / kRow * kRow;
    if (n > done) lane0 += in_place_tail_sum<L, kVecs, kWidth>(x + done, n - done, true);
    return lane0;
  }

  // A run of fewer than kRow elements: in place from a vector's worth, else from a copy.
  [[gnu::always_inline]] static A short_run(const In* x, int64_t n) {
    if (n >= kWidth) return in_place_tail_sum<L, kVecs, kWidth>(x, n, false);
    return n > 0 ? tail_sum<L, kVecs, kWidth>(x, n) : A(0);
  }

  // TypeKernels' sum, nansum and sumsq: `rows` runs, the r-th at x + r * ld.
  template <class S>
  static void rows(const In* x, int64_t n, int64_t rows, int64_t ld, S* out) {
    if (n < 16 * kRow) {
      for (int64_t r = 0; r < rows; ++r) out[r] = S(short_sum(x + r * ld, n));
    } else {
      for (int64_t r = 0; r < rows; ++r) out[r] = S(sum(x + r * ld, n));
    }
  }
};

// prod of runs: 128 bytes of lanes of products, then a tree of the lanes (Cascade's shape; no
// levels: a product's relative error grows with its count of multiplies however they group).
// The last, partial row zero-padded and its padding's lanes taken as 1. (The generic loop: float32
// rows of 128 at 0.52x torch.prod's speed on one Xeon thread.)
// The tail of a run of n elements after `rows` whole rows of Cascade's kRow: f(k, e, keep) for
// each vector k that holds tail elements, e its elements, keep the mask of its lanes that are
// tail elements (an element's lane by its place in the row: the same on every vector width).
// After a whole row, the run's last kRow elements read in place: a zero-padded copy's vector
// loads over its narrower stores stalled (one thread, over rows of 33 of (952, 33) float32: prod
// 27.8 us, logsumexp 109; rows of 32 4.8 and 34). A run shorter than a row: the copy.
template <class L, class F>
[[gnu::always_inline]] inline void tail_row(const typename L::In* x, int64_t n, int64_t rows, const F& f) {
  using C = Cascade<L>;
  using V = typename C::V;
  using A = typename C::A;
  constexpr int kVecs = C::kVecs, kWidth = C::kWidth;
  constexpr int64_t kRow = C::kRow;
  const int64_t tail = n - rows * kRow;
  if (tail <= 0) return;
  V lane;
  for (int j = 0; j < kWidth; ++j) lane[j] = A(j);
  if (rows > 0) {
    const typename L::In* w = x + n - kRow;
    for (int k = 0; k < kVecs; ++k)
      if ((k + 1) * kWidth > kRow - tail) f(k, L::load(w + k * kWidth), lane + A(k * kWidth) >= A(kRow - tail));
    return;
  }
  typename L::In pad[kRow] = {};
  std::memcpy(pad, x, tail * sizeof pad[0]);
  for (int k = 0; k < kVecs; ++k) f(k, L::load(pad + k * kWidth), lane + A(k * kWidth) < A(tail));
}

template <class L>
struct Product {
  using C = Cascade<L>;
  using V = typename C::V;
  using A = typename C::A;
  [[gnu::always_inline]] static A run(const typename L::In* x, int64_t n) {
    constexpr int kVecs = C::kVecs, kWidth = C::kWidth;
    constexpr int64_t kRow = C::kRow;
    V acc[kVecs];
    for (V& v : acc) v = V{} + A(1);
    const int64_t rows = n / kRow;
    for (int64_t r = 0; r < rows; ++r)
      for (int k = 0; k < kVecs; ++k) acc[k] *= L::load(x + r * kRow + k * kWidth);
    tail_row<L>(x, n, rows, [&](int k, const V& e, const auto& keep) { acc[k] *= keep ? e : V{} + A(1); });
    for (int w = kVecs / 2; w > 0; w /= 2)
      for (int k = 0; k < w; ++k) acc[k] *= acc[k + w];
    A lane[kWidth];
    for (int j = 0; j < kWidth; ++j) lane[j] = acc[0][j];
    for (int w = kWidth / 2; w > 0; w /= 2)
      for (int j = 0; j < w; ++j) lane[j] *= lane[j + w];
    return lane[0];
  }
  template <class S>
  static void rows(const typename L::In* x, int64_t n, int64_t rows, int64_t ld, S* out) {
    for (int64_t r = 0; r < rows; ++r) out[r] = S(run(x + r * ld, n));
  }
};

// nansum's elements: NaN read as 0.
template <class L>
struct NanAsZero {
  using V = typename L::V;
  using In = typename L::In;
  [[gnu::always_inline]] static V load(const In* p) {
    const V v = L::load(p);
    return v != v ? V{} : v;
  }
};

// vector_norm's (ord 2) elements: squared.
template <class L>
struct Squared {
  using V = typename L::V;
  using In = typename L::In;
  [[gnu::always_inline]] static V load(const In* p) {
    const V v = L::load(p);
    return v * v;
  }
};

// vector_norm's (ord 1) elements: their magnitudes, the sign bit cleared (a compare and a
// select took 1-norms of 65536 float32 to 8.7 us on 2 threads, the 2-norm's square 4.9).
[[gnu::always_inline]] inline vf32 magnitude(vf32 v) {
  using U = uint32_t __attribute__((vector_size(kBytes)));
  return (vf32)((U)v & (U{} + 0x7fffffffu));
}
[[gnu::always_inline]] inline vf64 magnitude(vf64 v) {
  using U = uint64_t __attribute__((vector_size(kBytes)));
  return (vf64)((U)v & (U{} + 0x7fffffffffffffffull));
}
template <class L>
struct Magnitude {
  using V = typename L::V;
  using In = typename L::In;
  [[gnu::always_inline]] static V load(const In* p) { return magnitude(L::load(p)); }
};

// The two halves of a float vector as double vectors (exact conversions).
[[gnu::always_inline]] inline void widen(const vf32& s, vf64& lo, vf64& hi) {
#if TREDUCE_SIMD_AVX2
  const __m256 v = bit_cast_vec<__m256>(s);
  lo = bit_cast_vec<vf64>(_mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  hi = bit_cast_vec<vf64>(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
#elif TREDUCE_SIMD_X86
  const __m128 v = bit_cast_vec<__m128>(s);
  lo = bit_cast_vec<vf64>(_mm_cvtps_pd(v));
  hi = bit_cast_vec<vf64>(_mm_cvtps_pd(_mm_movehl_ps(v, v)));
#else
  vf32h h[2];
  std::memcpy(h, &s, sizeof h);
  lo = __builtin_convertvector(h[0], vf64);
  hi = __builtin_convertvector(h[1], vf64);
#endif
}

// var of a floating run in two passes (reduce_cpu.cpp): the first its sum, the second the sums
// of d = x - c and d * d about that mean c (Moments), here. 16 double lanes: lane j takes elements
// j, j + 16, ... of the run (floats converted exactly), in Cascade's levels; then each sum's lanes
// as a tree, and the last n % 16 elements in order. (Welford's update in groups of 16: 0.8x
// torch.var's speed over whole float32 tensors, one Xeon thread; torch takes two passes too.)
template <class L>
struct Deviations {
  using In = typename L::In;
  static constexpr int64_t kRow = 16;
  static constexpr int kN = kRow * 8 / kBytes;  // double vectors a row

  // A row of 16 elements as double vectors.
  [[gnu::always_inline]] static void load_row(const In* p, vf64 (&d)[kN]) {
    if constexpr (std::is_same_v<typename L::V, vf64>) {
      for (int k = 0; k < kN; ++k) d[k] = L::load(p + k * (kBytes / 8));
    } else {
      for (int k = 0; k < kN / 2; ++k) widen(L::load(p + k * (kBytes / 4)), d[2 * k], d[2 * k + 1]);
    }
  }

  static Moments run(const In* x, int64_t n, double c) {
    const vf64 cv = vf64{} + c;
    vf64 top[2 * kN];  // the sums of d, then of d * d
    for (vf64& v : top) v = vf64{};
    const int64_t rows = n / kRow;
    cascade_levels<vf64, 2 * kN>(
        rows,
        [x, cv](int64_t r, vf64(&low)[2 * kN]) {
          vf64 d[kN];
          load_row(x + r * kRow, d);
          for (int k = 0; k < kN; ++k) {
            d[k] -= cv;
            low[k] += d[k];
            low[kN + k] += d[k] * d[k];
          }
        },
        [&top](const vf64(&mid)[2 * kN]) {
          for (int k = 0; k < 2 * kN; ++k) top[k] += mid[k];
        });
    vf64 s[kN], q[kN];
    for (int k = 0; k < kN; ++k) s[k] = top[k], q[k] = top[kN + k];
    Moments m{lane_tree(s), lane_tree(q)};
    if (const int64_t tail = n - rows * kRow; tail > 0) {
      In pad[kRow] = {};
      std::memcpy(pad, x + rows * kRow, tail * sizeof(In));
      vf64 d[kN];
      load_row(pad, d);
      for (int64_t j = 0; j < tail; ++j) {
        const double e = d[j / (kBytes / 8)][j % (kBytes / 8)] - c;
        m.sum += e;
        m.sq += e * e;
      }
    }
    return m;
  }
};

// float32 sums with a float32 result, in double: 32 lanes as Cascade's, each adding eight
// elements in float before its double accumulator. A row of 256 elements is four groups of 64,
// read in order; lane 8q + i of the row adds elements 64q + i + 8m, m = 0..7, as a tree (pairs,
// then pairs of those), converts that to double and adds it there; the cascade and the lanes'
// tree are double. Against a float64 sum of N(0, 1) data, 0.4x the error of the float cascade
// (torch's kind) from 2^10 to 2^22; converting every element instead cost 1.5-2x the float
// cascade's time in cache, groups of eight ~1.0x (benchmarks/NOTES.md at 8d99fb0).
constexpr int64_t kWideRow = 256;
constexpr int kWideVecs = 2 * 128 / kBytes;  // double vectors of 32 lanes

// A row's 32 lane sums into acc (double lane j in vector j / (kBytes / 8)).
[[gnu::always_inline]] inline void wide_row(const float* p, vf64 (&acc)[kWideVecs]) {
  constexpr int kWidth = int(sizeof(vf32) / sizeof(float)), kHalf = kWidth / 2;
  for (int q = 0; q < 4; ++q) {
    for (int h = 0; h < 8; h += kWidth) {  // the vectors of 8 lanes
      const float* b = p + 64 * q + h;
      const vf32 t0 = load_as<vf32>(b) + load_as<vf32>(b + 8);
      const vf32 t1 = load_as<vf32>(b + 16) + load_as<vf32>(b + 24);
      const vf32 t2 = load_as<vf32>(b + 32) + load_as<vf32>(b + 40);
      const vf32 t3 = load_as<vf32>(b + 48) + load_as<vf32>(b + 56);
      vf64 lo, hi;
      widen((t0 + t1) + (t2 + t3), lo, hi);
      acc[(8 * q + h) / kHalf] += lo;
      acc[(8 * q + h) / kHalf + 1] += hi;
    }
  }
}

// The last n % 256 elements as one more group row, zero-padded (out of line, as tail_sum).
[[gnu::noinline]] inline void wide_tail(const float* x, int64_t tail, vf64 (&acc)[kWideVecs]) {
  float pad[kWideRow] = {};
  std::memcpy(pad, x, tail * sizeof(float));
  wide_row(pad, acc);
}

inline double sum_f32_wide(const float* x, int64_t n) {
  const int64_t rows = n / kWideRow;
  vf64 top[kWideVecs];
  for (vf64& v : top) v = vf64{};
  cascade_levels<vf64, kWideVecs>(
      rows, [x](int64_t r, vf64(&low)[kWideVecs]) { wide_row(x + r * kWideRow, low); },
      [&top](const vf64(&mid)[kWideVecs]) {
        for (int k = 0; k < kWideVecs; ++k) top[k] += mid[k];
      });
  if (const int64_t tail = n - rows * kWideRow; tail > 0) wide_tail(x + rows * kWideRow, tail, top);
  return lane_tree(top);  // Cascade's tree over the 32 double lanes
}


// a + b = s + e exactly (Knuth's two-sum; no condition on the magnitudes), lane by lane.
template <class T>
[[gnu::always_inline]] inline T two_sum(T a, T b, T& e) {
  const T s = a + b, bb = s - a;
  e = (a - (s - bb)) + (b - bb);
  return s;
}

// float64 sums, compensated: Cascade's low and middle levels, then the top level and the
// lanes' tree as two-sums whose errors are kept apart and added at the end, returned as hi + lo
// unrounded. What a plain cascade loses where partials grow (its top level; the chunk combine,
// reduce_cpu.cpp) is kept; the cost is a two-sum every 256 rows a lane.
inline DoubleDouble sum_f64_compensated(const double* x, int64_t n) {
  using V = vf64;
  constexpr int kWidth = int(sizeof(V) / sizeof(double));
  constexpr int kVecs = 128 / kBytes;
  constexpr int64_t kRow = kVecs * kWidth;
  V top[kVecs], err[kVecs];
  for (int k = 0; k < kVecs; ++k) top[k] = err[k] = V{};
  const int64_t rows = n / kRow;
  cascade_levels<V, kVecs>(
      rows,
      [x](int64_t r, V(&low)[kVecs]) {
        for (int k = 0; k < kVecs; ++k) low[k] += LoadF64::load(x + r * kRow + k * kWidth);
      },
      [&top, &err](const V(&mid)[kVecs]) {
        for (int k = 0; k < kVecs; ++k) {
          V e;
          top[k] = two_sum(top[k], mid[k], e);
          err[k] += e;
        }
      });
  for (int w = kVecs / 2; w > 0; w /= 2)
    for (int k = 0; k < w; ++k) {
      V e;
      top[k] = two_sum(top[k], top[k + w], e);
      err[k] += err[k + w] + e;
    }
  double hi[kWidth], lo[kWidth];
  for (int j = 0; j < kWidth; ++j) hi[j] = top[0][j], lo[j] = err[0][j];
  for (int w = kWidth / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) {
      double e;
      hi[j] = two_sum(hi[j], hi[j + w], e);
      lo[j] += lo[j + w] + e;
    }
  if (const int64_t tail = n - rows * kRow; tail > 0) {
    double e;
    hi[0] = two_sum(hi[0], tail_sum<LoadF64, kVecs, kWidth>(x + rows * kRow, tail), e);
    lo[0] += e;
  }
  return {hi[0], lo[0]};
}

#include "exact_blocks_impl.h"

// Integers as they are, for extrema (the lane type is the element type).
template <class T, class VT>
struct LoadInt {
  using V = VT;
  using In = T;
  [[gnu::always_inline]] static V load(const T* p) { return load_as<V>(p); }
};
using LoadI8 = LoadInt<int8_t, int8_t __attribute__((vector_size(kBytes)))>;
using LoadU8 = LoadInt<uint8_t, uint8_t __attribute__((vector_size(kBytes)))>;
using LoadI16 = LoadInt<int16_t, int16_t __attribute__((vector_size(kBytes)))>;
using LoadI32 = LoadInt<int32_t, int32_t __attribute__((vector_size(kBytes)))>;
using LoadI64Signed = LoadInt<int64_t, int64_t __attribute__((vector_size(kBytes)))>;  // (LoadI64: unsigned lanes, for sums)

// The extrema of a run of n >= 1 elements, NaN winning: kWhich 0 the minimum, 1 the maximum, 2
// both (aminmax: one read). Nothing rounds, so lanes and order are free: four vectors a step
// (two for both), each lane `v > m ? v : m` (one max instruction) and, for floats, a mask of the
// lanes that saw a NaN; a run with one returns NaN. (The generic operator's compare of a NaN was
// left as branches, scalar: amax over rows of float32 at 0.1-0.15x torch.amax's speed; a select
// that kept NaN in the lanes ran float32 amax at 0.8x.) The last vector is padded with copies
// of the last element, which change no extremum.
template <bool kLo, bool kHi, bool kFloat, class V, class M>
[[gnu::always_inline]] inline void take_extrema(V& lo, V& hi, M& nan, const V& v) {
  if constexpr (kLo) lo = v < lo ? v : lo;
  if constexpr (kHi) hi = v > hi ? v : hi;
  if constexpr (kFloat) nan |= v != v;
}

// Whether any lane of a compare's mask is set: one movemask on x86 (the lanes one by one were a
// chain of extracts and ors).
template <class M>
[[gnu::always_inline]] inline bool any_lane(const M& m) {
#if TREDUCE_SIMD_X86
  if constexpr (sizeof(M) == 32) return _mm256_movemask_epi8(bit_cast_vec<__m256i>(m)) != 0;
  else return _mm_movemask_epi8(bit_cast_vec<__m128i>(m)) != 0;
#else
  constexpr int kW = int(sizeof(M) / sizeof(m[0]));
  auto any = m[0];
  for (int j = 1; j < kW; ++j) any |= m[j];
  return any != 0;
#endif
}

// 16-byte vectors of T (an attribute on a dependent type would be dropped).
template <class T>
struct Vec16;
#define TREDUCE_VEC16(T)                                    \
  template <>                                               \
  struct Vec16<T> {                                         \
    typedef T type __attribute__((vector_size(16)));        \
  };
TREDUCE_VEC16(float)
TREDUCE_VEC16(double)
TREDUCE_VEC16(int8_t)
TREDUCE_VEC16(uint8_t)
TREDUCE_VEC16(int16_t)
TREDUCE_VEC16(int32_t)
TREDUCE_VEC16(int64_t)
#undef TREDUCE_VEC16

#if TREDUCE_SIMD_X86
// A 16-byte vector moved down by kBytes bytes (zeros shifted in).
template <int kBytes, class V>
[[gnu::always_inline]] inline V shifted(const V& v) {
  return bit_cast_vec<V>(_mm_srli_si128(bit_cast_vec<__m128i>(v), kBytes));
}
#endif

// The largest (kMax) or smallest lane of v, as a tree: the vector's halves against each other
// down to 16 bytes, then (x86) against itself shifted down by 8, 4, ... bytes. (A chain of a
// compare a lane, and GCC's code for a tree over arrays or shuffles by masks it built at run
// time, were most of the time of short rows.)
template <bool kMax, class V>
[[gnu::always_inline]] inline auto fold_extremum(const V& v) {
  using T = std::remove_reference_t<decltype(V{}[0])>;
  [[maybe_unused]] constexpr int kW = int(sizeof(V) / sizeof(T));
  const auto pick = [](const auto& a, const auto& b) -> std::decay_t<decltype(a)> {
    return kMax ? (b > a ? b : a) : (b < a ? b : a);
  };
  if constexpr (sizeof(V) > 16) {
    static_assert(sizeof(V) == 32, "a 32-byte vector");
    using H = typename Vec16<T>::type;
    H a, b;
    std::memcpy(&a, &v, sizeof a);
    std::memcpy(&b, reinterpret_cast<const char*>(&v) + sizeof a, sizeof b);
    return fold_extremum<kMax>(pick(a, b));
  } else {
#if TREDUCE_SIMD_X86  // lane j against lane j + w: the vector shifted down by w lanes' bytes
    static_assert(sizeof(V) == 16, "a 16-byte vector");
    V r = pick(v, shifted<8>(v));
    if constexpr (sizeof(T) <= 4) r = pick(r, shifted<4>(r));
    if constexpr (sizeof(T) <= 2) r = pick(r, shifted<2>(r));
    if constexpr (sizeof(T) == 1) r = pick(r, shifted<1>(r));
    return T(r[0]);
#else
    T r = v[0];
    for (int j = 1; j < kW; ++j) r = kMax ? (v[j] > r ? v[j] : r) : (v[j] < r ? v[j] : r);
    return r;
#endif
  }
}

template <class L, int kWhich>
[[gnu::always_inline]] inline auto extremum_run(const typename L::In* x, int64_t n) {
  using V = typename L::V;
  using T = std::remove_reference_t<decltype(V{}[0])>;
  using M = decltype(V{} != V{});
  constexpr int kW = int(sizeof(V) / sizeof(T)), kVecs = kWhich == 2 ? 2 : 4;
  constexpr bool kLo = kWhich != 1, kHi = kWhich != 0, kFloat = std::is_floating_point_v<T>;
  constexpr T kTop = kFloat ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
  constexpr T kBottom = kFloat ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  // One NaN mask for all the vectors (an array of them was zeroed through memory on every call:
  // a cost a row of 128 elements felt).
  V lo[kVecs], hi[kVecs];
  M nan = M{};
  for (int k = 0; k < kVecs; ++k) {
    lo[k] = V{} + kTop;
    hi[k] = V{} + kBottom;
  }
  int64_t i = 0;
  for (; i + kVecs * kW <= n; i += kVecs * kW)
    for (int k = 0; k < kVecs; ++k) take_extrema<kLo, kHi, kFloat>(lo[k], hi[k], nan, L::load(x + i + k * kW));
  for (; i + kW <= n; i += kW) take_extrema<kLo, kHi, kFloat>(lo[0], hi[0], nan, L::load(x + i));
  if (i < n && n >= kW) {
    // The last vector of the run, over elements already taken (extrema do not mind): the copy
    // below made every row's tail a store-to-load forwarding stall, amax over rows of 33 of (952,
    // 33) float32 18.3 us on one thread against 4.2 for rows of 32.
    take_extrema<kLo, kHi, kFloat>(lo[0], hi[0], nan, L::load(x + n - kW));
  } else if (i < n) {
    typename L::In pad[kW];
    std::fill(pad, pad + kW, x[n - 1]);
    std::memcpy(pad, x + i, (n - i) * sizeof pad[0]);
    take_extrema<kLo, kHi, kFloat>(lo[0], hi[0], nan, L::load(pad));
  }
  for (int k = 1; k < kVecs; ++k) {  // vectors first: rows of 128 elements end here
    lo[0] = lo[k] < lo[0] ? lo[k] : lo[0];
    hi[0] = hi[k] > hi[0] ? hi[k] : hi[0];
  }
  // Then the lanes, as trees (a chain of kW compares was most of a row of 128's time).
  if constexpr (kFloat) {
    if (any_lane(nan)) return Extrema<T>{std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::quiet_NaN()};
  }
  return Extrema<T>{kLo ? fold_extremum<false>(lo[0]) : kTop, kHi ? fold_extremum<true>(hi[0]) : kBottom};
}

// Extrema over `rows` rows of `width` adjacent columns (row r at x + r * ld) into out[0, width):
// 16 rows at a time across all the columns where rows are long (long reads of each row), a
// block of 128 bytes of columns in registers for the group's rows, each lane `v > m ? v : m` and a NaN mask as
// extremum_run's; between groups the extrema wait in lo[] and hi[], a lane that saw a NaN holds
// NaN, which no compare replaces. (The generic operator's compares stayed scalar: amax over
// (65536, 128) dim 0 on 16 Xeon threads at 0.68-0.77x torch.amax's speed; all the rows of a
// block before the next block read 64 bytes of each row, half torch's speed on (4096, 4096)
// bfloat16.)
template <class L, int kWhich, int kVecs, class T>
[[gnu::always_inline]] inline void extremum_group(const typename L::In* x, int64_t ld, int64_t rows, T* lo_at,
                                                  T* hi_at) {
  using V = typename L::V;
  using M = decltype(V{} != V{});
  constexpr int kW = int(sizeof(V) / sizeof(T));
  constexpr bool kLo = kWhich != 1, kHi = kWhich != 0, kFloat = std::is_floating_point_v<T>;
  V lo[kVecs], hi[kVecs];
  M nan[kVecs];
  for (int k = 0; k < kVecs; ++k) {
    lo[k] = load_as<V>(lo_at + k * kW);
    hi[k] = load_as<V>(hi_at + k * kW);
    nan[k] = M{};
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int k = 0; k < kVecs; ++k) take_extrema<kLo, kHi, kFloat>(lo[k], hi[k], nan[k], L::load(x + r * ld + k * kW));
  for (int k = 0; k < kVecs; ++k) {
    if constexpr (kFloat) {  // this group's NaNs (compares leave a NaN extremum alone after)
      const V q = V{} + std::numeric_limits<T>::quiet_NaN();
      lo[k] = nan[k] ? q : lo[k];
      hi[k] = nan[k] ? q : hi[k];
    }
    std::memcpy(lo_at + k * kW, &lo[k], sizeof(V));
    std::memcpy(hi_at + k * kW, &hi[k], sizeof(V));
  }
}

template <class L, int kWhich, class T = std::remove_reference_t<decltype(typename L::V{}[0])>>
void extremum_columns(const typename L::In* x, int64_t ld, int64_t rows, int64_t width, Extrema<T>* out) {
  using In = typename L::In;
  constexpr int kW = int(sizeof(typename L::V) / sizeof(T));
  constexpr int kVecs = kWhich == 2 ? 64 / kBytes : 128 / kBytes;
  constexpr bool kFloat = std::is_floating_point_v<T>;
  constexpr T kTop = kFloat ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
  constexpr T kBottom = kFloat ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  // The columns in whole vectors; the last ones (fewer than a vector) padded with copies of the
  // row's last column, which change no extremum, kTailRows rows at a time. Up to kStackColumns
  // columns the extrema stay on the stack: three heap blocks a call were a third of the time of
  // narrow columns, a call for each outer index (amax over dim -2 of (49, 1023, 3, 5) float16,
  // one thread: malloc and free 14% of the samples, this function 12%).
  constexpr int64_t kStackColumns = 64, kTailRows = 16;
  const int64_t padded = (width + kW - 1) / kW * kW;
  T lo_stack[kStackColumns], hi_stack[kStackColumns];
  std::vector<T> lo_heap, hi_heap;
  T* lo = lo_stack;
  T* hi = hi_stack;
  if (padded > kStackColumns) {
    lo_heap.resize(padded), hi_heap.resize(padded);
    lo = lo_heap.data(), hi = hi_heap.data();
  }
  std::fill(lo, lo + padded, kTop);
  std::fill(hi, hi + padded, kBottom);
  In tail[kTailRows * kW];
  const int64_t whole = width / kW * kW;
  // Rows of 4 KB or more 16 at a time; shorter ones (a segment of them fits L2) all at once.
  const int64_t group = width * int64_t(sizeof(In)) >= 4096 ? 16 : rows;
  for (int64_t r1 = 0; r1 < rows; r1 += group) {
    const int64_t m = std::min<int64_t>(group, rows - r1);
    const In* g = x + r1 * ld;
    int64_t j = 0;
    for (; j + kVecs * kW <= whole; j += kVecs * kW) extremum_group<L, kWhich, kVecs>(g + j, ld, m, &lo[j], &hi[j]);
    for (; j < whole; j += kW) extremum_group<L, kWhich, 1>(g + j, ld, m, &lo[j], &hi[j]);
    for (int64_t r0 = 0; whole < width && r0 < m; r0 += kTailRows) {
      const int64_t n = std::min(kTailRows, m - r0);
      for (int64_t r = 0; r < n; ++r) {
        const In* row = g + (r0 + r) * ld;
        std::fill(tail + r * kW, tail + (r + 1) * kW, row[width - 1]);
        std::memcpy(tail + r * kW, row + whole, (width - whole) * sizeof(In));
      }
      extremum_group<L, kWhich, 1>(tail, kW, n, &lo[whole], &hi[whole]);
    }
  }
  for (int64_t j = 0; j < width; ++j) out[j] = {lo[j], hi[j]};
}

// extremum_group for one extremum, into at[0, kVecs * kW) itself: taken from `at` when `first`
// is false, else from the identity in registers.
template <class L, int kWhich, int kVecs, class T>
[[gnu::always_inline]] inline void extremum_group_to(const typename L::In* x, int64_t ld, int64_t rows, T* at,
                                                     bool first) {
  using V = typename L::V;
  using M = decltype(V{} != V{});
  constexpr int kW = int(sizeof(V) / sizeof(T));
  constexpr bool kFloat = std::is_floating_point_v<T>;
  constexpr T kTop = kFloat ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
  constexpr T kBottom = kFloat ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  V e[kVecs];
  M nan[kVecs];
  for (int k = 0; k < kVecs; ++k) {
    e[k] = first ? V{} + (kWhich ? kBottom : kTop) : load_as<V>(at + k * kW);
    nan[k] = M{};
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int k = 0; k < kVecs; ++k)
      take_extrema<kWhich == 0, kWhich == 1, kFloat>(e[k], e[k], nan[k], L::load(x + r * ld + k * kW));
  for (int k = 0; k < kVecs; ++k) {
    if constexpr (kFloat) e[k] = nan[k] ? V{} + std::numeric_limits<T>::quiet_NaN() : e[k];
    std::memcpy(at + k * kW, &e[k], sizeof(V));
  }
}

// extremum_columns for one extremum, into out[0, width) directly, its first group of rows from
// the identity in registers: no lo[] and hi[] on the heap to fill, load and store, nor Extrema
// to copy out, which cost most where rows are few (2 threads: amax over dim 2 of (14, 256, 3,
// 5120) float32 40-42 ms, torch 34-37, 0.84-0.90x; amin over dim 1 of (1025, 8, 1024) 1.0-1.8
// ms, 0.52-0.73x torch's speed; with reduce_cpu.cpp writing the results here, 0.98-1.05x and
// 1.02-1.10x). The same groups and lanes, so the same values. Columns past the last whole vector: the
// vector of the last kW columns, overlapping the one before (an extremum taken twice is the
// same); fewer than kW columns, a padded copy as extremum_columns.
template <class L, int kWhich, class T = std::remove_reference_t<decltype(typename L::V{}[0])>>
void extremum_columns_to(const typename L::In* x, int64_t ld, int64_t rows, int64_t width, T* out) {
  using In = typename L::In;
  constexpr int kW = int(sizeof(typename L::V) / sizeof(T));
  constexpr int kVecs = 128 / kBytes;
  if (width < kW) {
    Extrema<T> e[kW];
    extremum_columns<L, kWhich>(x, ld, rows, width, e);
    for (int64_t j = 0; j < width; ++j) out[j] = kWhich ? e[j].max : e[j].min;
    return;
  }
  const int64_t whole = width / kW * kW;
  const int64_t group = width * int64_t(sizeof(In)) >= 4096 ? 16 : rows;
  for (int64_t r1 = 0; r1 < rows; r1 += group) {
    const int64_t m = std::min<int64_t>(group, rows - r1);
    const In* g = x + r1 * ld;
    const bool first = r1 == 0;
    int64_t j = 0;
    for (; j + kVecs * kW <= whole; j += kVecs * kW) extremum_group_to<L, kWhich, kVecs>(g + j, ld, m, out + j, first);
    for (; j < whole; j += kW) extremum_group_to<L, kWhich, 1>(g + j, ld, m, out + j, first);
    if (whole < width) extremum_group_to<L, kWhich, 1>(g + width - kW, ld, m, out + width - kW, first);
  }
}

// TypeKernels' extremum: `rows` runs, the r-th at x + r * ld (short rows a call, as the sums).
template <class L, int kWhich, class T = std::remove_reference_t<decltype(typename L::V{}[0])>>
void extremum_rows(const typename L::In* x, int64_t n, int64_t rows, int64_t ld, Extrema<T>* out) {
  for (int64_t r = 0; r < rows; ++r) out[r] = extremum_run<L, kWhich>(x + r * ld, n);
}

// The first position in a run of an element equal to v (of a NaN, when v is NaN); n if none.
template <class L, class T>
inline int64_t find_run(const typename L::In* x, int64_t n, T v) {
  using V = typename L::V;
  constexpr int kW = int(sizeof(V) / sizeof(T));
  const bool nan = v != v;
  const auto first_hit = [&](const V& e) -> int {
    const auto hit = nan ? e != e : e == v;
    for (int j = 0; j < kW; ++j)
      if (hit[j]) return j;
    return kW;
  };
  const auto any_hit = [&](const V& e) {
    const auto hit = nan ? e != e : e == v;
    auto any = hit[0];
    for (int j = 1; j < kW; ++j) any |= hit[j];
    return any != 0;
  };
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const V e = L::load(x + i);
    if (any_hit(e)) return i + first_hit(e);
  }
  if (i < n && n >= kW) {  // the last vector (its elements before i hold no hit), as extremum_run's
    const V e = L::load(x + n - kW);
    return any_hit(e) ? n - kW + first_hit(e) : n;
  }
  if (i < n) {
    typename L::In pad[kW];
    std::fill(pad, pad + kW, x[n - 1]);
    std::memcpy(pad, x + i, (n - i) * sizeof pad[0]);
    return std::min(n, i + first_hit(L::load(pad)));
  }
  return n;
}

// logsumexp of a run: its maximum m (extremum_run), then the sum of exp(x - m) in Cascade's
// lanes and levels, exp taken in the lanes by exp_nonpositive. One exponential an element and no
// rescaling (the generic operator's running maximum took a scalar std::exp an element and
// rescaled for every group of 16: 0.33-0.44x torch.logsumexp's speed on bfloat16).
// exp(x) for x <= 0 (NaN never reaches it): x = k ln2 + r, |r| <= ln2 / 2, k rounded by adding
// and subtracting 1.5 * 2^p (which also leaves k's bits at the bottom of the sum's mantissa, for
// 2^k); ln2 in two parts, the first with enough trailing zeros that k times it is exact; then a
// polynomial in r. float: Cephes' expf polynomial (relative error about 1e-7); double: the Taylor
// series to r^13 (its remainder under 5e-18). Below exp's normal range (x < -87 for float, -708
// for double) the result is 0: beside the maximum's own term, exactly 1, nothing that small
// changes a sum. Only adds and multiplies, no FMA: the same bits on both ISA builds.
template <class V>
[[gnu::always_inline]] inline V exp_nonpositive(V x) {
  using T = std::remove_reference_t<decltype(V{}[0])>;
  using U = std::conditional_t<std::is_same_v<T, float>, vu32, vu64>;
  constexpr bool kFloat = std::is_same_v<T, float>;
  constexpr T kLowest = kFloat ? T(-87) : T(-708);
  constexpr T kRound = kFloat ? T(12582912.0) : T(6755399441055744.0);  // 1.5 * 2^23, 1.5 * 2^52
  constexpr T kLn2Hi = kFloat ? T(0.693359375) : T(6.93147180369123816490e-01);
  constexpr T kLn2Lo = kFloat ? T(-2.12194440e-4) : T(1.90821492927058770002e-10);
  const auto under = x < kLowest;
  x = under ? V{} : x;
  const V t = x * T(1.44269504088896340736) + kRound;
  const V k = t - kRound;
  const V r = (x - k * kLn2Hi) - k * kLn2Lo;
  V p;
  if constexpr (kFloat) {
    p = V{} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = (p * (r * r) + r) + 1.0f;
  } else {
    p = V{} + 1.0 / 6227020800.0;  // 1 / 13!
    for (double f : {479001600.0, 39916800.0, 3628800.0, 362880.0, 40320.0, 5040.0, 720.0, 120.0, 24.0,
                     6.0, 2.0, 1.0, 1.0})
      p = p * r + 1.0 / f;
  }
  // k + bias, from t's low mantissa bits (k + bias is in 1 .. bias), moved to the exponent.
  constexpr int kMantissa = kFloat ? 23 : 52;
  constexpr std::remove_reference_t<decltype(U{}[0])> kBias = kFloat ? 127 : 1023;
  const U scale = (bit_cast_vec<U>(t) + kBias) << kMantissa;
  const V e = p * bit_cast_vec<V>(scale);
  return under ? V{} : e;
}

template <class L>
inline auto exp_sum_run(const typename L::In* x, int64_t n) {
  using C = Cascade<L>;
  using V = typename C::V;
  using A = typename C::A;
  constexpr int kVecs = C::kVecs, kWidth = C::kWidth;
  constexpr int64_t kRow = C::kRow;
  const A m = extremum_run<L, 1>(x, n).max;
  // An infinite or NaN maximum is logsumexp's result whatever the sum (-inf: every element is
  // -inf, the sum 0).
  if (!(m - m == 0)) return ExpSum<A>{m, m == -std::numeric_limits<A>::infinity() ? A(0) : A(1)};
  const V mv = V{} + m;
  V top[kVecs];
  for (V& v : top) v = V{};
  const int64_t rows = n / kRow;
  cascade_levels<V, kVecs>(
      rows,
      [x, &mv](int64_t r, V(&low)[kVecs]) {
        for (int k = 0; k < kVecs; ++k) low[k] += exp_nonpositive(L::load(x + r * kRow + k * kWidth) - mv);
      },
      [&top](const V(&mid)[kVecs]) {
        for (int k = 0; k < kVecs; ++k) top[k] += mid[k];
      });
  tail_row<L>(x, n, rows, [&](int k, const V& e, const auto& keep) { top[k] += keep ? exp_nonpositive(e - mv) : V{}; });
  return ExpSum<A>{m, lane_tree(top)};
}

// exp_sum_run of a run of n <= kRow elements (Cascade's row), the same bits: the lanes past n
// taken as -inf (no maximum, no NaN, exp 0, as the zero-padded row's masked lanes) and only the
// vectors that hold elements computed (the others' exps are 0). Inlined a block of rows a call,
// without the copy into a padded row nor the vectors past n: logsumexp over the last dim of
// (40, 80, 128, 16) float32 took 19.3-20.5 ms on 2 threads through the generic loop (a scalar
// exp an element), torch 11.7-12.4; this way 5.5 (2.1-2.2x torch's speed).
template <class L>
[[gnu::always_inline]] inline auto exp_sum_short(const typename L::In* x, int64_t n) {
  using C = Cascade<L>;
  using V = typename C::V;
  using A = typename C::A;
  using M = decltype(V{} != V{});
  constexpr int kVecs = C::kVecs, kWidth = C::kWidth;
  constexpr A kInf = std::numeric_limits<A>::infinity();
  V lane;
  for (int j = 0; j < kWidth; ++j) lane[j] = A(j);
  V v[kVecs], hi = V{} - kInf;
  M nan = M{};
  for (int k = 0; k < kVecs; ++k) {
    v[k] = hi;
    if (k * kWidth < n) {
      const V e = L::load(x + k * kWidth);
      v[k] = lane + A(k * kWidth) < A(n) ? e : V{} - kInf;
      hi = v[k] > hi ? v[k] : hi;
      nan |= v[k] != v[k];
    }
  }
  const A m = any_lane(nan) ? std::numeric_limits<A>::quiet_NaN() : fold_extremum<true>(hi);
  if (!(m - m == 0)) return ExpSum<A>{m, m == -kInf ? A(0) : A(1)};
  const V mv = V{} + m;
  V top[kVecs];
  for (int k = 0; k < kVecs; ++k) top[k] = k * kWidth < n ? exp_nonpositive(v[k] - mv) : V{};
  return ExpSum<A>{m, lane_tree(top)};
}

// TypeKernels' exp_sum_rows. A run of at most kRow elements is read as whole vectors from the
// run itself where the tensor goes on past the last one (a later run of this call ends beyond
// it), else from a copy.
template <class L, class A = std::remove_reference_t<decltype(typename L::V{}[0])>>
void exp_sum_rows(const typename L::In* x, int64_t n, int64_t rows, int64_t ld, ExpSum<A>* out) {
  using C = Cascade<L>;
  using In = typename L::In;
  if (n > C::kRow) {
    for (int64_t r = 0; r < rows; ++r) out[r] = exp_sum_run<L>(x + r * ld, n);
    return;
  }
  const int64_t over = (n + C::kWidth - 1) / C::kWidth * C::kWidth - n;
  const int64_t direct = over == 0 ? rows : ld > 0 ? rows - (over + ld - 1) / ld : 0;
  int64_t r = 0;
  for (; r < direct; ++r) out[r] = exp_sum_short<L>(x + r * ld, n);
  if (r < rows) {
    In pad[C::kRow] = {};
    for (; r < rows; ++r) {
      std::memcpy(pad, x + r * ld, n * sizeof(In));
      out[r] = exp_sum_short<L>(pad, n);
    }
  }
}

// logsumexp over `rows` rows of `width` adjacent columns (the r-th row's at x + r * ld), into
// out[0, width): a block of columns at a time, its maximum over the rows in vector lanes (a NaN
// mask beside, as extremum_run's), then over the same rows again (a block of 4 vectors by 256
// rows is 32 KB: from L1) the sum of exp(x - max), 16 rows into a first level. Lanes with an infinite or NaN maximum get
// exp_sum_run's {max, 1 or 0}. (The generic operator: a scalar exp an element and a rescaling
// whenever a column's maximum grew.)
template <class L, int kVecs>
[[gnu::always_inline]] inline void exp_sum_block(const typename L::In* x, int64_t ld, int64_t rows,
                                                  ExpSum<std::remove_reference_t<decltype(typename L::V{}[0])>>* out) {
  using V = typename L::V;
  using A = std::remove_reference_t<decltype(V{}[0])>;
  using M = decltype(V{} != V{});
  constexpr int kW = int(sizeof(V) / sizeof(A));
  V m[kVecs], s[kVecs];
  M nan[kVecs];
  for (int k = 0; k < kVecs; ++k) {
    m[k] = V{} - std::numeric_limits<A>::infinity();
    s[k] = V{};
    nan[k] = M{};
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int k = 0; k < kVecs; ++k) {
      const V v = L::load(x + r * ld + k * kW);
      m[k] = v > m[k] ? v : m[k];
      nan[k] |= v != v;
    }
  for (int64_t r1 = 0; r1 < rows; r1 += 16) {  // 16 rows at a time, then into s (as a cascade)
    V low[kVecs];
    for (V& v : low) v = V{};
    for (int64_t r = r1; r < std::min(rows, r1 + 16); ++r)
      for (int k = 0; k < kVecs; ++k) low[k] += exp_nonpositive(L::load(x + r * ld + k * kW) - m[k]);
    for (int k = 0; k < kVecs; ++k) s[k] += low[k];
  }
  for (int k = 0; k < kVecs; ++k)
    for (int j = 0; j < kW; ++j) {
      const A mj = nan[k][j] ? std::numeric_limits<A>::quiet_NaN() : m[k][j];
      const bool finite = mj - mj == 0;
      out[k * kW + j] = {mj, finite ? s[k][j] : mj == -std::numeric_limits<A>::infinity() ? A(0) : A(1)};
    }
}

template <class L, class A = std::remove_reference_t<decltype(typename L::V{}[0])>>
void exp_sum_columns(const typename L::In* x, int64_t ld, int64_t rows, int64_t width, ExpSum<A>* out) {
  using In = typename L::In;
  constexpr int kW = int(sizeof(typename L::V) / sizeof(A));
  constexpr int kVecs = 128 / kBytes;
  int64_t j = 0;
  for (; j + kVecs * kW <= width; j += kVecs * kW) exp_sum_block<L, kVecs>(x + j, ld, rows, out + j);
  for (; j + kW <= width; j += kW) exp_sum_block<L, 1>(x + j, ld, rows, out + j);
  if (j < width) {  // the last columns, copied row by row into one padded vector's worth
    // (on the stack up to kStackRows rows: narrow columns come a call an outer index, and a
    // heap block a call was most of their time, as extremum_columns')
    constexpr int64_t kStackRows = 64;
    In pad_stack[kStackRows * kW];
    std::vector<In> pad_heap;
    In* pad = pad_stack;
    if (rows > kStackRows) pad_heap.resize(rows * kW), pad = pad_heap.data();
    std::fill(pad, pad + rows * kW, In());
    for (int64_t r = 0; r < rows; ++r) std::memcpy(pad + r * kW, x + r * ld + j, (width - j) * sizeof(In));
    ExpSum<A> t[kW];
    exp_sum_block<L, 1>(pad, kW, rows, t);
    std::copy(t, t + (width - j), out + j);
  }
}

// TypeKernels' nonzero: lanes of the element's width count the elements whose bits (less a
// float's sign) are not all zero, subtracting each compare's all-ones mask; the four vectors of
// a row are added and their lanes summed every kRun rows, before an 8- or 16-bit lane can wrap.
// Explicit vectors: the generic loop's bfloat16 x != 0 was vectorised by GCC 12 but not by GCC
// 13.3 (any and all over bfloat16 rows of 128 2.4-3x slower, below torch's speed).
using vn8 = uint8_t __attribute__((vector_size(kBytes)));
using vn16 = uint16_t __attribute__((vector_size(kBytes)));
template <class In, bool kFloat>
void nonzero_rows(const In* x, int64_t n, int64_t rows, int64_t ld, int64_t* out) {
  using U = std::conditional_t<sizeof(In) == 1, uint8_t,
                               std::conditional_t<sizeof(In) == 2, uint16_t,
                                                  std::conditional_t<sizeof(In) == 4, uint32_t, uint64_t>>>;
  using V = std::conditional_t<sizeof(In) == 1, vn8,
                               std::conditional_t<sizeof(In) == 2, vn16, std::conditional_t<sizeof(In) == 4, vu32, vu64>>>;
  constexpr int kWidth = int(kBytes / sizeof(U)), kVecs = 4;
  constexpr int64_t kRow = int64_t(kVecs) * kWidth;
  constexpr U kMask = kFloat ? U(U(~U(0)) >> 1) : U(~U(0));
  constexpr int64_t kRun = sizeof(U) == 1 ? 255 / kVecs : 65535 / kVecs;
  for (int64_t r = 0; r < rows; ++r) {
    const In* p = x + r * ld;
    const int64_t vrows = n / kRow;
    int64_t count = 0;
    for (int64_t b = 0; b < vrows; b += kRun) {
      V acc[kVecs];
      for (V& v : acc) v = V{};
      const int64_t e = std::min(vrows, b + kRun);
      for (int64_t i = b; i < e; ++i)
        for (int k = 0; k < kVecs; ++k) {
          const V v = load_as<V>(p + i * kRow + k * kWidth);
          acc[k] -= bit_cast_vec<V>((v & kMask) != 0);
        }
      const V all = (acc[0] + acc[1]) + (acc[2] + acc[3]);
      for (int j = 0; j < kWidth; ++j) count += all[j];
    }
    for (int64_t i = vrows * kRow; i < n; ++i) {
      U u;
      std::memcpy(&u, p + i, sizeof u);
      count += (u & kMask) != 0;
    }
    out[r] = count;
  }
}

// TypeKernels::sum_columns, nansum_columns (L: NanAsZero); with kProduct, prod_columns (each
// group of 16 rows' product into out: the same lanes in the same order on both ISA builds).
template <class L, class S = std::remove_reference_t<decltype(typename L::V{}[0])>, bool kProduct = false>
void sum_columns(const typename L::In* x, int64_t ld, int64_t rows, int64_t width, S* out) {
  using V = typename L::V;
  using In = typename L::In;
  constexpr int kW = int(sizeof(V) / sizeof(S)), kVecs = 128 / kBytes;  // 128 bytes of sums a block
  constexpr int64_t kStep = 16;
  constexpr S kIdentity = kProduct ? S(1) : S(0);
  const auto combine = [](V& a, const V& b) {
    if constexpr (kProduct) a *= b;
    else a += b;
  };
  std::fill(out, out + width, kIdentity);
  const int64_t whole = width / kW * kW;
  // Rows [0, direct) can be read a whole vector past `whole`: row r + j (j = ceil(over / ld)
  // rows on) ends `over` elements or more past that vector's last lane.
  const int64_t over = whole + kW - width;
  const int64_t direct = ld > 0 ? rows - (over + ld - 1) / ld : 0;
  for (int64_t r1 = 0; r1 < rows; r1 += kStep) {
    const int64_t m = std::min(kStep, rows - r1);
    const In* g = x + r1 * ld;
    const auto block = [&](int64_t j, auto vecs) {
      constexpr int kN = decltype(vecs)::value;
      V lo[kN];
      for (V& v : lo) v = V{} + kIdentity;
      for (int64_t r = 0; r < m; ++r)
        for (int k = 0; k < kN; ++k) combine(lo[k], L::load(g + r * ld + j + k * kW));
      for (int k = 0; k < kN; ++k) {
        V acc = load_as<V>(out + j + k * kW);
        combine(acc, lo[k]);
        std::memcpy(out + j + k * kW, &acc, sizeof acc);
      }
    };
    int64_t j = 0;
    for (; j + kVecs * kW <= whole; j += kVecs * kW) block(j, std::integral_constant<int, kVecs>{});
    for (; j < whole; j += kW) block(j, std::integral_constant<int, 1>{});
    if (whole < width) {  // the last columns, fewer than a vector
      // A whole vector from the row where the tensor goes on past it (a later row of this call
      // ends at or beyond its last lane; the lanes past the width are read and dropped), else
      // from a zero-padded copy. A copy every row (a memcpy call each) had kept columns of fewer
      // than 32 outputs in reduce_cpu.cpp's generic loop (sum over dim 1 of (196, 80, 7) float32
      // there: 0.67-0.80x torch's speed on 2 threads; this way 1.6-2.2x).
      int64_t r = 0;
      V lo = V{} + kIdentity;
      for (; r < std::min(m, direct - r1); ++r) combine(lo, L::load(g + r * ld + whole));
      for (; r < m; ++r) {
        In pad[kW] = {};
        std::memcpy(pad, g + r * ld + whole, (width - whole) * sizeof(In));
        combine(lo, L::load(pad));
      }
      for (int64_t c = 0; c < width - whole; ++c) out[whole + c] = kProduct ? out[whole + c] * lo[c] : out[whole + c] + lo[c];
    }
  }
}

// SumKernels::f16_from_f32. One element: the float is scaled so that its own addition to a
// power of two rounds it to the half's precision (the FP16 library's conversion, as c10's);
// branch-free, so that the baseline build's loop vectorises too. AVX2 builds: F16C's
// conversion with round-to-nearest-even, the same bits.
[[gnu::always_inline]] inline uint16_t f16_bits(float f) {
  uint32_t w;
  std::memcpy(&w, &f, sizeof w);
  const uint32_t twice = w + w, sign = w & 0x80000000u;
  float a;
  const uint32_t abs = w & 0x7fffffffu;
  std::memcpy(&a, &abs, sizeof a);
  float base = (a * 0x1.0p+112f) * 0x1.0p-110f;  // past the range: infinity
  uint32_t bias = twice & 0xff000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;  // subnormal halves: a fixed exponent
  const uint32_t scale_bits = (bias >> 1) + 0x07800000u;
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  base = scale + base;
  uint32_t bits;
  std::memcpy(&bits, &base, sizeof bits);
  const uint32_t nonsign = ((bits >> 13) & 0x7c00u) + (bits & 0x0fffu);
  return uint16_t((sign >> 16) | (twice > 0xff000000u ? 0x7e00u : nonsign));
}

inline void f16_from_f32(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
#if TREDUCE_SIMD_AVX2
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) out[i] = f16_bits(x[i]);
}

inline void f32_from_f16(const uint16_t* x, int64_t n, float* out) {
  constexpr int64_t kN = kBytes / sizeof(float);
  int64_t i = 0;
  for (; i + kN <= n; i += kN) {
    const vf32 v = LoadF16::load(x + i);
    std::memcpy(out + i, &v, sizeof v);
  }
#if TREDUCE_SIMD_AVX2
  for (; i < n; ++i) out[i] = _cvtsh_ss(x[i]);
#else
  if (i < n) {  // the tail through a zero-padded vector of its own
    uint16_t h[kN] = {};
    std::memcpy(h, x + i, sizeof(uint16_t) * (n - i));
    const vf32 v = LoadF16::load(h);
    std::memcpy(out + i, &v, sizeof(float) * (n - i));
  }
#endif
}

// A type's table: L loads its sums' elements, LE its extrema's (int64 sums wrap in unsigned
// lanes; its extrema compare signed ones); the sums, nansum, sumsq, sumabs and exact entries only where
// given.
template <class L, class LE, class S, bool kSums, bool kFloat>
constexpr auto type_kernels(void (*exact)(const typename LE::In*, int64_t, ExactAcc*) = nullptr,
                            int (*exact_short)(const typename LE::In*, int64_t, double*, bool*) = nullptr,
                            int (*exact_columns)(const typename LE::In*, int64_t, int64_t, double*, bool*,
                                                 ExactColumnsSeen*) = nullptr) {
  using In = typename LE::In;
  using E = std::remove_reference_t<decltype(typename LE::V{}[0])>;
  TypeKernels<In, S, E> t{};
  if constexpr (kSums) t.sum = &Cascade<L>::template rows<S>;
  if constexpr (kSums && !kFloat) t.sum_columns = &sum_columns<L, S>;  // int64: wrapping, any order
  if constexpr (kFloat) {
    t.nansum = &Cascade<NanAsZero<L>>::template rows<S>;
    t.sumsq = &Cascade<Squared<L>>::template rows<S>;
    t.sumabs = &Cascade<Magnitude<L>>::template rows<S>;
    t.prod = &Product<L>::template rows<S>;
    t.sum_columns = &sum_columns<L, S>;
    t.nansum_columns = &sum_columns<NanAsZero<L>, S>;
    t.prod_columns = &sum_columns<L, S, true>;
  }
  t.exact = exact;
  t.exact_short = exact_short;
  t.exact_columns = exact_columns;
  t.extremum[0] = &extremum_rows<LE, 0>;
  t.extremum[1] = &extremum_rows<LE, 1>;
  t.extremum[2] = &extremum_rows<LE, 2>;
  t.extremum_columns[0] = &extremum_columns<LE, 0>;
  t.extremum_columns[1] = &extremum_columns<LE, 1>;
  t.extremum_columns[2] = &extremum_columns<LE, 2>;
  t.extremum_columns_to[0] = &extremum_columns_to<LE, 0>;
  t.extremum_columns_to[1] = &extremum_columns_to<LE, 1>;
  t.find = &find_run<LE, E>;
  t.nonzero = &nonzero_rows<In, kFloat>;
  if constexpr (kFloat) {
    t.exp_sum = &exp_sum_run<L>;
    t.exp_sum_rows = &exp_sum_rows<L>;
    t.exp_sum_columns = &exp_sum_columns<L>;
    t.deviations = &Deviations<L>::run;
  }
  return t;
}

inline SumKernels kernels() {
  SumKernels k{};
  namespace xb = exact_blocks;
  k.f32 = type_kernels<LoadF32, LoadF32, float, true, true>(&xb::run<xb::F32, vf64>, &xb::exact_short<xb::F32, vf64>,
                                                            &xb::exact_columns<xb::F32, vf64>);
  k.f64 = type_kernels<LoadF64, LoadF64, double, true, true>(&xb::run<xb::F64, vf64>, &xb::exact_short<xb::F64, vf64>,
                                                             &xb::exact_columns<xb::F64, vf64>);
  k.f16 = type_kernels<LoadF16, LoadF16, float, true, true>(&xb::run<xb::F16, vf32>, &xb::exact_short<xb::F16, vf32>,
                                                            &xb::exact_columns<xb::F16, vf32>);
  k.bf16 = type_kernels<LoadBF16, LoadBF16, float, true, true>(
      &xb::run<xb::BF16, vf32>, &xb::exact_short<xb::BF16, vf32>, &xb::exact_columns<xb::BF16, vf32>);
  k.i64 = type_kernels<LoadI64, LoadI64Signed, int64_t, true, false>();
  k.i32 = type_kernels<LoadI32, LoadI32, int64_t, false, false>();
  k.i16 = type_kernels<LoadI16, LoadI16, int64_t, false, false>();
  k.i8 = type_kernels<LoadI8, LoadI8, int64_t, false, false>();
  k.u8 = type_kernels<LoadU8, LoadU8, int64_t, false, false>();
  k.f32_wide = &sum_f32_wide;
  k.f64_compensated = &sum_f64_compensated;
  k.f16_from_f32 = &f16_from_f32;
  k.f32_from_f16 = &f32_from_f16;
  return k;
}
