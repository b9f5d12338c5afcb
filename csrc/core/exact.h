// The exact sum: every element added into a fixed-point accumulator wide enough for any sum
// of doubles (a superaccumulator), so the sum carries no rounding at all, and one rounding to
// the result's format at the end. The exact sum does not depend on the order of the elements,
// so neither does the result: any split of the work, any thread count, any device gives the
// same bits. Torch-free, and compiled for the host and for CUDA devices alike: the CPU and the
// GPU round with this one code.
//
// Bit b of the accumulator has weight 2^(b - 1074) (bit 0 is the least significant bit of the
// smallest double subnormal). It is held as kChunks signed 64-bit chunks of 32 bits each, chunk
// k holding bits [32k, 32k + 32), their 32 upper bits room for carries: an element adds one
// piece below 2^32 to at most three chunks, so 2^30 elements fit before the carries must move
// up (normalize). The top chunk is signed and carries the sign of the whole.
//
// The state (kStateWords int64 words: the normalized chunks, then counts of NaN, +inf, -inf,
// elements other than -0.0, and elements) is what partial sums exchange: the word-wise sum of
// two states is the state of the union of their elements, so states add with an integer
// all-reduce across processes (fewer than 2^31 of them) and round to the same bits as one
// accumulator over everything.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TREDUCE_EXACT_HD __host__ __device__
#else
#define TREDUCE_EXACT_HD
#endif

namespace treduce {

// A floating-point result format: precision (significand bits, the implicit one included) and
// the exponent of its smallest normal number.
struct ExactFormat {
  int precision;
  int min_exponent;
};
inline constexpr ExactFormat kExactDouble{53, -1022};
inline constexpr ExactFormat kExactFloat{24, -126};
inline constexpr ExactFormat kExactHalf{11, -14};
inline constexpr ExactFormat kExactBFloat16{8, -126};

TREDUCE_EXACT_HD inline uint64_t exact_bits(double v) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(v));
#else
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
#endif
}

TREDUCE_EXACT_HD inline double exact_double(uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(b));
#else
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
#endif
}

// Bits up to 2^1024 (bit 2098), and 63 more for the carries of 2^63 elements: 2161 bits.
inline constexpr int kExactChunks = 68;
inline constexpr int kExactStateWords = kExactChunks + 5;
enum ExactCount : int { kExactNaN = kExactChunks, kExactPosInf, kExactNegInf, kExactNotNegZero, kExactAny };

// The three signed pieces that +-u * 2^(b - 1074) adds to chunks k, k + 1, k + 2 (k = b / 32,
// returned): u below 2^63, shifted by b % 32 and cut into 32-bit pieces. No branch on the sign
// ((x ^ s) - s is x or -x).
TREDUCE_EXACT_HD inline int exact_int_pieces(uint64_t u, bool negative, int b, int64_t piece[3]) {
  const unsigned __int128 w = static_cast<unsigned __int128>(u) << (b & 31);
  const int64_t s = -int64_t(negative);
  piece[0] = (int64_t(uint64_t(w) & 0xffffffffu) ^ s) - s;
  piece[1] = (int64_t(uint64_t(w >> 32) & 0xffffffffu) ^ s) - s;
  piece[2] = (int64_t(uint64_t(w >> 64)) ^ s) - s;
  return b >> 5;
}

// The pieces a finite double adds: value = M * 2^(p - 1074), normal numbers with their implicit
// bit, subnormals (and zeros, which add nothing) at p = 0.
TREDUCE_EXACT_HD inline int exact_pieces(uint64_t bits, int64_t piece[3]) {
  const uint64_t e = (bits >> 52) & 0x7ff;
  const uint64_t normal = e != 0;
  const uint64_t M = (bits & ((uint64_t(1) << 52) - 1)) | (normal << 52);
  return exact_int_pieces(M, bits >> 63, int(e - normal), piece);
}

// Carries up: every chunk but the top in [0, 2^32), the top signed. (That form is unique, so
// any way of reaching it, such as CUDA's warp-parallel one, gives the same words.)
TREDUCE_EXACT_HD inline void exact_normalize(int64_t* chunk) {
  for (int k = 0; k + 1 < kExactChunks; ++k) {
    const int64_t carry = chunk[k] >> 32;  // arithmetic: floor division by 2^32
    chunk[k] -= carry * (int64_t(1) << 32);
    chunk[k + 1] += carry;
  }
}

// The results a state's counts decide: NaN (a NaN, or both infinities), +-inf. True and *out
// set for those.
TREDUCE_EXACT_HD inline bool exact_special(const int64_t* state, double* out) {
  if (state[kExactNaN] != 0 || (state[kExactPosInf] != 0 && state[kExactNegInf] != 0)) {
    *out = exact_double(0x7ff8000000000000ull);
  } else if (state[kExactPosInf] != 0) {
    *out = exact_double(0x7ff0000000000000ull);
  } else if (state[kExactNegInf] != 0) {
    *out = exact_double(0xfff0000000000000ull);
  } else {
    return false;
  }
  return true;
}

