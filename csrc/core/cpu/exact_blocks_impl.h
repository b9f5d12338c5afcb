// variant="exact" over a contiguous run into an exact accumulator (exact.h), at close to the
// plain sum's speed: included by sum_simd_impl.h in each instruction set's namespace.
//
// The run is cut into blocks of kBlock elements (L1-resident). For each block:
//   pass 1 (stats): the largest |x| and the smallest nonzero |x|, as integer bit patterns (one
//     load, an and, a max and a min a vector; the next block prefetched). From them: every
//     |x| < 2^T, and every x is a multiple of 2^G (G: the ulp of the smallest nonzero element).
//     Infinities and NaN show as the top exponent: their flags are set and the block goes on
//     without them (strip_specials).
//   pass 2 (windows): each element is cut by S "split" levels and a "direct" level, all adds in
//     vector lanes of precision P (53 in double lanes, 24 in float lanes), none rounding:
//       level s (sigma_s = 2^k_s):  t = r + sigma_s; q = t - sigma_s; hi_s += q; r = r - q
//       direct level:               lo += r
//     S is the smallest count that makes the direct level exact for this block (plan()).
//   flush: each level's lanes summed (exactly, by the same bounds) into one double, added to the
//     accumulator: S + 1 adds a block.
//
// Why every operation is exact (h = log2 of the adds a lane sum sees, N <= 2^h):
//   Split: sigma = 2^k normal, with k - 1 >= the lane format's smallest normal exponent, and
//   |r| <= 2^(k-h) (h >= 1). Then s = sigma + r lies in [2^(k-1), 2^k + 2^(k-1)], and so does
//   fl(s) (rounding is monotone, both ends representable): fl(s) is within a factor 2 of sigma,
//   so q = fl(s) - sigma is exact (Sterbenz). fl(s) >= 2^(k-1), a normal number, is a multiple
//   of 2^(k-P), so is q. r - q = s - fl(s) is the rounding error of one addition, representable,
//   so r' = r - q is exact, |r'| <= ulp(fl(s))/2 <= 2^(k-P). And |q| <= 2^(k-h) (sigma +- 2^(k-h)
//   are representable), so every partial sum of N q's is a multiple of 2^(k-P) of magnitude
//   <= 2^k = 2^P * 2^(k-P): representable, so hi += q is exact.
//   Levels chain: k_1 = T + h (|x| < 2^T), k_(s+1) = k_s - P + h (|r_s| <= 2^(k_s-P)).
//   Direct: after S splits, |r_S| <= 2^(T_S), T_S = T - S (P - h). If every q_s is a multiple of
//   2^G (true when k_S - P >= G, below), r_S = x - sum q_s is a multiple of 2^G, and N of them
//   sum within 2^(h + T_S): exact when h + T_S <= P + G. Taking S minimal: the condition failed
//   at S - 1, i.e. h + T_(S-1) = k_S > P + G, so k_S - P > G and all grids are multiples of 2^G.
//   Overflow: sigma_1 + x < 2^(T+h+1) needs T + h <= the lane's largest exponent.
//   Double lanes: h = log2(kBlock) counts all of the block's elements, so the horizontal sum of
//   the lanes is exact by the same bound. Float lanes (bfloat16, float16): h = HS counts one
//   lane's adds between moves of the float lanes into double lanes (every 2^HS rows, HS in 1..4
//   per block: the largest the range allows); the double lanes add those exactly (24 + 16 bits).
// Lanes per type: float32 and float64 in double lanes (a float32 element fills a float lane's
// precision, leaving no room); bfloat16 and float16 in float lanes, or double lanes where that is
// cheaper (wide ranges: one double split covers 42 bits, one float split 20).
// A NaN that float64's stats pass over makes the block's sums NaN: it is redone without it.
// Nothing depends on the order of the elements or the vector width: the flushed values are exact
// partial sums, and the accumulator's total is the exact sum (the same words as adding each
// element on its own, on every instruction set).
// Needs: no -ffast-math (the splits must not be simplified), round to nearest, and MXCSR without
// flush-to-zero or denormals-are-zero (torch.set_flush_denormal(True) sets them): run() keeps
// subnormals for the call (sum_simd.h's KeepSubnormals).
//
// Pass 1 of a block runs inside pass 2 of the block before it (exact_fast's pipeline): the next
// block's lines stream in from L3 while the windows' adds run, where a separate pass 1 stalled on
// memory and then left it idle during the adds.
//
// Reductions over dims: a run of at most one block (exact_short) and a group of adjacent strided
// columns, one a lane (exact_columns), hand their levels to the caller, which rounds them without
// an accumulator where their partial sums are exact doubles.
//
// Against auto's sums (2 cores of an Intel Xeon, L3-hot, 2^22 elements, N(0,1) and N(0,1) *
// 2^U(-20, 20), float16 2^U(-20, 4)): float32 1.28x, spread 2.06x; float64 1.36x, spread 1.62x;
// bfloat16 1.88x, spread 3.80x; float16 2.24x, spread 2.24x (docs/decisions.md, 2026-12-07).
// The one window a run before blocks: 13x for float32, 16-17x for the 16-bit floats.

