// Sums (and extrema) of contiguous runs on the CPU with explicit vectors: float32, float16 and bfloat16 in
// float, float64 in double, int64 in int64; whole float32 sums in double after groups of eight
// (f32_wide), whole float64 sums compensated (f64_compensated). GCC did not vectorise the
// generic loop well (16-bit floats stayed scalar; float32 reached 0.6-0.9x of torch.sum), so
// these loops name their vectors (GCC/Clang vector extensions). sum_simd.cpp builds them for the
// baseline x86-64 ISA and again for AVX2 + F16C, and picks at run time, as torch's own kernels
// do. Both builds add the same lanes in the same order (32 float lanes, 16 of double or int64; a
// cascade of 16 rows into a second level, 16 of those into a third, as torch's cascade_sum; then
// a fixed tree over the lanes), so the bits do not depend on the CPU, nor on the thread count.
#pragma once

#include <cstdint>

namespace treduce {
struct ExactAcc;
}

namespace treduce::cpu::simd {

// A sum kept as two doubles, hi + lo (lo: the rounding errors of hi's additions).
struct DoubleDouble {
  double hi, lo;
};

template <class T>
struct Extrema {
  T min, max;
};

// One contiguous run each; 16-bit floats as their bits.
struct SumKernels {
  float (*f32)(const float*, int64_t);
  double (*f32_wide)(const float*, int64_t);  // a float32 result's sum, in double (sum_f32_wide)
  double (*f64)(const double*, int64_t);
  DoubleDouble (*f64_compensated)(const double*, int64_t);  // a float64 result's sum (sum_f64_compensated)
  float (*f16)(const uint16_t*, int64_t);
  float (*bf16)(const uint16_t*, int64_t);
  int64_t (*i64)(const int64_t*, int64_t);  // wraps, as torch's int64 sum
  // variant="exact": the run's elements added into *acc, exactly (exact.h), the same words on
  // every instruction set.
  void (*exact_f32)(const float*, int64_t, ExactAcc*);
  void (*exact_f64)(const double*, int64_t, ExactAcc*);
  void (*exact_f16)(const uint16_t*, int64_t, ExactAcc*);
  void (*exact_bf16)(const uint16_t*, int64_t, ExactAcc*);
  // nansum (NaN as 0) and the sum of squares (vector_norm, ord 2) of a run, as f32 ... bf16 above
  // (the same lanes and cascade).
  struct {
    float (*f32)(const float*, int64_t);
    double (*f64)(const double*, int64_t);
    float (*f16)(const uint16_t*, int64_t);
    float (*bf16)(const uint16_t*, int64_t);
  } nansum, sumsq;
  // Extrema of a run of n >= 1 elements, NaN winning (NaN, both halves, when the run has one):
  // [0] the minimum, [1] the maximum, [2] both (the others' unused half is the type's top or
  // bottom); 16-bit floats as floats. Lanes are free here: nothing rounds.
  Extrema<float> (*extremum_f32[3])(const float*, int64_t);
  Extrema<double> (*extremum_f64[3])(const double*, int64_t);
  Extrema<float> (*extremum_f16[3])(const uint16_t*, int64_t);
  Extrema<float> (*extremum_bf16[3])(const uint16_t*, int64_t);
  Extrema<int8_t> (*extremum_i8[3])(const int8_t*, int64_t);
  Extrema<uint8_t> (*extremum_u8[3])(const uint8_t*, int64_t);
  Extrema<int16_t> (*extremum_i16[3])(const int16_t*, int64_t);
  Extrema<int32_t> (*extremum_i32[3])(const int32_t*, int64_t);
  Extrema<int64_t> (*extremum_i64[3])(const int64_t*, int64_t);
  // The first position of an element equal to v (of a NaN when v is NaN) in a run; n if none.
  int64_t (*find_f32)(const float*, int64_t, float);
  int64_t (*find_f64)(const double*, int64_t, double);
  int64_t (*find_f16)(const uint16_t*, int64_t, float);
  int64_t (*find_bf16)(const uint16_t*, int64_t, float);
  int64_t (*find_i8)(const int8_t*, int64_t, int8_t);
  int64_t (*find_u8)(const uint8_t*, int64_t, uint8_t);
  int64_t (*find_i16)(const int16_t*, int64_t, int16_t);
  int64_t (*find_i32)(const int32_t*, int64_t, int32_t);
  int64_t (*find_i64)(const int64_t*, int64_t, int64_t);
};

// The kernels for this CPU, chosen once.
const SumKernels& sum_kernels();

}  // namespace treduce::cpu::simd