// A zero sum: -0.0 only when every element was -0.0 (an empty sum is +0.0).
TREDUCE_EXACT_HD inline double exact_zero(const int64_t* state) {
  return state[kExactAny] != 0 && state[kExactNotNegZero] == 0 ? -0.0 : 0.0;
}

// A nonzero magnitude rounded to `f`: c its normalized chunks (all nonnegative), c[top] the
// highest nonzero one; any_below(k) tells whether some chunk below k is nonzero.
template <class AnyBelow>
TREDUCE_EXACT_HD double exact_round_magnitude(const int64_t* c, int top, bool negative, ExactFormat f,
                                              const AnyBelow& any_below) {
  // The 64 bits from bit b up (three chunks hold at least 65 of them past any shift).
  const auto window = [c](int b) -> uint64_t {
    const int k = b >> 5;
    unsigned __int128 w = static_cast<uint32_t>(c[k]);
    if (k + 1 < kExactChunks) w |= static_cast<unsigned __int128>(static_cast<uint32_t>(c[k + 1])) << 32;
    if (k + 2 < kExactChunks) w |= static_cast<unsigned __int128>(static_cast<uint64_t>(c[k + 2])) << 64;
    return static_cast<uint64_t>(w >> (b & 31));
  };
  const uint64_t t = static_cast<uint64_t>(c[top]);
#if defined(__CUDA_ARCH__)
  const int msb = top * 32 + 63 - __clzll(static_cast<long long>(t));
#else
  const int msb = top * 32 + 63 - __builtin_clzll(t);
#endif
  const int msb_exponent = msb - 1074;
  const int lsb_exponent = (msb_exponent > f.min_exponent ? msb_exponent : f.min_exponent) - (f.precision - 1);
  const int lsb = lsb_exponent + 1074;  // >= 0 for every format: double's subnormals are bit 0
  const int n = msb - lsb + 1;          // kept bits: at most the precision, none below half the smallest subnormal
  uint64_t r = n > 0 ? window(lsb) & ((uint64_t(1) << n) - 1) : 0;
  if (lsb >= 1 && (window(lsb - 1) & 1)) {  // the round bit, then the sticky bits below it
    const int below = lsb - 1, k = below >> 5;
    const bool sticky = (static_cast<uint64_t>(c[k]) & ((uint64_t(1) << (below & 31)) - 1)) != 0 || any_below(k);
    if (sticky || (r & 1)) ++r;  // r may reach 2^precision: still exact, one exponent up
  }
  const double magnitude = ::ldexp(double(r), lsb_exponent);  // past the format's range: the caller's conversion gives inf
  return negative ? -magnitude : magnitude;
}

// exact_round_magnitude's any_below for chunks that may be nonzero from `from` up.
struct ExactAnyFrom {
  const int64_t* c;
  int from;
  TREDUCE_EXACT_HD bool operator()(int k) const {
    for (int j = from; j < k; ++j)
      if (c[j] != 0) return true;
    return false;
  }
};

// The sum held by `state` rounded once to `f` (to nearest, ties to even), as a double that the
// format holds exactly (or +-inf, NaN): the caller converts it to the format without another
// rounding. The chunks are left normalized, as a magnitude.
TREDUCE_EXACT_HD inline double exact_round(int64_t* state, ExactFormat f) {
  double special;
  if (exact_special(state, &special)) return special;
  int64_t* c = state;
  exact_normalize(c);
  const bool negative = c[kExactChunks - 1] < 0;
  if (negative) {  // the magnitude, normalized again
    for (int k = 0; k < kExactChunks; ++k) c[k] = -c[k];
    exact_normalize(c);
  }
  int top = kExactChunks - 1;
  while (top >= 0 && c[top] == 0) --top;
  if (top < 0) return exact_zero(state);
  return exact_round_magnitude(c, top, negative, f, ExactAnyFrom{c, 0});
}

// A sum held exactly by the double v rounded once to `f` (to nearest, ties to even): the bits
// exact_round gives for the same sum, without an accumulator (short rows, exact_short).
inline double exact_round_double(double v, ExactFormat f) {
  if (f.precision >= 53 || v == 0 || v - v != 0) return v;
  const int e = int((exact_bits(v) >> 52) & 0x7ff);
  const int msb = (e == 0 ? 1 : e) - 1023;  // (for a subnormal, below every format's normals)
  const int lsb = (msb > f.min_exponent ? msb : f.min_exponent) - (f.precision - 1);
  // 2^-lsb and 2^lsb are normal doubles for the formats below double's (lsb >= -149), and the
  // scalings are exact.
  const double r = __builtin_rint(v * exact_double(uint64_t(1023 - lsb) << 52));
  return r * exact_double(uint64_t(1023 + lsb) << 52);
}

