// The exact sum: every element added into a fixed-point accumulator wide enough for any sum
// of doubles (a superaccumulator), so the sum carries no rounding at all, and one rounding to
// the result's format at the end. The exact sum does not depend on the order of the elements,
// so neither does the result: any split of the work, any thread count, any device gives the
// same bits. Torch-free.
//
// Bit b of the accumulator has weight 2^(b - 1074) (bit 0 is the least significant bit of the
// smallest double subnormal). It is held as kChunks signed 64-bit chunks of 32 bits each, chunk
// k holding bits [32k, 32k + 32), their 32 upper bits room for carries: an element adds one
// piece below 2^32 to at most three chunks, so 2^30 elements fit before the carries must move
// up (normalize). The top chunk is signed and carries the sign of the whole.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

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

struct ExactAcc {
  // Bits up to 2^1024 (bit 2098), and 63 more for the carries of 2^63 elements: 2161 bits.
  static constexpr int kChunks = 68;
  static constexpr int64_t kAddsBeforeNormalize = int64_t(1) << 30;

  int64_t chunk[kChunks] = {};
  int64_t adds = 0;  // elements added since the last normalize
  bool nan = false, pos_inf = false, neg_inf = false;
  uint64_t not_neg_zero = 0;   // nonzero once a finite element other than -0.0 was added
  bool any = false;            // some element was added

  void add(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    const uint64_t e = (bits >> 52) & 0x7ff;
    any = true;
    if (e == 0x7ff) [[unlikely]] {
      if (bits & ((uint64_t(1) << 52) - 1)) nan = true;
      else if (bits >> 63) neg_inf = true;
      else pos_inf = true;
      return;
    }
    // No branch on the element's sign or size (random signs mispredicted half the time):
    // value = M * 2^(p - 1074), normal numbers with their implicit bit, subnormals (and zeros,
    // which add nothing) at p = 0; (x ^ s) - s is x or -x.
    not_neg_zero |= bits ^ (uint64_t(1) << 63);
    const uint64_t normal = e != 0;
    const uint64_t M = (bits & ((uint64_t(1) << 52) - 1)) | (normal << 52);
    const int p = int(e - normal);
    const int k = p >> 5;
    const unsigned __int128 w = static_cast<unsigned __int128>(M) << (p & 31);
    const int64_t s = -int64_t(bits >> 63);
    chunk[k] += (int64_t(uint64_t(w) & 0xffffffffu) ^ s) - s;
    chunk[k + 1] += (int64_t(uint64_t(w >> 32) & 0xffffffffu) ^ s) - s;
    chunk[k + 2] += (int64_t(uint64_t(w >> 64)) ^ s) - s;
    if (++adds == kAddsBeforeNormalize) [[unlikely]] normalize();
  }

  // Carries up: every chunk but the top in [0, 2^32), the top signed.
  void normalize() {
    for (int k = 0; k + 1 < kChunks; ++k) {
      const int64_t carry = chunk[k] >> 32;  // arithmetic: floor division by 2^32
      chunk[k] -= carry * (int64_t(1) << 32);
      chunk[k + 1] += carry;
    }
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

  // The exact sum rounded once to `f` (to nearest, ties to even), as a double that the format
  // holds exactly (or +-inf, NaN): the caller converts it to the format without another rounding.
  double result(ExactFormat f) const {
    if (nan || (pos_inf && neg_inf)) return std::nan("");
    if (pos_inf) return HUGE_VAL;
    if (neg_inf) return -HUGE_VAL;
    ExactAcc a = *this;
    a.normalize();
    const bool negative = a.chunk[kChunks - 1] < 0;
    if (negative) {  // the magnitude, normalized again
      for (int64_t& c : a.chunk) c = -c;
      a.normalize();
    }
    int top = kChunks - 1;
    while (top >= 0 && a.chunk[top] == 0) --top;
    if (top < 0) return any && not_neg_zero == 0 ? -0.0 : 0.0;  // no NaN or infinity got here
    const auto bit = [&](int b) { return int((uint64_t(a.chunk[b >> 5]) >> (b & 31)) & 1); };
    int msb = top * 32 + 31;
    while (!bit(msb)) --msb;
    const int msb_exponent = msb - 1074;
    const int lsb_exponent = std::max(msb_exponent, f.min_exponent) - (f.precision - 1);
    const int lsb = lsb_exponent + 1074;  // >= 0 for every format: double's subnormals are bit 0
    uint64_t r = 0;
    for (int b = msb; b >= lsb; --b) r = (r << 1) | uint64_t(bit(b));
    if (lsb >= 1 && bit(lsb - 1)) {
      bool sticky = false;
      for (int b = lsb - 2; b >= 0 && !sticky; --b) sticky = bit(b);
      if (sticky || (r & 1)) ++r;  // r may reach 2^precision: still exact, one exponent up
    }
    const double magnitude = std::ldexp(double(r), lsb_exponent);  // past the format's range: the caller's conversion gives inf
    return negative ? -magnitude : magnitude;
  }
};

}  // namespace treduce
