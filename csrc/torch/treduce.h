// The C++ entry points for LibTorch users: each calls the op through the dispatcher, so
// autograd applies as from Python.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/core/ScalarType.h>
#include <c10/util/OptionalArrayRef.h>
#include <c10/util/string_view.h>

#include <optional>
#include <string_view>
#include <tuple>

namespace treduce {

// The signatures of the sum and mean ops, and of amax and amin (variant second).
using SumSignature = at::Tensor(const at::Tensor&, c10::string_view, at::OptionalIntArrayRef, bool,
                                std::optional<at::ScalarType>);
using MinMaxSignature = at::Tensor(const at::Tensor&, c10::string_view, at::OptionalIntArrayRef, bool);
// var and std, var_mean and std_mean: aten's correction overloads.
using VarSignature = at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, const std::optional<at::Scalar>&, bool);
// nansum and nanmean (aten's), logsumexp (aten's).
using NanSignature = at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, bool, std::optional<at::ScalarType>);
using LogSumExpSignature = at::Tensor(const at::Tensor&, at::IntArrayRef, bool);
using ProdSignature = at::Tensor(const at::Tensor&, std::optional<int64_t>, bool, std::optional<at::ScalarType>);
using NormSignature = at::Tensor(const at::Tensor&, const at::Scalar&, at::OptionalIntArrayRef, bool,
                                 std::optional<at::ScalarType>);
using VarMeanSignature = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, at::OptionalIntArrayRef,
                                                            const std::optional<at::Scalar>&, bool);
// any and all (aten's any.dims), count_nonzero, aminmax (aten's).
using LogicSignature = at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, bool);
using CountSignature = at::Tensor(const at::Tensor&, at::OptionalIntArrayRef);
using AMinMaxSignature = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, std::optional<int64_t>, bool);
// max and min over a dim (aten's max.dim), argmax and argmin (aten's).
using MaxDimSignature = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, int64_t, bool);
using ArgSignature = at::Tensor(const at::Tensor&, std::optional<int64_t>, bool);

// torch.sum(x, dim, keepdim, dtype=dtype), computed by the named variant on x's device (see
// torch_reduce.variants() or the README). dim: nullopt or {} reduces every dim; variants other
// than "auto" reduce whole tensors only.
at::Tensor sum(const at::Tensor& x, std::string_view variant = "auto",
               at::OptionalIntArrayRef dim = std::nullopt, bool keepdim = false,
               std::optional<at::ScalarType> dtype = std::nullopt);

// torch.mean, torch.amax and torch.amin, by "auto".
at::Tensor mean(const at::Tensor& x, at::OptionalIntArrayRef dim = std::nullopt, bool keepdim = false,
                std::optional<at::ScalarType> dtype = std::nullopt);
at::Tensor amax(const at::Tensor& x, at::OptionalIntArrayRef dim = std::nullopt, bool keepdim = false);
at::Tensor amin(const at::Tensor& x, at::OptionalIntArrayRef dim = std::nullopt, bool keepdim = false);

// torch.var, torch.std, torch.var_mean and torch.std_mean with a correction (default 1), by
// "auto": Welford's method, one read of the input.
at::Tensor var(const at::Tensor& x, at::OptionalIntArrayRef dim = std::nullopt,
               const std::optional<at::Scalar>& correction = std::nullopt, bool keepdim = false);
at::Tensor std(const at::Tensor& x, at::OptionalIntArrayRef dim = std::nullopt,
               const std::optional<at::Scalar>& correction = std::nullopt, bool keepdim = false);
std::tuple<at::Tensor, at::Tensor> var_mean(const at::Tensor& x, at::OptionalIntArrayRef dim = std::nullopt,
                                            const std::optional<at::Scalar>& correction = std::nullopt,
                                            bool keepdim = false);
std::tuple<at::Tensor, at::Tensor> std_mean(const at::Tensor& x, at::OptionalIntArrayRef dim = std::nullopt,
                                            const std::optional<at::Scalar>& correction = std::nullopt,
                                            bool keepdim = false);

// torch.nansum, torch.nanmean (NaN counts as absent) and torch.logsumexp (dim {} : every dim), by "auto".
at::Tensor nansum(const at::Tensor& x, at::OptionalIntArrayRef dim = std::nullopt, bool keepdim = false,
                  std::optional<at::ScalarType> dtype = std::nullopt);
at::Tensor nanmean(const at::Tensor& x, at::OptionalIntArrayRef dim = std::nullopt, bool keepdim = false,
                   std::optional<at::ScalarType> dtype = std::nullopt);
at::Tensor logsumexp(const at::Tensor& x, at::IntArrayRef dim, bool keepdim = false);

// torch.prod (dim: one dim or every dim) and torch.linalg.vector_norm (ord 2, 1, inf, -inf, 0 or
// any other), by "auto".
at::Tensor prod(const at::Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                std::optional<at::ScalarType> dtype = std::nullopt);
at::Tensor vector_norm(const at::Tensor& x, const at::Scalar& ord = 2, at::OptionalIntArrayRef dim = std::nullopt,
                       bool keepdim = false, std::optional<at::ScalarType> dtype = std::nullopt);

// torch.any and torch.all (bool results, uint8 for uint8 input; dim {} reduces nothing, as
// torch's), torch.count_nonzero (dim nullopt or {}: every dim) and torch.aminmax, by "auto".
at::Tensor any(const at::Tensor& x, at::OptionalIntArrayRef dim = std::nullopt, bool keepdim = false);
at::Tensor all(const at::Tensor& x, at::OptionalIntArrayRef dim = std::nullopt, bool keepdim = false);
at::Tensor count_nonzero(const at::Tensor& x, at::OptionalIntArrayRef dim = std::nullopt);
std::tuple<at::Tensor, at::Tensor> aminmax(const at::Tensor& x, std::optional<int64_t> dim = std::nullopt,
                                           bool keepdim = false);

// torch.max and torch.min over a dim: (values, indices), the index of the first extremum (NaN
// wins); torch.argmax and torch.argmin (dim nullopt: the position in the flattened tensor).
std::tuple<at::Tensor, at::Tensor> max(const at::Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<at::Tensor, at::Tensor> min(const at::Tensor& x, int64_t dim, bool keepdim = false);
at::Tensor argmax(const at::Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
at::Tensor argmin(const at::Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

}  // namespace treduce
