// Torch-side checks and planning shared by the CPU and CUDA implementations of every op, so
// that both reject the same inputs with the same messages and read the input the same way.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/OptionalArrayRef.h>
#include <c10/util/string_view.h>

#include <optional>
#include <vector>

#include "dtype.h"
#include "layout.h"
#include "variant.h"

namespace treduce {

inline constexpr at::ScalarType kScalarTypes[kNumDTypes] = {
    at::kBool, at::kByte, at::kChar, at::kShort, at::kInt,
    at::kLong, at::kHalf, at::kBFloat16, at::kFloat, at::kDouble};

constexpr at::ScalarType to_scalar_type(DType t) { return kScalarTypes[static_cast<int>(t)]; }

// One call of sum, mean, amax or amin, checked and planned.
struct Prepared {
  ReduceOp op;
  SumTypes types;     // for amax/amin: in = mid = out, acc as minmax_acc_dtype
  int variant = 0;    // index into the device's variant table
  bool is_auto = true;
  at::Tensor out;     // the result, allocated (contiguous)
  bool done = false;  // out is final already: it is empty, or nothing was reduced into it
  at::Tensor input;   // what the kernels read: self, or a copy with the reduced dims last
  Layout3 layout;     // input and out as (outer, reduced, inner); see layout.h
};

// Checks the arguments exactly as torch does for its own op (dims, dtypes, empty inputs),
// allocates the result and works out the layout. Non-auto variants get a contiguous input
// and a full reduction (they reject dims that leave more than one result).
Prepared prepare_reduce(ReduceOp op, const at::Tensor& self, c10::string_view variant,
                        at::OptionalIntArrayRef dim, bool keepdim,
                        std::optional<at::ScalarType> dtype);

const char* op_name(ReduceOp op);

// One device's kernels of the four ops, as TORCH_LIBRARY_IMPL registers them: for callers that
// are already below the dispatcher's autograd and device keys (the aten override).
using SumKernel = at::Tensor (*)(const at::Tensor&, c10::string_view, at::OptionalIntArrayRef, bool,
                                 std::optional<at::ScalarType>);
using ExtremumKernel = at::Tensor (*)(const at::Tensor&, c10::string_view, at::OptionalIntArrayRef, bool);
struct DeviceKernels {
  SumKernel sum, mean;
  ExtremumKernel amax, amin;
};
DeviceKernels cpu_kernels();
DeviceKernels cuda_kernels();  // only in a build with CUDA

// Which of ndim dims `dim` reduces: all of them for None or [], else the listed ones, wrapped
// as torch wraps them; torch's errors for a dim out of range or repeated.
std::vector<bool> reduced_dims(int64_t ndim, at::OptionalIntArrayRef dim);

}  // namespace treduce
