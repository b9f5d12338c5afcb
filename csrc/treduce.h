// The C++ entry point for LibTorch users.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <string_view>

namespace treduce {

// torch.ops.treduce.sum through the dispatcher: the sum of all elements of
// `x` as a 0-d tensor, with torch.sum's result dtype (or `dtype`), computed
// by the named variant on x's device. See torch_reduce.variants() or the
// README for the names.
at::Tensor sum(const at::Tensor& x, std::string_view variant = "auto",
               std::optional<at::ScalarType> dtype = std::nullopt);

}  // namespace treduce
