// Element conversion with torch's cast semantics, for the CPU and the CUDA
// code alike. Half and bfloat16 go through float both ways (c10::Half and
// c10::BFloat16 convert from float only), bool means "non-zero", everything
// else is a static_cast. Each side says which of its types are low-precision
// by specialising Lowp<T> with to_float / from_float.
#pragma once

#include <type_traits>

#if defined(__CUDACC__)
#define TREDUCE_HOST_DEVICE __host__ __device__ __forceinline__
#define TREDUCE_UNROLL _Pragma("unroll")
#else
#define TREDUCE_HOST_DEVICE inline
#define TREDUCE_UNROLL
#endif

namespace treduce {

template <class T>
struct Lowp : std::false_type {};

template <class To, class From>
TREDUCE_HOST_DEVICE To element_cast(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (Lowp<From>::value) {
    return element_cast<To>(Lowp<From>::to_float(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (Lowp<To>::value) {
    return Lowp<To>::from_float(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

// acc(mid(x)): how every variant turns one input element into its accumulator.
template <class In, class Mid, class Acc>
struct Load {
  TREDUCE_HOST_DEVICE static Acc apply(In v) { return element_cast<Acc>(element_cast<Mid>(v)); }
};

}  // namespace treduce