// A run's exact sum given as m exact doubles (CPU exact_short's levels, whose partial sums are
// exact when in_double) rounded once to `f`, where that takes no accumulator: the partial sums'
// last rounded (exact_round_double), or two levels into double by IEEE's add (one rounding of
// their exact sum). False otherwise.
inline bool exact_round_levels(const double* levels, int m, bool in_double, ExactFormat f, double* out) {
  if (in_double) {
    double s = levels[0];
    for (int k = 1; k < m; ++k) s += levels[k];
    *out = exact_round_double(s, f);
    return true;
  }
  if (f.precision < 53 || m != 2) return false;
  *out = levels[0] + levels[1];
  return true;
}

struct ExactAcc {
  static constexpr int kChunks = kExactChunks;
  static constexpr int64_t kAddsBeforeNormalize = int64_t(1) << 30;

  int64_t chunk[kChunks] = {};
  int64_t adds = 0;  // elements added since the last normalize
  bool nan = false, pos_inf = false, neg_inf = false;
  uint64_t not_neg_zero = 0;   // nonzero once an element other than -0.0 was added
  bool any = false;            // some element was added

  void add(double v) {
    const uint64_t bits = exact_bits(v);
    any = true;
    not_neg_zero |= bits ^ (uint64_t(1) << 63);  // infinities and NaN count too, as on CUDA
    if (((bits >> 52) & 0x7ff) == 0x7ff) [[unlikely]] {
      if (bits & ((uint64_t(1) << 52) - 1)) nan = true;
      else if (bits >> 63) neg_inf = true;
      else pos_inf = true;
      return;
    }
    int64_t piece[3];
    const int k = exact_pieces(bits, piece);
    chunk[k] += piece[0];
    chunk[k + 1] += piece[1];
    chunk[k + 2] += piece[2];
    if (++adds == kAddsBeforeNormalize) [[unlikely]] normalize();
  }

  void normalize() {
    exact_normalize(chunk);
    adds = 0;
  }

  void merge(const ExactAcc& o) {
    ExactAcc b = o;
    b.normalize();
    normalize();
    for (int k = 0; k < kChunks; ++k) chunk[k] += b.chunk[k];
    normalize();
    nan |= o.nan, pos_inf |= o.pos_inf, neg_inf |= o.neg_inf;
    not_neg_zero |= o.not_neg_zero;
    any |= o.any;
  }

  // The state words (see the top of this file).
  void to_state(int64_t* words) const {
    ExactAcc a = *this;
    a.normalize();
    for (int k = 0; k < kChunks; ++k) words[k] = a.chunk[k];
    words[kExactNaN] = nan, words[kExactPosInf] = pos_inf, words[kExactNegInf] = neg_inf;
    words[kExactNotNegZero] = not_neg_zero != 0, words[kExactAny] = any;
  }

  // The exact sum rounded once to `f`: exact_round's bits, with only the chunks in use carried
  // and searched. (A sum spans a few of the 68 chunks: carrying all of them twice, as to_state
  // and exact_round do, was most of a 128-element row's time, 2 cores, float32.)
  double result(ExactFormat f) const {
    if (nan || (pos_inf && neg_inf)) return exact_double(0x7ff8000000000000ull);
    if (pos_inf) return exact_double(0x7ff0000000000000ull);
    if (neg_inf) return exact_double(0xfff0000000000000ull);
    const double zero = any && not_neg_zero == 0 ? -0.0 : 0.0;  // exact_zero's rule
    int lo = 0, hi = kChunks - 1;
    while (lo < kChunks && chunk[lo] == 0) ++lo;
    if (lo == kChunks) return zero;
    while (chunk[hi] == 0) --hi;
    // Chunks [lo, top) carried into [0, 2^32), chunk top signed: the sign of the sum. Fewer
    // than 2^30 adds keep every carry below 2^30, so one chunk above the highest in use takes them.
    const int top = hi + 1 < kChunks ? hi + 1 : hi;
    int64_t c[kChunks] = {};  // (zeros around the range: exact_round_magnitude reads past it)
    for (int k = lo; k <= top; ++k) c[k] = chunk[k];
    const auto carry = [&] {
      for (int k = lo; k < top; ++k) {
        const int64_t up = c[k] >> 32;
        c[k] -= up * (int64_t(1) << 32);
        c[k + 1] += up;
      }
    };
    carry();
    const bool negative = c[top] < 0;
    if (negative) {
      for (int k = lo; k <= top; ++k) c[k] = -c[k];
      carry();
    }
    int t = top;
    while (t >= lo && c[t] == 0) --t;
    if (t < lo) return zero;
    return exact_round_magnitude(c, t, negative, f, ExactAnyFrom{c, lo});
  }
};

}  // namespace treduce
