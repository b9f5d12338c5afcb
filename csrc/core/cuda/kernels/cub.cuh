// cub: cub::DeviceReduce::TransformReduce with the op's accumulator semantics (each element
// converted through Mid into Acc, summed in Acc). Not a seed technique: the benchmark's
// in-run reference for what a tuned library reaches on this GPU. Deterministic run to run.
#pragma once

#include <cub/device/device_reduce.cuh>

#include <algorithm>

#include "common.cuh"

namespace treduce::cuda {

template <class R>
struct ConvertElement {
  __device__ __forceinline__ typename R::Acc operator()(typename R::In v) const {
    return R::convert(v);
  }
};

template <class Op>
struct Combine {
  __device__ __forceinline__ typename Op::acc_t operator()(typename Op::acc_t a,
                                                           typename Op::acc_t b) const {
    return Op::combine(a, b);
  }
};

template <class In, class Mid, class Acc>
cudaError_t run_cub(const ReduceArgs& a, size_t* workspace_bytes) {
  using R = Reduction<In, Mid, Sum<Acc>>;
  // CUB writes Acc; when the result has another dtype it goes through scratch and store().
  const bool direct = a.types.out == dtype_of<Acc>();
  const auto* x = static_cast<const In*>(a.in);
  auto reduce = [&](void* temp, size_t& temp_bytes, Acc* out) {
    return cub::DeviceReduce::TransformReduce(temp, temp_bytes, x, out, a.n,
                                              Combine<typename R::Op>{}, ConvertElement<R>{},
                                              R::Op::identity(), a.stream);
  };
  size_t temp_bytes = 0;
  if (cudaError_t e = reduce(nullptr, temp_bytes, nullptr); e != cudaSuccess) return e;
  // At least one byte: CUB takes a null temporary-storage pointer as a size query.
  const size_t temp_rounded = (std::max<size_t>(temp_bytes, 1) + 255) / 256 * 256;
  if (workspace_bytes) {
    *workspace_bytes = temp_rounded + (direct ? 0 : sizeof(Acc));
    return cudaSuccess;
  }
  Acc* out = direct ? static_cast<Acc*>(a.out)
                    : reinterpret_cast<Acc*>(static_cast<char*>(a.workspace) + temp_rounded);
  if (cudaError_t e = reduce(a.workspace, temp_bytes, out); e != cudaSuccess) return e;
  if (direct) return cudaSuccess;
  store_value_kernel<Acc><<<1, 1, 0, a.stream>>>(out, Sink{a.out, a.types.out});
  return last_launch_error();
}

#define TREDUCE_INSTANTIATE_RUN_CUB(IN, MID, ACC)                             \
  template cudaError_t run_cub<ctype_t<DType::IN>, ctype_t<DType::MID>,       \
                               ctype_t<DType::ACC>>(const ReduceArgs&, size_t*);

}  // namespace treduce::cuda
