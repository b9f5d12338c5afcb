// c10's 16-bit floats as the core code's Lowp types (convert.h), for every CPU unit: one
// definition of each conversion.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <cstring>

#include "../../core/convert.h"

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

}  // namespace treduce