namespace exact_blocks {

using vs32 = int32_t __attribute__((vector_size(kBytes)));
using vs16 = int16_t __attribute__((vector_size(kBytes)));
using vw16 = uint16_t __attribute__((vector_size(kBytes)));  // (vu16 is half a vector)

// ---------------------------------------------------------------------------------------------
// Input formats (bfloat16 and float16 as their uint16_t bit patterns): significand bits,
// exponent bias, the exponent field of infinities and NaN.
struct F32 {
  using In = float;
  static constexpr int kPrec = 24, kBias = 127, kTopExp = 255;
};
struct F64 {
  using In = double;
  static constexpr int kPrec = 53, kBias = 1023, kTopExp = 2047;
};
struct BF16 {
  using In = uint16_t;
  static constexpr int kPrec = 8, kBias = 127, kTopExp = 255;
};
struct F16 {
  using In = uint16_t;
  static constexpr int kPrec = 11, kBias = 15, kTopExp = 31;
};

// ---------------------------------------------------------------------------------------------
// Loaders: 8 elements into lanes (exact conversions).

// 8 bf16/f16 elements as float vectors (8 / kFL of them).
constexpr int kFL = kBytes / 4, kFV = 8 / kFL;  // float lanes a vector, vectors a group of 8
constexpr int kDL = kBytes / 8, kDV = 8 / kDL;  // double lanes a vector, vectors a group of 8

template <class Fmt>
[[gnu::always_inline]] inline vf32 load_f32(const typename Fmt::In* p) {
  if constexpr (std::is_same_v<Fmt, F32>) return LoadF32::load(p);
  else if constexpr (std::is_same_v<Fmt, BF16>) return LoadBF16::load(p);
  else return LoadF16::load(p);
}

// (A float vector's halves as double vectors: sum_simd_impl.h's widen.)

template <class Fmt, class V>
[[gnu::always_inline]] inline void load8(const typename Fmt::In* p, V (&x)[8 / (kBytes / sizeof(V{}[0]))]) {
  if constexpr (std::is_same_v<V, vf32>) {
    for (int k = 0; k < kFV; ++k) x[k] = load_f32<Fmt>(p + k * kFL);
  } else if constexpr (std::is_same_v<Fmt, F64>) {
    for (int k = 0; k < kDV; ++k) x[k] = load_as<vf64>(p + k * kDL);
  } else if constexpr (std::is_same_v<Fmt, F32>) {  // vcvtps2pd from memory, no shuffle
#if TREDUCE_SIMD_AVX2
    for (int k = 0; k < kDV; ++k) x[k] = bit_cast_vec<vf64>(_mm256_cvtps_pd(_mm_loadu_ps(p + k * kDL)));
#else
    for (int k = 0; k < kDV; ++k) x[k] = __builtin_convertvector(load_as<vf32h>(p + k * kDL), vf64);
#endif
  } else {  // 16-bit formats: to float, then each half to double
    for (int k = 0; k < kFV; ++k) widen(load_f32<Fmt>(p + k * kFL), x[2 * k], x[2 * k + 1]);
  }
}

// ---------------------------------------------------------------------------------------------
// Pass 1: the block's largest |x| and smallest nonzero |x|, as bit patterns of the input format
// (|x| bits are ordered as |x|). amin_nz is meaningful only when amax > 0.
struct Stats {
  uint64_t amax, amin_nz;
};

// The line one block ahead, on its way while this block's kernel runs from L1 (without it, the
// stream from L3 stalled during each kernel: bfloat16 normal data 0.109 ns/element, ...).
[[gnu::always_inline]] inline void prefetch_next(const void* p, int64_t block_bytes) {
  __builtin_prefetch(static_cast<const char*>(p) + block_bytes, 0, 3);
}

// Pass 1 as an accumulator over chunks of kChunk bytes, so that a block's stats can be taken
// while the block before it goes through its windows (exact_fast): the block's lines then come
// from L3 while the adds run, instead of the windows waiting on a pass that waits on memory.
// `ahead`: the distance of the line prefetched for each one read (a block's bytes).
//
// 32- and 16-bit formats: a = bits & abs_mask; max over a; min over a + abs_mask (wrapping),
// which sends 0 to the largest signed value and 1..abs_mask in order to the negatives.
template <class VI, class VU, class U>
struct StatsInt {
  static constexpr int kChunk = 2 * int(sizeof(VI));
  static constexpr U kAbs = U(~U(0)) >> 1;
  using S = std::make_signed_t<U>;
  VI mx0 = VI{}, mx1 = VI{}, mn0 = VI{} + S(kAbs), mn1 = VI{} + S(kAbs);
  [[gnu::always_inline]] void add(const char* c, int64_t ahead) {
    prefetch_next(c, ahead);
    const VU a0 = load_as<VU>(c) & kAbs, a1 = load_as<VU>(c + sizeof(VI)) & kAbs;
    const VI s0 = bit_cast_vec<VI>(a0), s1 = bit_cast_vec<VI>(a1);
    mx0 = mx0 > s0 ? mx0 : s0;
    mx1 = mx1 > s1 ? mx1 : s1;
    const VI t0 = bit_cast_vec<VI>(a0 + kAbs), t1 = bit_cast_vec<VI>(a1 + kAbs);
    mn0 = mn0 < t0 ? mn0 : t0;
    mn1 = mn1 < t1 ? mn1 : t1;
  }
  Stats result() const {
    const VI mx = mx0 > mx1 ? mx0 : mx1, mn = mn0 < mn1 ? mn0 : mn1;
    S M = 0, m = S(kAbs);
    for (size_t j = 0; j < sizeof(VI) / sizeof(U); ++j) M = std::max<S>(M, mx[j]), m = std::min<S>(m, mn[j]);
    return {uint64_t(U(M)), uint64_t(U(U(m) - kAbs))};
  }
};

// float64 (AVX2 has no 64-bit integer max/min): double max/min over the bit patterns of |x|
// and |x| - 1, which order as the values for nonnegative finite doubles. `v > m ? v : m` is one
// maxpd and passes over a NaN v: a NaN element is not seen here but makes the kernel's sums NaN,
// and the block is redone without it. For the min, |x| - 1 sends a zero to all ones, a NaN
// (passed over), and a nonzero finite x to the finite double just below |x|.
struct StatsF64 {
  static constexpr int kChunk = 4 * kBytes;
  static constexpr uint64_t kAbs = ~uint64_t(0) >> 1;
  vf64 mx[4] = {}, mn[4] = {vf64{} + __builtin_inf(), vf64{} + __builtin_inf(), vf64{} + __builtin_inf(),
                            vf64{} + __builtin_inf()};
  [[gnu::always_inline]] void add(const char* c, int64_t ahead) {
    for (int line = 0; line < kChunk; line += 64) prefetch_next(c + line, ahead);
    for (int j = 0; j < 4; ++j) {
      const vu64 a = load_as<vu64>(c + j * kBytes) & kAbs;
      const vf64 v = bit_cast_vec<vf64>(a), t = bit_cast_vec<vf64>(a - 1);
      mx[j] = v > mx[j] ? v : mx[j];
      mn[j] = t < mn[j] ? t : mn[j];
    }
  }
  Stats result() const {
    vf64 M4 = mx[0], m4 = mn[0];
    for (int j = 1; j < 4; ++j) M4 = mx[j] > M4 ? mx[j] : M4, m4 = mn[j] < m4 ? mn[j] : m4;
    double M = 0, m = __builtin_inf();
    for (int j = 0; j < kDL; ++j) M = M4[j] > M ? M4[j] : M, m = m4[j] < m ? m4[j] : m;
    uint64_t Mb, mb;
    std::memcpy(&Mb, &M, 8);
    std::memcpy(&mb, &m, 8);
    return {Mb, mb + 1};
  }
};

template <class Fmt>
using StatsOf = std::conditional_t<std::is_same_v<Fmt, F64>, StatsF64,
                                   std::conditional_t<std::is_same_v<Fmt, F32>, StatsInt<vs32, vu32, uint32_t>,
                                                      StatsInt<vs16, vw16, uint16_t>>>;

// A whole block's stats (n elements: a multiple of kRowMax, whose bytes are chunks).
template <class Fmt>
inline Stats block_stats(const typename Fmt::In* p, int64_t n) {
  StatsOf<Fmt> st;
  const char* c = reinterpret_cast<const char*>(p);
  const int64_t bytes = n * int64_t(sizeof(*p));
  for (int64_t i = 0; i < bytes; i += st.kChunk) st.add(c + i, bytes);
  return st.result();
}

// ---------------------------------------------------------------------------------------------
// Pass 2: the windows. A row is 8 * U elements (U groups of 8) with their own accumulators, to
// keep enough independent add chains in flight; fewer when each element costs more (more splits)
// and the registers run out.
constexpr int kLogBlock = 11;
constexpr int64_t kBlock = int64_t(1) << kLogBlock;  // 2048: 8 KB of float32, 16 KB of float64
constexpr int kMaxSplits = 4;
constexpr int kRowMax = 32;  // blocks are padded to a multiple of this
constexpr int rows_u(int S) { return S == 0 ? 4 : S == 1 ? 2 : 1; }

template <class V>
struct Lane;
template <>
struct Lane<vf64> {
  using A = double;
  static constexpr int kP = 53, kMaxExp = 1023, kMinExp = -1022, kL = kDL, kV = kDV;
  // h: all the block's elements (the lanes' horizontal sum is in double too, within the bound).
  static constexpr int kLogAdds = kLogBlock;
};
template <>
struct Lane<vf32> {
  using A = float;
  static constexpr int kP = 24, kMaxExp = 127, kMinExp = -126, kL = kFL, kV = kFV;
  // h: the float lanes are moved into double lanes every 2^HS rows (HS <= kSubLog, chosen per
  // block: fewer where the block's range needs it), so a float lane sums at most that many. (A float lane sum is a multiple of 2^(k-24) within 2^k, or of
  // 2^G within 2^(24+G): the double lanes take 2^29 of them exactly.)
  static constexpr int kSubLog = 4;  // (the dispatch in exact_block)
  static constexpr int kLogAdds = kSubLog;
};

// `next` (or null): a block of n elements whose stats are taken on the way into *next_stats.
template <class Fmt, class V, int S, int HS = Lane<V>::kLogAdds>
[[gnu::noinline]] void window_block(const typename Fmt::In* p, int64_t n, const double* sigma, double* out,
                                    const typename Fmt::In* next, Stats* next_stats) {
  using L = Lane<V>;
  using A = typename L::A;
  using In = typename Fmt::In;
  constexpr bool kFloat = std::is_same_v<V, vf32>;
  constexpr int U = rows_u(S), kV = L::kV, kAcc = U * kV;
  constexpr int64_t kRow = 8 * U;
  StatsOf<Fmt> st;
  constexpr int64_t kRowBytes = kRow * int64_t(sizeof(In));
  const char* nc = reinterpret_cast<const char*>(next);
  const int64_t ahead = n * int64_t(sizeof(In));
  // The next block's chunks at the pace of this block's rows (a chunk every few rows, or a few a row).
  const auto next_chunks = [&](int64_t i) {
    if (!nc) return;
    if constexpr (kRowBytes >= st.kChunk) {
      for (int64_t c = 0; c < kRowBytes; c += st.kChunk) st.add(nc + i * int64_t(sizeof(In)) + c, ahead);
    } else {
      if ((i * int64_t(sizeof(In))) % st.kChunk == 0) st.add(nc + i * int64_t(sizeof(In)), ahead);
    }
  };
  V sig[S > 0 ? S : 1];
  for (int s = 0; s < S; ++s) sig[s] = V{} + A(sigma[s]);
  V acc[S + 1][kAcc];
  vf64 wide[kFloat ? S + 1 : 1][kFloat ? 2 * kAcc : 1];  // float lanes: their double tier
  for (auto& lv : acc)
    for (V& v : lv) v = V{};
  for (auto& lv : wide)
    for (vf64& v : lv) v = vf64{};
  const auto rows = [&](int64_t from, int64_t to) {
    for (int64_t i = from; i < to; i += kRow) {
      next_chunks(i);
      for (int u = 0; u < U; ++u) {
        V x[kV];
        load8<Fmt, V>(p + i + 8 * u, x);
        for (int k = 0; k < kV; ++k) {
          V r = x[k];
          for (int s = 0; s < S; ++s) {
            const V t = r + sig[s];              // sigma + r, rounded once
            const V q = t - sig[s];                      // exact (Sterbenz), a multiple of 2^(k_s - P)
            acc[s][u * kV + k] = q + acc[s][u * kV + k];  // exact: within 2^k_s
            r -= q;                                      // exact: the rounding error of sigma + r
          }
          acc[S][u * kV + k] += r;  // exact: multiples of 2^G within 2^(P + G)
        }
      }
    }
  };
  if constexpr (kFloat) {
    constexpr int64_t kSub = kRow << HS;  // rows between moves into the double lanes
    for (int64_t i = 0; i < n; i += kSub) {
      rows(i, std::min(n, i + kSub));
      for (int s = 0; s <= S; ++s)
        for (int j = 0; j < kAcc; ++j) {
          vf64 lo, hi;
          widen(acc[s][j], lo, hi);
          wide[s][2 * j] += lo;
          wide[s][2 * j + 1] += hi;
          acc[s][j] = V{};
        }
    }
  } else {
    rows(0, n);
  }
  // Horizontal sums, exact by the same bounds.
  for (int s = 0; s <= S; ++s) {
    vf64 v;
    if constexpr (kFloat) {
      v = wide[s][0];
      for (int j = 1; j < 2 * kAcc; ++j) v += wide[s][j];
    } else {
      v = acc[s][0];
      for (int j = 1; j < kAcc; ++j) v += acc[s][j];
    }
    double t = 0;
    for (int j = 0; j < kDL; ++j) t += v[j];
    out[s] = t;
  }
  if (nc) *next_stats = st.result();
}

// The plan of a block: its split count S (-1: no window fits, take the slow path), the sigmas,
// and for float lanes the log2 of the rows between moves into the double lanes.
struct Plan {
  int S, hs;
  bool dbl;  // double lanes
  double sigma[kMaxSplits];
};

template <class Fmt>
struct Range {
  int T, G;  // |x| < 2^T, every x a multiple of 2^G
  bool special;
  explicit Range(const Stats& st) {
    constexpr int kShift = Fmt::kPrec - 1;
    const int emax = int(st.amax >> kShift), emin = int(st.amin_nz >> kShift);
    special = emax == Fmt::kTopExp;  // inf/NaN: strip_specials
    T = std::max(emax, 1) - Fmt::kBias + 1;
    G = std::max(emin, 1) - Fmt::kBias - (Fmt::kPrec - 1);
  }
};

// The smallest S with h + T_S <= P + G, T_S = T - S (P - h), for lanes V and h; S = -1 if none.
template <class V>
[[gnu::always_inline]] inline Plan plan_lanes(int T, int G, int h) {
  using L = Lane<V>;
  constexpr int P = L::kP;
  constexpr bool kDbl = std::is_same_v<V, vf64>;
  if (T + h > L::kMaxExp) return Plan{-1, h, kDbl, {}};  // sigma_1 + x or the direct sums could overflow
  const int need = h + T - P - G;
  const int S = need <= 0 ? 0 : (need + (P - h) - 1) / (P - h);
  if (S > kMaxSplits) return Plan{-1, h, kDbl, {}};
  Plan pl{S, h, kDbl, {}};
  int k = T + h;
  for (int s = 0; s < S; ++s, k += h - P) {
    if (k - 1 < L::kMinExp) return Plan{-1, h, kDbl, {}};  // (not reached for minimal S; a guard)
    pl.sigma[s] = treduce::exact_double(uint64_t(k + 1023) << 52);  // 2^k (ldexp: a libm call)
  }
  return pl;
}

// Float lanes: with no split, the largest sub-period the range allows (down to pairs: moving
// float lanes into double lanes every 2 rows is still cheaper than a split); with splits, the
// longest. Then the cheaper of that and double lanes, by costs measured in L1 (ns/element, AMD
// Zen 4, bf16): a float split costs about as much as half a double one.
template <class Fmt, class V>
[[gnu::always_inline]] inline Plan plan(const Stats& st) {
  const Range<Fmt> r(st);
  if (r.special) return Plan{-1, 0, false, {}};
  if constexpr (std::is_same_v<V, vf64>) {
    return plan_lanes<vf64>(r.T, r.G, kLogBlock);
  } else {
    constexpr int kMax = Lane<vf32>::kSubLog;
    const int hs0 = std::min(kMax, 24 + r.G - r.T);  // S = 0 needs hs + T <= 24 + G
    Plan f = hs0 >= 1 ? plan_lanes<vf32>(r.T, r.G, hs0) : plan_lanes<vf32>(r.T, r.G, kMax);
    static constexpr double kCostF[kMaxSplits + 1] = {0.05, 0.10, 0.17, 0.26, 0.35};
    static constexpr double kCostD[kMaxSplits + 1] = {0.13, 0.23, 0.34, 0.50, 0.69};
    if (f.S >= 0 && f.S <= 1) return f;
    const Plan d = plan_lanes<vf64>(r.T, r.G, kLogBlock);
    if (d.S < 0) return f;
    if (f.S < 0) return d;
    return kCostD[d.S] < kCostF[f.S] ? d : f;
  }
}

// Elements one at a time into the accumulator (blocks no window fits: values near the largest
// finite, or a range past kMaxSplits splits), converted eight at a time by the vector loaders
// (float16's scalar conversion, a libm call an element, was 6 ns an element). n: a multiple of 8.
template <class Fmt>
[[gnu::noinline]] inline void slow_block(const typename Fmt::In* p, int64_t n, ExactAcc* acc) {
  for (int64_t i = 0; i < n; i += 8) {
    vf64 x[kDV];
    load8<Fmt, vf64>(p + i, x);
    for (int k = 0; k < kDV; ++k)
      for (int j = 0; j < kDL; ++j) acc->add(x[k][j]);
  }
}

// The block with its infinities and NaNs replaced by -0.0 (which adds nothing) into `out`, their
// flags set in the accumulator as ExactAcc::add sets them (their chunks take nothing either), so
// the block's finite elements still go through the windows: with one infinity a block took the
// slow path, 40x the time on float16 data spread over 2^+-20 (a tenth of it past float16's
// range). n: a multiple of the vector's lanes.
template <class Fmt>
inline void strip_specials(const typename Fmt::In* p, int64_t n, typename Fmt::In* out, ExactAcc* acc) {
  using B = std::conditional_t<sizeof(typename Fmt::In) == 8, uint64_t,
                               std::conditional_t<sizeof(typename Fmt::In) == 4, uint32_t, uint16_t>>;
  using VB = std::conditional_t<sizeof(B) == 8, vu64, std::conditional_t<sizeof(B) == 4, vu32, vw16>>;
  constexpr int kShift = Fmt::kPrec - 1;
  constexpr B kSign = B(B(1) << (sizeof(B) * 8 - 1)), kMant = B((B(1) << kShift) - 1);
  constexpr B kExp = B(~(kSign | kMant));
  VB nan = VB{}, pos = VB{}, neg = VB{};
  for (int64_t i = 0; i < n; i += int64_t(sizeof(VB) / sizeof(B))) {
    const VB v = load_as<VB>(p + i);
    const VB special = VB((v & kExp) == kExp);  // all ones where the exponent is the top one
    const VB mant = VB((v & kMant) != 0), sign = VB((v & kSign) != 0);
    nan |= special & mant;
    pos |= special & ~mant & ~sign;
    neg |= special & ~mant & sign;
    const VB kept = (v & ~special) | (special & kSign);
    std::memcpy(out + i, &kept, sizeof kept);
  }
  B any_nan = 0, any_pos = 0, any_neg = 0;
  for (size_t j = 0; j < sizeof(VB) / sizeof(B); ++j) any_nan |= nan[j], any_pos |= pos[j], any_neg |= neg[j];
  acc->nan = acc->nan || any_nan != 0;
  acc->pos_inf = acc->pos_inf || any_pos != 0;
  acc->neg_inf = acc->neg_inf || any_neg != 0;
  if (any_nan | any_pos | any_neg) acc->not_neg_zero |= 1, acc->any = true;
}

// Calls f(lanes, S, HS) with a plan's (S >= 0) lanes as Tag<vf64> or Tag<vf32> and its S and HS
// as std::integral_constant: the instantiations of the window kernels, listed once.
template <class T>
struct Tag {
  using type = T;
};
template <int K>
using Int = std::integral_constant<int, K>;

template <class V, class F>
inline void by_plan(const Plan& pl, const F& f) {
  constexpr int kD = Lane<vf64>::kLogAdds;
  if (pl.dbl) {
    switch (pl.S) {
      case 0: return f(Tag<vf64>{}, Int<0>{}, Int<kD>{});
      case 1: return f(Tag<vf64>{}, Int<1>{}, Int<kD>{});
      case 2: return f(Tag<vf64>{}, Int<2>{}, Int<kD>{});
      case 3: return f(Tag<vf64>{}, Int<3>{}, Int<kD>{});
      case 4: return f(Tag<vf64>{}, Int<4>{}, Int<kD>{});
    }
  } else if constexpr (std::is_same_v<V, vf32>) {
    switch (pl.S * 8 + pl.hs) {
      case 1: return f(Tag<vf32>{}, Int<0>{}, Int<1>{});
      case 2: return f(Tag<vf32>{}, Int<0>{}, Int<2>{});
      case 3: return f(Tag<vf32>{}, Int<0>{}, Int<3>{});
      case 4: return f(Tag<vf32>{}, Int<0>{}, Int<4>{});
      case 8 + 4: return f(Tag<vf32>{}, Int<1>{}, Int<4>{});
      case 16 + 4: return f(Tag<vf32>{}, Int<2>{}, Int<4>{});
      case 24 + 4: return f(Tag<vf32>{}, Int<3>{}, Int<4>{});
      case 32 + 4: return f(Tag<vf32>{}, Int<4>{}, Int<4>{});
      default: __builtin_unreachable();
    }
  }
}

// A block's windows by its plan (S >= 0) into out[0, S].
template <class Fmt, class V>
inline void window_plan(const Plan& pl, const typename Fmt::In* p, int64_t n, double* out,
                        const typename Fmt::In* next, Stats* next_st) {
  by_plan<V>(pl, [&](auto lanes, auto S, auto HS) {
    window_block<Fmt, typename decltype(lanes)::type, decltype(S)::value, decltype(HS)::value>(p, n, pl.sigma, out,
                                                                                             next, next_st);
  });
}

// One block (n a multiple of kRowMax; `real` elements are the input's, the rest -0.0 padding) of
// stats st. `stripped`: p is a copy without infinities and NaNs. `next` (or null): the block after
// it, whose stats the windows take on the way; returns whether they did (into *next_st).
template <class Fmt, class V>
inline bool exact_block(const typename Fmt::In* p, int64_t n, int64_t real, const Stats& st,
                        const typename Fmt::In* next, Stats* next_st, ExactAcc* acc, bool& nonzero,
                        bool stripped = false) {
  using In = typename Fmt::In;
  using B = std::conditional_t<sizeof(In) == 8, uint64_t, std::conditional_t<sizeof(In) == 4, uint32_t, uint16_t>>;
  const auto strip_and_redo = [&] {
    alignas(64) In copy[kBlock];
    strip_specials<Fmt>(p, n, copy, acc);
    exact_block<Fmt, V>(copy, n, real, block_stats<Fmt>(copy, n), nullptr, nullptr, acc, nonzero, true);
  };
  if (!stripped && Range<Fmt>(st).special) return strip_and_redo(), false;
  if (st.amax == 0) {  // only zeros (or a NaN that float64's max passed over)
    bool plus_zero = false;
    for (int64_t i = 0; i < real; ++i) {
      B b;
      std::memcpy(&b, p + i, sizeof b);
      if (B(b << 1) != 0) return (stripped ? slow_block<Fmt>(p, n, acc) : strip_and_redo()), false;
      plus_zero |= b == 0;
    }
    nonzero |= plus_zero;  // all -0.0 keeps the sum -0.0
    return false;
  }
  const Plan pl = plan<Fmt, V>(st);
  if (pl.S < 0) return slow_block<Fmt>(p, n, acc), false;
  double out[kMaxSplits + 1] = {};
  window_plan<Fmt, V>(pl, p, n, out, next, next_st);
  // A NaN the stats passed over (float64) makes a level NaN: the block again without it.
  bool finite = true;
  for (int s = 0; s <= pl.S; ++s) finite &= out[s] - out[s] == 0;
  if (!finite) return (stripped ? slow_block<Fmt>(p, n, acc) : strip_and_redo()), next != nullptr;
  nonzero = true;
  for (int s = 0; s <= pl.S; ++s)
    if (out[s] != 0) acc->add(out[s]);
  return next != nullptr;
}
// float16: every finite value is a multiple of 2^-24 below 2^16 (T <= 16, G >= -24), so one plan
// fits every block, the one plan<F16, vf32> gives that range (float lanes, h = 4, one split at
// 2^20), and no pass 1 is needed. Infinities and NaN make the sums non-finite (inf - sigma is inf,
// inf - inf NaN): the block again without them. All-zero sums: the block's elements decide the
// -0.0 rule (padding is -0.0).
inline void f16_block(const uint16_t* p, int64_t n, ExactAcc* acc, bool& nonzero) {
  static constexpr double kSigma[kMaxSplits] = {1048576.0};  // 2^(16 + 4)
  double out[2] = {};
  window_block<F16, vf32, 1, 4>(p, n, kSigma, out, nullptr, nullptr);
  if (out[0] - out[0] != 0 || out[1] - out[1] != 0) {
    alignas(64) uint16_t copy[kBlock];
    strip_specials<F16>(p, n, copy, acc);
    return f16_block(copy, n, acc, nonzero);
  }
  if (out[0] == 0 && out[1] == 0) {
    for (int64_t i = 0; i < n; ++i) nonzero |= p[i] != 0x8000;
    return;
  }
  nonzero = true;
  for (double v : out)
    if (v != 0) acc->add(v);
}

// The last, partial block's `real` elements into pad, then -0.0 (adds nothing, keeps -0.0) up
// to a multiple of kRowMax: returns that count.
template <class In>
inline int64_t pad_block(const In* x, int64_t real, In* pad) {
  const int64_t padded = (real + kRowMax - 1) / kRowMax * kRowMax;
  In negzero;
  if constexpr (sizeof(In) == 2) negzero = 0x8000;
  else negzero = In(-0.0);
  std::fill(pad + real, pad + padded, negzero);
  std::memcpy(pad, x, real * sizeof(In));
  return padded;
}

// Full blocks in a pipeline: each block's windows take the next block's stats on the way (its
// lines arrive from L3 under the adds); the last, partial block copied and padded with -0.0
// (adds nothing, keeps -0.0).
template <class Fmt, class V>
void exact_fast(const typename Fmt::In* x, int64_t n, ExactAcc* acc) {
  using In = typename Fmt::In;
  if (n <= 0) return;
  bool nonzero = false;
  int64_t i = 0;
  if constexpr (std::is_same_v<Fmt, F16>) {
    for (; i + kBlock <= n; i += kBlock) f16_block(x + i, kBlock, acc, nonzero);
  } else if (n >= kBlock) {
    Stats st = block_stats<Fmt>(x, kBlock);
    for (; i + kBlock <= n; i += kBlock) {
      const In* next = i + 2 * kBlock <= n ? x + i + kBlock : nullptr;
      Stats next_st{};
      const bool got = exact_block<Fmt, V>(x + i, kBlock, kBlock, st, next, &next_st, acc, nonzero);
      if (next) st = got ? next_st : block_stats<Fmt>(next, kBlock);
    }
  }
  if (i < n) {
    alignas(64) In pad[kBlock];
    const int64_t real = n - i, padded = pad_block(x + i, real, pad);
    if constexpr (std::is_same_v<Fmt, F16>) f16_block(pad, padded, acc, nonzero);
    else exact_block<Fmt, V>(pad, padded, real, block_stats<Fmt>(pad, padded), nullptr, nullptr, acc, nonzero);
  }
  // The -0.0 rule (ExactAcc::add counts flushed values as elements; set the flags directly).
  acc->any = true;
  if (nonzero) acc->not_neg_zero |= 1;
}


// Whether the levels of n elements (|x| < 2^T, multiples of 2^G) add exactly in a double, in
// order: their partial sums are multiples of 2^G within 2^(T + h + 1), n <= 2^h (exact_short).
inline bool levels_add_in_double(int T, int G, int64_t n) {
  const int h = n > 1 ? 64 - __builtin_clzll(uint64_t(n - 1)) : 0;
  return T + h + 1 - G <= 53;
}

// A short run (n <= kBlock, sum_simd.h's `exact_short`) as its window levels, with no
// accumulator: a row of 128 float32 elements spent ten times its adds in its accumulator and
// the rounding. Returns their count, or 0 where the run takes exact_fast's path (infinities,
// NaN, only zeros, no window fits). *in_double: added in order, the levels' partial sums are all
// exact doubles, so the last is the run's exact sum. (The levels' first j sum the elements less
// their residues after j splits: multiples of 2^G within 2^(T + h + 1), n <= 2^h, held exactly
// when T + h + 1 - G <= 53.) float16 takes its one plan, whose bound always holds (16 + 11 + 1 + 24).
template <class Fmt, class V>
int exact_short(const typename Fmt::In* x, int64_t n, double* levels, bool* in_double) {
  using In = typename Fmt::In;
  static_assert(kMaxSplits + 1 == kExactShortLevels && kBlock == kExactShortMax);
  if (n <= 0 || n > kBlock) return 0;
  const KeepSubnormals keep;
  alignas(64) In pad[kBlock];
  const In* p = x;
  int64_t padded = n;
  if (n % kRowMax != 0) padded = pad_block(x, n, pad), p = pad;
  double out[kMaxSplits + 1] = {};
  int S, T, G;
  if constexpr (std::is_same_v<Fmt, F16>) {
    static constexpr double kSigma[kMaxSplits] = {1048576.0};  // f16_block's plan
    window_block<F16, vf32, 1, 4>(p, padded, kSigma, out, nullptr, nullptr);
    if (out[0] == 0 && out[1] == 0) return 0;  // (the elements decide -0.0)
    S = 1, T = 16, G = -24;
  } else {
    const Stats st = block_stats<Fmt>(p, padded);
    const Range<Fmt> r(st);
    if (r.special || st.amax == 0) return 0;
    const Plan pl = plan<Fmt, V>(st);
    if (pl.S < 0) return 0;
    window_plan<Fmt, V>(pl, p, padded, out, nullptr, nullptr);
    S = pl.S, T = r.T, G = r.G;
  }
  for (int s = 0; s <= S; ++s)
    if (out[s] - out[s] != 0) return 0;  // infinities, or a NaN the stats passed over
  *in_double = levels_add_in_double(T, G, n);
  for (int s = 0; s <= S; ++s) levels[s] = out[s];
  return S + 1;
}

// ---------------------------------------------------------------------------------------------
// Columns: kColumns adjacent columns over up to kBlock rows (ld elements apart), each vector
// lane one column, the lanes never added across: the same windows as window_block with the
// same bounds (a lane takes at most kBlock elements), read from the strided rows in place. Was:
// each column's elements copied into a contiguous run first (2 cores, float32 (4096, 4096)
// over dim 0: 6.8 ms, 5x auto's sum).
template <class Fmt>
inline constexpr int kColumns = exact_columns_of(sizeof(typename Fmt::In));

// A group's rows into its columns' levels, out[s * kColumns + column], and the rows' own range
// into *stats (kColumns / 8 loads of 8 elements a row).
template <class Fmt, class V, int S, int HS = Lane<V>::kLogAdds>
[[gnu::noinline]] void window_columns(const typename Fmt::In* p, int64_t ld, int64_t rows, const double* sigma,
                                      double* out, Stats* stats) {
  using L = Lane<V>;
  using A = typename L::A;
  constexpr bool kFloat = std::is_same_v<V, vf32>;
  constexpr int C = kColumns<Fmt>, kVec = C / 8 * L::kV;  // vectors a row
  constexpr int U = 2;  // rows in flight, each with its accumulators (independent add chains)
  V sig[S > 0 ? S : 1];
  for (int s = 0; s < S; ++s) sig[s] = V{} + A(sigma[s]);
  V acc[U][S + 1][kVec];
  vf64 wide[S + 1][kFloat ? 2 * kVec : kVec];  // float lanes: their double tier; double lanes: the total
  for (auto& a : acc)
    for (auto& lv : a)
      for (V& v : lv) v = V{};
  for (auto& lv : wide)
    for (vf64& v : lv) v = vf64{};
  StatsOf<Fmt> st;  // the rows' own range, taken on the way (the next rows prefetched)
  constexpr int64_t kRowBytes = C * int64_t(sizeof(*p));
  static_assert(kRowBytes % decltype(st)::kChunk == 0);
  const int64_t ahead = 16 * ld * int64_t(sizeof(*p));  // (rows a page apart: no hardware prefetch)
  const auto row = [&](const typename Fmt::In* r, V (&a)[S + 1][kVec]) {
    for (int64_t b = 0; b < kRowBytes; b += st.kChunk) st.add(reinterpret_cast<const char*>(r) + b, ahead);
    for (int g = 0; g < C / 8; ++g) {
      V x[L::kV];
      load8<Fmt, V>(r + 8 * g, x);
      for (int k = 0; k < L::kV; ++k) {
        V t = x[k];
        const int j = g * L::kV + k;
        for (int s = 0; s < S; ++s) {  // window_block's split, exact by the same bounds
          const V q = (t + sig[s]) - sig[s];
          a[s][j] = q + a[s][j];
          t -= q;
        }
        a[S][j] += t;
      }
    }
  };
  // Rows [from, to) into acc, then acc into wide (float lanes every kSub rows, as window_block).
  const auto rows_into_wide = [&](int64_t from, int64_t to) {
    int64_t i = from;
    for (; i + U <= to; i += U)
      for (int u = 0; u < U; ++u) row(p + (i + u) * ld, acc[u]);
    if (i < to) row(p + i * ld, acc[0]);
    for (int u = 0; u < U; ++u)
      for (int s = 0; s <= S; ++s)
        for (int j = 0; j < kVec; ++j) {
          if constexpr (kFloat) {
            vf64 lo, hi;
            widen(acc[u][s][j], lo, hi);
            wide[s][2 * j] += lo;
            wide[s][2 * j + 1] += hi;
          } else {
            wide[s][j] += acc[u][s][j];
          }
          acc[u][s][j] = V{};
        }
  };
  constexpr int64_t kSub = kFloat ? int64_t(U) << HS : kBlock;  // rows between moves into wide
  for (int64_t i = 0; i < rows; i += kSub) rows_into_wide(i, std::min(rows, i + kSub));
  // Lane j of wide's vectors is column j in order: float lanes widened in halves, in order.
  for (int s = 0; s <= S; ++s)
    for (int v = 0; v < (kFloat ? 2 * kVec : kVec); ++v)
      for (int j = 0; j < kDL; ++j) out[s * C + v * kDL + j] = wide[s][v][j];
  *stats = st.result();
}

// The windows of a plan (S >= 0) over a group of columns.
template <class Fmt, class V>
inline void window_columns_plan(const Plan& pl, const typename Fmt::In* p, int64_t ld, int64_t rows, double* out,
                                Stats* st) {
  by_plan<V>(pl, [&](auto lanes, auto S, auto HS) {
    window_columns<Fmt, typename decltype(lanes)::type, decltype(S)::value, decltype(HS)::value>(p, ld, rows, pl.sigma,
                                                                                               out, st);
  });
}

// The entry (sum_simd.h's `exact_columns`): one plan for the group's block (its range over all
// its elements), each column's levels into levels[s * kColumns + column]. Returns the levels a
// column, or 0 where the group takes the copies' path (infinities, NaN, only zeros, no window).
// *in_double: as exact_short's, for every column.
//
// The plan is guessed from *seen, the range of the blocks before it (as ExactColumnsSeen: none
// yet when amax is 0), and the windows take the block's own range on the way: one pass over
// memory, where a range pass of its own waited on rows a page apart (2 cores, float32 (4096,
// 4096) over dim 0: 9.5 ms, 7x auto's sum, 38% in that pass). A block out of the guessed range
// is done again with its own plan, from L2. Any plan valid for the block gives the same exact
// levels' sum (the guess's plan is valid for every block within its range: the proof at the
// top needs only |x| < 2^T and x a multiple of 2^G), and in_double takes the block's own range.
template <class Fmt, class V>
int exact_columns(const typename Fmt::In* x, int64_t ld, int64_t rows, double* levels, bool* in_double,
                  ExactColumnsSeen* seen) {
  static_assert(kMaxSplits + 1 == kExactShortLevels && kBlock == kExactShortMax);
  if (rows <= 0 || rows > kBlock) return 0;
  const KeepSubnormals keep;
  const Stats guess{seen->amax, seen->amin_nz};
  Stats st{};
  Plan pl{-1, 0, false, {}};
  if (guess.amax != 0) {
    pl = plan<Fmt, V>(guess);
    if (pl.S >= 0) window_columns_plan<Fmt, V>(pl, x, ld, rows, levels, &st);
  }
  if (pl.S < 0) {  // no guess: the block's range first
    StatsOf<Fmt> pass;
    constexpr int64_t kRowBytes = kColumns<Fmt> * int64_t(sizeof(*x));
    const int64_t ahead = 16 * ld * int64_t(sizeof(*x));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t b = 0; b < kRowBytes; b += pass.kChunk) pass.add(reinterpret_cast<const char*>(x + r * ld) + b, ahead);
    st = pass.result();
  }
  const Range<Fmt> r(st);
  if (r.special || st.amax == 0) return 0;
  const Range<Fmt> g(guess);
  if (pl.S < 0 || r.T > g.T || r.G < g.G) {  // no guess, or the block out of its range
    Stats again;
    pl = plan<Fmt, V>(st);
    if (pl.S < 0) return 0;
    window_columns_plan<Fmt, V>(pl, x, ld, rows, levels, &again);
  }
  for (int k = 0; k < (pl.S + 1) * kColumns<Fmt>; ++k)
    if (levels[k] - levels[k] != 0) return 0;  // a NaN the stats passed over (float64)
  // The next guess: the ranges seen so far together (|x| bits order as |x|).
  seen->amax = std::max(seen->amax, st.amax);
  seen->amin_nz = guess.amax != 0 ? std::min(seen->amin_nz, st.amin_nz) : st.amin_nz;
  *in_double = levels_add_in_double(r.T, r.G, rows);
  return pl.S + 1;
}

// The entry (sum_simd.h's `exact`), subnormals kept whatever the thread's mode.
template <class Fmt, class V>
void run(const typename Fmt::In* x, int64_t n, ExactAcc* acc) {
  const KeepSubnormals keep;
  exact_fast<Fmt, V>(x, n, acc);
}

}  // namespace exact_blocks
