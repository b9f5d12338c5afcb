// Torch-side checks and conversions shared by the CPU and CUDA
// implementations of treduce::sum, so that both reject the same inputs with
// the same messages.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/string_view.h>

#include <optional>

#include "dtype.h"
#include "variant.h"

namespace treduce {

// Checks the dtypes; returns what the sum reads, converts through,
// accumulates in and returns (the same result dtype as torch.sum).
SumTypes check_sum_args(const at::Tensor& self, std::optional<at::ScalarType> dtype);

inline constexpr at::ScalarType kScalarTypes[kNumDTypes] = {
    at::kBool, at::kByte, at::kChar, at::kShort, at::kInt,
    at::kLong, at::kHalf, at::kBFloat16, at::kFloat, at::kDouble};

constexpr at::ScalarType to_scalar_type(DType t) { return kScalarTypes[static_cast<int>(t)]; }

// Index of `name` in the table for tensors on `device`; otherwise an error
// that says which variants that tensor can use.
int lookup_variant(c10::DeviceType device, c10::string_view name);

// `self`, or a contiguous copy when its elements are not one dense block of
// memory (a full reduction does not care about their order inside it).
at::Tensor dense_input(const at::Tensor& self);

}  // namespace treduce
