// Gradients of sum, mean, amax, amin and the statistics, registered in C++ on the Autograd key: a Python
// formula there would cost every call, gradient or not, a trip through the interpreter
// (about 10 us, more than the kernel on small inputs). The backward passes are written with
// differentiable ops, so double backward works, and the one reduction they need (the count of
// tied extrema) is our own sum.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "reduce_common.h"
#include "treduce.h"

namespace treduce {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The reduced dims, wrapped and in increasing order (every dim for None or []).
std::vector<int64_t> reduced_dim_list(int64_t ndim, at::OptionalIntArrayRef dim) {
  const DimFlags reduced = reduced_dims(ndim, dim);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < ndim; ++i)
    if (reduced[i]) dims.push_back(i);
  return dims;
}

// A gradient of the result's shape, with the reduced dims back as size 1 (they are there
// already with keepdim), so it broadcasts against the input.
at::Tensor with_reduced_dims(at::Tensor g, const std::vector<int64_t>& dims, bool keepdim) {
  if (!keepdim)
    for (const int64_t d : dims) g = g.unsqueeze(d);
  return g;
}

template <class Signature>
auto redispatch(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

// The ops' kernels, below the Autograd key.
at::Tensor sum_or_mean_below(bool is_mean, const at::Tensor& self, c10::string_view variant,
                             at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  static const auto sum_op = redispatch<SumSignature>("treduce::sum");
  static const auto mean_op = redispatch<SumSignature>("treduce::mean");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return (is_mean ? mean_op : sum_op).call(self, variant, dim, keepdim, dtype);
}

at::Tensor extremum_below(bool is_max, const at::Tensor& self, c10::string_view variant,
                          at::OptionalIntArrayRef dim, bool keepdim) {
  static const auto amax_op = redispatch<MinMaxSignature>("treduce::amax");
  static const auto amin_op = redispatch<MinMaxSignature>("treduce::amin");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return (is_max ? amax_op : amin_op).call(self, variant, dim, keepdim);
}

// Whether a call must record a graph node. When not (no input needs a gradient, as in
// inference and most eager calls), the kernel below is called directly: building a Function
// node costs about 2 us, as much as the rest of a small call.
bool records_grad(const at::Tensor& self) {
  return at::GradMode::is_enabled() && self.requires_grad();
}

// sum and mean: every input element gets the incoming gradient (divided by the count, for
// mean), in the input's dtype.
class SumMeanFunction : public torch::autograd::Function<SumMeanFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, bool is_mean,
                            c10::string_view variant, at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype) {
    const at::Tensor out = sum_or_mean_below(is_mean, self, variant, dim, keepdim, dtype);
    // Symbolic sizes, so that torch.compile can trace this with dynamic shapes.
    const std::vector<int64_t> dims = reduced_dim_list(self.dim(), dim);
    c10::SymInt count = 1;
    for (const int64_t d : dims) count = count * self.sym_size(d);
    ctx->saved_data["sizes"] = self.sym_sizes();
    ctx->saved_data["dims"] = dims;
    ctx->saved_data["keepdim"] = keepdim;
    ctx->saved_data["is_mean"] = is_mean;
    ctx->saved_data["count"] = count;
    ctx->saved_data["dtype"] = self.scalar_type();
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto dims = ctx->saved_data["dims"].toIntVector();
    at::Tensor g = with_reduced_dims(grads[0], dims, ctx->saved_data["keepdim"].toBool());
    g = g.to(ctx->saved_data["dtype"].toScalarType());
    if (ctx->saved_data["is_mean"].toBool()) g = g / c10::Scalar(ctx->saved_data["count"].toSymInt());
    return {g.expand_symint(ctx->saved_data["sizes"].toSymIntVector()), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// amax and amin: the gradient is split evenly among the elements equal to the result, as
// torch does.
class MinMaxFunction : public torch::autograd::Function<MinMaxFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, bool is_max,
                            c10::string_view variant, at::OptionalIntArrayRef dim, bool keepdim) {
    const at::Tensor out = extremum_below(is_max, self, variant, dim, keepdim);
    ctx->saved_data["dims"] = reduced_dim_list(self.dim(), dim);
    ctx->saved_data["keepdim"] = keepdim;
    ctx->save_for_backward({self, out});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto dims = ctx->saved_data["dims"].toIntVector();
    const bool keepdim = ctx->saved_data["keepdim"].toBool();
    const at::Tensor hit = saved[0] == with_reduced_dims(saved[1], dims, keepdim);
    const at::Tensor ties = sum(hit, "auto", dims, /*keepdim=*/true);
    const at::Tensor g = with_reduced_dims(grads[0], dims, keepdim) / ties;
    return {g * hit, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// var, std, var_mean and std_mean, below the Autograd key: the op's kernel; one or two results.
variable_list var_below(ReduceOp op, const at::Tensor& self, at::OptionalIntArrayRef dim,
                        const std::optional<at::Scalar>& correction, bool keepdim) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  switch (op) {
    case ReduceOp::Var: {
      static const auto k = redispatch<VarSignature>("treduce::var");
      return {k.call(self, dim, correction, keepdim)};
    }
    case ReduceOp::Std: {
      static const auto k = redispatch<VarSignature>("treduce::std");
      return {k.call(self, dim, correction, keepdim)};
    }
    case ReduceOp::VarMean: {
      static const auto k = redispatch<VarMeanSignature>("treduce::var_mean");
      auto [v, m] = k.call(self, dim, correction, keepdim);
      return {v, m};
    }
    default: {
      static const auto k = redispatch<VarMeanSignature>("treduce::std_mean");
      auto [v, m] = k.call(self, dim, correction, keepdim);
      return {v, m};
    }
  }
}

// The statistics' gradients, as torch's var_backward and std_backward (FunctionsManual.cpp):
// var: 2 / (N - correction) * g * (x - mean); std: var's with g / (2 std), zero where std is
// zero; the _mean forms add the mean's gradient, g / N. The mean is our own (differentiable).
class VarFunction : public torch::autograd::Function<VarFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& self, int64_t op,
                               at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                               bool keepdim) {
    const auto kind = static_cast<ReduceOp>(op);
    variable_list out = var_below(kind, self, dim, correction, keepdim);
    const std::vector<int64_t> dims = reduced_dim_list(self.dim(), dim);
    c10::SymInt count = 1;
    for (const int64_t d : dims) count = count * self.sym_size(d);
    ctx->saved_data["op"] = op;
    ctx->saved_data["dims"] = dims;
    ctx->saved_data["all"] = !dim.has_value() || self.dim() == 0;
    ctx->saved_data["keepdim"] = keepdim;
    ctx->saved_data["count"] = count;
    ctx->saved_data["correction"] = correction ? correction->toDouble() : 1.0;
    const bool is_std = kind == ReduceOp::Std || kind == ReduceOp::StdMean;
    ctx->save_for_backward({self, is_std ? out[0] : at::Tensor()});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& self = saved[0];
    const auto kind = static_cast<ReduceOp>(ctx->saved_data["op"].toInt());
    const auto dims = ctx->saved_data["dims"].toIntVector();
    const bool keepdim = ctx->saved_data["keepdim"].toBool();
    const c10::SymInt count = ctx->saved_data["count"].toSymInt();
    const double correction = ctx->saved_data["correction"].toDouble();
    at::Tensor grad_self;
    if (grads[0].defined()) {
      at::Tensor g = grads[0];
      if (kind == ReduceOp::Std || kind == ReduceOp::StdMean) {
        const at::Tensor& result = saved[1];
        g = (g / (result * 2)).masked_fill(result == 0, 0);
      }
      g = with_reduced_dims(g, dims, keepdim);
      const at::Tensor centred = self - treduce::mean(self, dims, /*keepdim=*/true);
      const c10::SymFloat dof = count - correction;
      if (ctx->saved_data["all"].toBool() && dof <= c10::SymFloat(0.0)) {
        // As torch: inf where the element differs from the mean, NaN where it equals it.
        grad_self = g * at::where(centred == 0, std::numeric_limits<double>::quiet_NaN(),
                                  std::numeric_limits<double>::infinity());
      } else {
        grad_self = g * c10::Scalar(c10::SymFloat(2.0) / dof) * centred;
      }
    }
    if ((kind == ReduceOp::VarMean || kind == ReduceOp::StdMean) && grads[1].defined()) {
      at::Tensor gm = with_reduced_dims(grads[1], dims, keepdim) / c10::Scalar(count);
      gm = gm.expand_symint(self.sym_sizes());
      grad_self = grad_self.defined() ? grad_self + gm : gm;
    }
    return {grad_self, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// nansum, nanmean and logsumexp, below the Autograd key.
at::Tensor nan_or_lse_below(ReduceOp op, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype) {
  static const auto nansum_op = redispatch<NanSignature>("treduce::nansum");
  static const auto nanmean_op = redispatch<NanSignature>("treduce::nanmean");
  static const auto lse_op = redispatch<LogSumExpSignature>("treduce::logsumexp");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  if (op == ReduceOp::LogSumExp) return lse_op.call(self, dim.value_or(at::IntArrayRef{}), keepdim);
  return (op == ReduceOp::NanSum ? nansum_op : nanmean_op).call(self, dim, keepdim, dtype);
}

// Their gradients, as torch's: nansum's reaches the elements that are not NaN; nanmean's is
// that divided by their count; logsumexp's is g * exp(x - result).
class NanLseFunction : public torch::autograd::Function<NanLseFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, int64_t op, at::OptionalIntArrayRef dim,
                            bool keepdim, std::optional<at::ScalarType> dtype) {
    const auto kind = static_cast<ReduceOp>(op);
    const at::Tensor out = nan_or_lse_below(kind, self, dim, keepdim, dtype);
    ctx->saved_data["op"] = op;
    ctx->saved_data["dims"] = reduced_dim_list(self.dim(), dim);
    ctx->saved_data["keepdim"] = keepdim;
    ctx->save_for_backward({self, kind == ReduceOp::LogSumExp ? out : at::Tensor()});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& self = saved[0];
    const auto kind = static_cast<ReduceOp>(ctx->saved_data["op"].toInt());
    const auto dims = ctx->saved_data["dims"].toIntVector();
    const bool keepdim = ctx->saved_data["keepdim"].toBool();
    const at::Tensor g = with_reduced_dims(grads[0], dims, keepdim);
    at::Tensor grad;
    if (kind == ReduceOp::LogSumExp) {
      grad = g * (self - with_reduced_dims(saved[1], dims, keepdim)).exp();
    } else {
      const at::Tensor kept = self.isnan().logical_not();
      grad = g.to(self.scalar_type()) * kept;
      if (kind == ReduceOp::NanMean) grad = grad / sum(kept, "auto", dims, /*keepdim=*/true);
    }
    return {grad, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// prod and vector_norm, below the Autograd key.
at::Tensor prod_below(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                      std::optional<at::ScalarType> dtype) {
  static const auto k = redispatch<ProdSignature>("treduce::prod");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return k.call(self, dim, keepdim, dtype);
}

at::Tensor norm_below(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype) {
  static const auto k = redispatch<NormSignature>("treduce::vector_norm");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return k.call(self, ord, dim, keepdim, dtype);
}

// The product of every element of x along `dim` but itself: exclusive running products from
// both ends, multiplied (torch's prod_safe_zeros_backward). No division, so zeros in the input
// need no case of their own, and every op is differentiable (double backward works).
at::Tensor product_of_others(const at::Tensor& x, int64_t dim) {
  const c10::SymInt n = x.sym_size(dim);
  if (n == 0) return x;
  std::vector<c10::SymInt> ones_size(x.sym_sizes().begin(), x.sym_sizes().end());
  ones_size[dim] = 1;
  const at::Tensor ones = at::ones_symint(ones_size, x.options());
  const at::Tensor before = at::cat({ones, x.narrow_symint(dim, 0, n - 1)}, dim).cumprod(dim);
  const at::Tensor after =
      at::cat({ones, x.narrow_symint(dim, 1, n - 1).flip(dim)}, dim).cumprod(dim).flip(dim);
  return before * after;
}

// prod's gradient: g times the product of the other elements of the reduced run, in the
// result's dtype (as torch converts the input to it), then the input's dtype.
class ProdFunction : public torch::autograd::Function<ProdFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                            std::optional<at::ScalarType> dtype) {
    const at::Tensor out = prod_below(self, dim, keepdim, dtype);
    ctx->saved_data["dim"] = dim ? c10::IValue(*dim) : c10::IValue();
    ctx->saved_data["keepdim"] = keepdim;
    ctx->save_for_backward({self});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor self = ctx->get_saved_variables()[0];
    const c10::IValue dim = ctx->saved_data["dim"];
    at::Tensor g = grads[0];
    const at::Tensor x = self.to(g.scalar_type());
    at::Tensor grad;
    if (self.dim() == 0) {
      grad = g;
    } else if (dim.isNone()) {
      grad = (g * product_of_others(x.reshape({-1}), 0)).view_symint(self.sym_sizes());
    } else {
      const int64_t d = c10::maybe_wrap_dim(dim.toInt(), self.dim());
      if (!ctx->saved_data["keepdim"].toBool()) g = g.unsqueeze(d);
      grad = g * product_of_others(x, d);
    }
    return {grad.to(self.scalar_type()), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// vector_norm's gradient, as torch's norm_backward (FunctionsManual.cpp), order by order: none
// for 0; sgn(x) g for 1; g x / norm (0 where the norm is 0) for 2; for +-inf, g split evenly
// among the elements whose |x| is the result (or NaN), counted by our own sum; otherwise
// g sgn(x) |x|^(p-1) / norm^(p-1), with torch's masking of zeros.
class NormFunction : public torch::autograd::Function<NormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const at::Scalar& ord,
                            at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
    const at::Tensor out = norm_below(self, ord, dim, keepdim, dtype);
    ctx->saved_data["ord"] = ord.toDouble();
    ctx->saved_data["dims"] = reduced_dim_list(self.dim(), dim);
    ctx->saved_data["keepdim"] = keepdim;
    ctx->save_for_backward({self, out});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& self = saved[0];
    const double p = ctx->saved_data["ord"].toDouble();
    const auto dims = ctx->saved_data["dims"].toIntVector();
    const bool keepdim = ctx->saved_data["keepdim"].toBool() || self.dim() == 0;
    const at::Tensor g = with_reduced_dims(grads[0], dims, keepdim);
    const at::Tensor norm = with_reduced_dims(saved[1], dims, keepdim);
    at::Tensor grad;
    if (p == 0.0) {
      grad = at::zeros_like(self);
    } else if (p == 1.0) {
      grad = self.sgn() * g;
    } else if (p == 2.0) {
      grad = g * (self / norm).masked_fill(norm == 0, 0);
    } else if (std::isinf(p)) {
      const at::Tensor self_abs = self.abs();
      const at::Tensor mask = self_abs.eq(norm).logical_or(self_abs.isnan());
      grad = self.sgn() * ((g / sum(mask, "auto", dims, /*keepdim=*/true)) * mask);
    } else if (p < 1.0) {
      const at::Tensor scaled = self.sgn() * self.abs().pow(p - 1).masked_fill(self == 0, 0);
      grad = scaled * g * norm.pow(1 - p);
    } else {
      const at::Tensor scaled = p < 2.0 ? self.sgn() * self.abs().pow(p - 1) : self * self.abs().pow(p - 2);
      grad = scaled * (g / norm.pow(p - 1)).masked_fill(norm == 0, 0);
    }
    return {grad.to(self.scalar_type()), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor prod_autograd(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                         std::optional<at::ScalarType> dtype) {
  if (!records_grad(self)) return prod_below(self, dim, keepdim, dtype);
  return ProdFunction::apply(self, dim, keepdim, dtype);
}

at::Tensor norm_autograd(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                         std::optional<at::ScalarType> dtype) {
  if (!records_grad(self)) return norm_below(self, ord, dim, keepdim, dtype);
  return NormFunction::apply(self, ord, dim, keepdim, dtype);
}

template <ReduceOp kOp>
at::Tensor nan_autograd(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                        std::optional<at::ScalarType> dtype) {
  if (!records_grad(self)) return nan_or_lse_below(kOp, self, dim, keepdim, dtype);
  return NanLseFunction::apply(self, static_cast<int64_t>(kOp), dim, keepdim, dtype);
}

at::Tensor logsumexp_autograd(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
  if (!records_grad(self)) return nan_or_lse_below(ReduceOp::LogSumExp, self, dim, keepdim, std::nullopt);
  return NanLseFunction::apply(self, static_cast<int64_t>(ReduceOp::LogSumExp), dim, keepdim, std::nullopt);
}

variable_list var_autograd(ReduceOp op, const at::Tensor& self, at::OptionalIntArrayRef dim,
                           const std::optional<at::Scalar>& correction, bool keepdim) {
  if (!records_grad(self)) return var_below(op, self, dim, correction, keepdim);
  return VarFunction::apply(self, static_cast<int64_t>(op), dim, correction, keepdim);
}

template <ReduceOp kOp>
at::Tensor var_one(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                   bool keepdim) {
  return var_autograd(kOp, self, dim, correction, keepdim)[0];
}

template <ReduceOp kOp>
std::tuple<at::Tensor, at::Tensor> var_two(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                           const std::optional<at::Scalar>& correction, bool keepdim) {
  variable_list out = var_autograd(kOp, self, dim, correction, keepdim);
  return {out[0], out[1]};
}

at::Tensor sum_autograd(const at::Tensor& self, c10::string_view variant, at::OptionalIntArrayRef dim,
                        bool keepdim, std::optional<at::ScalarType> dtype) {
  if (!records_grad(self)) return sum_or_mean_below(false, self, variant, dim, keepdim, dtype);
  return SumMeanFunction::apply(self, false, variant, dim, keepdim, dtype);
}

at::Tensor mean_autograd(const at::Tensor& self, c10::string_view variant, at::OptionalIntArrayRef dim,
                         bool keepdim, std::optional<at::ScalarType> dtype) {
  if (!records_grad(self)) return sum_or_mean_below(true, self, variant, dim, keepdim, dtype);
  return SumMeanFunction::apply(self, true, variant, dim, keepdim, dtype);
}

at::Tensor amax_autograd(const at::Tensor& self, c10::string_view variant, at::OptionalIntArrayRef dim,
                         bool keepdim) {
  if (!records_grad(self)) return extremum_below(true, self, variant, dim, keepdim);
  return MinMaxFunction::apply(self, true, variant, dim, keepdim);
}

at::Tensor amin_autograd(const at::Tensor& self, c10::string_view variant, at::OptionalIntArrayRef dim,
                         bool keepdim) {
  if (!records_grad(self)) return extremum_below(false, self, variant, dim, keepdim);
  return MinMaxFunction::apply(self, false, variant, dim, keepdim);
}

// any, all and count_nonzero: results of bool and integer dtypes, never differentiable; the
// kernel below is called directly (the dispatcher's boxed fallback would cost every call).
template <ReduceOp kOp>
at::Tensor logic_autograd(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  static const auto any_op = redispatch<LogicSignature>("treduce::any");
  static const auto all_op = redispatch<LogicSignature>("treduce::all");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return (kOp == ReduceOp::Any ? any_op : all_op).call(self, dim, keepdim);
}

at::Tensor count_nonzero_autograd(const at::Tensor& self, at::OptionalIntArrayRef dim) {
  static const auto op = redispatch<CountSignature>("treduce::count_nonzero");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(self, dim);
}

std::tuple<at::Tensor, at::Tensor> aminmax_below(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  static const auto op = redispatch<AMinMaxSignature>("treduce::aminmax");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(self, dim, keepdim);
}

// aminmax: each result's gradient split evenly among the elements equal to it, as amax's and
// amin's (torch's rule from 2.12; torch 2.11's aminmax has none and raises at backward).
class AMinMaxFunction : public torch::autograd::Function<AMinMaxFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
    const auto [lo, hi] = aminmax_below(self, dim, keepdim);
    const std::vector<int64_t> one = dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{};
    ctx->saved_data["dims"] = reduced_dim_list(self.dim(), dim ? at::OptionalIntArrayRef(one) : std::nullopt);
    ctx->saved_data["keepdim"] = keepdim;
    ctx->save_for_backward({self, lo, hi});
    return {lo, hi};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto dims = ctx->saved_data["dims"].toIntVector();
    const bool keepdim = ctx->saved_data["keepdim"].toBool();
    at::Tensor g;
    for (int k = 0; k < 2; ++k) {
      if (!grads[k].defined()) continue;
      const at::Tensor hit = saved[0] == with_reduced_dims(saved[1 + k], dims, keepdim);
      const at::Tensor ties = sum(hit, "auto", dims, /*keepdim=*/true);
      const at::Tensor part = with_reduced_dims(grads[k], dims, keepdim) / ties * hit;
      g = g.defined() ? g + part : part;
    }
    return {g, at::Tensor(), at::Tensor()};
  }
};

std::tuple<at::Tensor, at::Tensor> aminmax_autograd(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  if (!records_grad(self)) return aminmax_below(self, dim, keepdim);
  const variable_list out = AMinMaxFunction::apply(self, dim, keepdim);
  return {out[0], out[1]};
}

// max and min over a dim: the gradient goes to the returned position, as torch's
// value_selecting_reduction_backward; the positions have none.
std::tuple<at::Tensor, at::Tensor> max_dim_below(bool is_max, const at::Tensor& self, int64_t dim, bool keepdim) {
  static const auto max_op = redispatch<MaxDimSignature>("treduce::max");
  static const auto min_op = redispatch<MaxDimSignature>("treduce::min");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return (is_max ? max_op : min_op).call(self, dim, keepdim);
}

class MaxDimFunction : public torch::autograd::Function<MaxDimFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& self, bool is_max, int64_t dim, bool keepdim) {
    const auto [values, indices] = max_dim_below(is_max, self, dim, keepdim);
    ctx->saved_data["sizes"] = self.sizes().vec();
    ctx->saved_data["dim"] = self.dim() == 0 ? int64_t(0) : c10::maybe_wrap_dim(dim, self.dim());
    ctx->saved_data["keepdim"] = keepdim;
    ctx->save_for_backward({indices});
    ctx->mark_non_differentiable({indices});
    return {values, indices};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto sizes = ctx->saved_data["sizes"].toIntVector();
    const int64_t dim = ctx->saved_data["dim"].toInt();
    at::Tensor g = grads[0], indices = ctx->get_saved_variables()[0];
    if (!ctx->saved_data["keepdim"].toBool() && !sizes.empty()) {
      g = g.unsqueeze(dim);
      indices = indices.unsqueeze(dim);
    }
    return {at::zeros(sizes, g.options()).scatter(dim, indices, g), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

template <bool kMax>
std::tuple<at::Tensor, at::Tensor> max_dim_autograd(const at::Tensor& self, int64_t dim, bool keepdim) {
  if (!records_grad(self)) return max_dim_below(kMax, self, dim, keepdim);
  const variable_list out = MaxDimFunction::apply(self, kMax, dim, keepdim);
  return {out[0], out[1]};
}

// argmax and argmin: int64 positions, never differentiable.
template <bool kMax>
at::Tensor arg_autograd(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  static const auto argmax_op = redispatch<ArgSignature>("treduce::argmax");
  static const auto argmin_op = redispatch<ArgSignature>("treduce::argmin");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return (kMax ? argmax_op : argmin_op).call(self, dim, keepdim);
}

// softmax and log_softmax: the gradient from the result alone (the backward ops); while a
// graph of the backward is recorded (double backward), the backward as differentiable ops (and
// our sum) instead.
using SoftmaxSignature = at::Tensor(const at::Tensor&, int64_t, std::optional<at::ScalarType>);
using SoftmaxBackwardSignature = at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, at::ScalarType);

at::Tensor softmax_below(SoftmaxOp op, const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  static const auto softmax_op = redispatch<SoftmaxSignature>("treduce::softmax");
  static const auto log_softmax_op = redispatch<SoftmaxSignature>("treduce::log_softmax");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return (op == SoftmaxOp::Softmax ? softmax_op : log_softmax_op).call(self, dim, dtype);
}

at::Tensor softmax_backward_below(SoftmaxOp op, const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                  at::ScalarType input_dtype) {
  static const auto softmax_op = redispatch<SoftmaxBackwardSignature>("treduce::softmax_backward");
  static const auto log_softmax_op = redispatch<SoftmaxBackwardSignature>("treduce::log_softmax_backward");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return (op == SoftmaxOp::SoftmaxBackward ? softmax_op : log_softmax_op).call(grad, output, dim, input_dtype);
}

// The backward ops through the dispatcher (their Autograd kernels below).
at::Tensor softmax_backward_call(SoftmaxOp op, const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                 at::ScalarType input_dtype) {
  static const auto softmax_op = c10::Dispatcher::singleton()
                                     .findSchemaOrThrow("treduce::softmax_backward", "")
                                     .typed<SoftmaxBackwardSignature>();
  static const auto log_softmax_op = c10::Dispatcher::singleton()
                                         .findSchemaOrThrow("treduce::log_softmax_backward", "")
                                         .typed<SoftmaxBackwardSignature>();
  return (op == SoftmaxOp::SoftmaxBackward ? softmax_op : log_softmax_op).call(grad, output, dim, input_dtype);
}

class SoftmaxFunction : public torch::autograd::Function<SoftmaxFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, int64_t op, int64_t dim,
                            std::optional<at::ScalarType> dtype) {
    const at::Tensor out = softmax_below(SoftmaxOp(op), self, dim, dtype);
    ctx->saved_data["op"] = op;
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["dtype"] = self.scalar_type();
    ctx->save_for_backward({out});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor out = ctx->get_saved_variables()[0];
    const SoftmaxOp back = SoftmaxOp(ctx->saved_data["op"].toInt()) == SoftmaxOp::Softmax
                               ? SoftmaxOp::SoftmaxBackward
                               : SoftmaxOp::LogSoftmaxBackward;
    const at::Tensor grad = softmax_backward_call(back, grads[0], out, ctx->saved_data["dim"].toInt(),
                                                  ctx->saved_data["dtype"].toScalarType());
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

template <SoftmaxOp kOp>
at::Tensor softmax_autograd(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  if (!records_grad(self)) return softmax_below(kOp, self, dim, dtype);
  return SoftmaxFunction::apply(self, int64_t(kOp), dim, dtype);
}

template <SoftmaxOp kOp>
at::Tensor softmax_backward_autograd(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                     at::ScalarType input_dtype) {
  if (!at::GradMode::is_enabled() || !(grad.requires_grad() || output.requires_grad()))
    return softmax_backward_below(kOp, grad, output, dim, input_dtype);
  const std::vector<int64_t> dims{dim};
  const at::Tensor g = grad.to(output.scalar_type());
  at::Tensor r;
  if constexpr (kOp == SoftmaxOp::SoftmaxBackward) r = output * (g - sum(g * output, "auto", dims, true));
  else r = g - output.exp() * sum(g, "auto", dims, true);
  return r.to(input_dtype);
}

// cross_entropy: the gradient from the logits and each sample's logsumexp (the backward op);
// while a graph of the backward is recorded (double backward), the same formula as
// differentiable ops (our softmax's among them) instead. No gradient for the weight, as torch.
using XentArgs = std::tuple<int64_t, int64_t, double>;  // reduction, ignore_index, label_smoothing
using CrossEntropyForwardSignature = std::tuple<at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, int64_t, int64_t, double);
using CrossEntropyBackwardSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                 const std::optional<at::Tensor>&, int64_t, int64_t, double,
                                                 const at::Tensor&, const at::Tensor&);

std::tuple<at::Tensor, at::Tensor, at::Tensor> xent_forward_below(const at::Tensor& self, const at::Tensor& target,
                                                                  const std::optional<at::Tensor>& weight,
                                                                  int64_t reduction, int64_t ignore_index,
                                                                  double smoothing) {
  static const auto op = redispatch<CrossEntropyForwardSignature>("treduce::cross_entropy_forward");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(self, target, weight, reduction, ignore_index, smoothing);
}

at::Tensor xent_backward_below(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                               const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                               double smoothing, const at::Tensor& lse, const at::Tensor& total_weight) {
  static const auto op = redispatch<CrossEntropyBackwardSignature>("treduce::cross_entropy_backward");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(grad, self, target, weight, reduction, ignore_index, smoothing, lse, total_weight);
}

// g_s ((1 - e) w_t (p - onehot_t) + (e / C) (p W - w)), 0 for ignored samples (cross_entropy.h).
at::Tensor xent_backward_composite(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                   const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                   double smoothing, const at::Tensor& total_weight) {
  static const auto softmax_op = c10::Dispatcher::singleton()
                                     .findSchemaOrThrow("treduce::softmax", "")
                                     .typed<SoftmaxSignature>();
  const int64_t class_dim = self.dim() == 1 ? 0 : 1;
  const int64_t classes = self.size(class_dim);
  const at::Tensor p = softmax_op.call(self, class_dim, std::nullopt);
  const at::Tensor valid = (target != ignore_index).unsqueeze(class_dim);
  const at::Tensor t = target.masked_fill(target == ignore_index, 0).unsqueeze(class_dim);
  const at::Tensor onehot = at::zeros_like(self).scatter(class_dim, t, 1.0);
  const bool has_weight = weight && weight->defined();
  std::vector<int64_t> shape(self.dim(), 1);
  shape[class_dim] = classes;
  const at::Tensor w_t = has_weight ? weight->index_select(0, t.reshape(-1)).view(t.sizes()) : at::ones_like(p);
  at::Tensor d = (1.0 - smoothing) * w_t * (p - onehot);
  if (smoothing != 0.0) {
    const at::Tensor w = has_weight ? weight->view(shape) : at::ones_like(p);
    const at::Tensor W = has_weight ? sum(*weight, "auto", std::nullopt, false, std::nullopt) : at::scalar_tensor(double(classes), p.options());
    d = d + (smoothing / double(classes)) * (p * W - w);
  }
  at::Tensor g = grad;
  if (reduction == 0) g = g.unsqueeze(class_dim);
  else if (reduction == 1) g = g / total_weight.to(g.scalar_type());
  return (d * g).masked_fill(valid.logical_not(), 0.0);
}

class CrossEntropyFunction : public torch::autograd::Function<CrossEntropyFunction> {
 public:
  // (The weight as an optional, not a variable: it gets no gradient, and an undefined tensor is
  // no input of a Function.)
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const at::Tensor& target,
                            const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                            double smoothing) {
    auto [loss, lse, total_weight] = xent_forward_below(self, target, weight, reduction, ignore_index, smoothing);
    ctx->save_for_backward({self, target, lse, total_weight});
    ctx->saved_data["weight"] = weight;
    ctx->saved_data["reduction"] = reduction;
    ctx->saved_data["ignore_index"] = ignore_index;
    ctx->saved_data["smoothing"] = smoothing;
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const std::optional<at::Tensor> w = ctx->saved_data["weight"].toOptional<at::Tensor>();
    const int64_t reduction = ctx->saved_data["reduction"].toInt();
    const int64_t ignore_index = ctx->saved_data["ignore_index"].toInt();
    const double smoothing = ctx->saved_data["smoothing"].toDouble();
    const at::Tensor grad =
        at::GradMode::is_enabled()
            ? xent_backward_composite(grads[0], saved[0], saved[1], w, reduction, ignore_index, smoothing, saved[3])
            : xent_backward_below(grads[0], saved[0], saved[1], w, reduction, ignore_index, smoothing, saved[2], saved[3]);
    return {grad, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor cross_entropy_autograd(const at::Tensor& self, const at::Tensor& target,
                                  const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                  double label_smoothing) {
  if (!records_grad(self))
    return std::get<0>(xent_forward_below(self, target, weight, reduction, ignore_index, label_smoothing));
  return CrossEntropyFunction::apply(self, target, weight, reduction, ignore_index, label_smoothing);
}

// The forward's three results carry no gradient (cross_entropy's does).
std::tuple<at::Tensor, at::Tensor, at::Tensor> cross_entropy_forward_autograd(
    const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight, int64_t reduction,
    int64_t ignore_index, double label_smoothing) {
  return xent_forward_below(self, target, weight, reduction, ignore_index, label_smoothing);
}

at::Tensor cross_entropy_backward_autograd(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                           const std::optional<at::Tensor>& weight, int64_t reduction,
                                           int64_t ignore_index, double label_smoothing, const at::Tensor& lse,
                                           const at::Tensor& total_weight) {
  if (at::GradMode::is_enabled() && (grad.requires_grad() || self.requires_grad()))
    return xent_backward_composite(grad, self, target, weight, reduction, ignore_index, label_smoothing, total_weight);
  return xent_backward_below(grad, self, target, weight, reduction, ignore_index, label_smoothing, lse, total_weight);
}

// layer_norm and rms_norm: the gradients from the input, the weight and each row's statistics
// (the backward ops, which compute only what the mask asks); while a graph of the backward is
// recorded (double backward), the forward's statistics recomputed and the same formulas as
// differentiable ops (our mean and sum) instead.
using LayerNormForwardSignature = std::tuple<at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor&, at::IntArrayRef, const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, double);
using LayerNormBackwardSignature = std::tuple<at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor&, const at::Tensor&, at::IntArrayRef, const at::Tensor&, const at::Tensor&,
    const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, std::array<bool, 3>);
using RmsNormForwardSignature = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, at::IntArrayRef,
                                                                   const std::optional<at::Tensor>&,
                                                                   std::optional<double>);
using RmsNormBackwardSignature = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                    at::IntArrayRef, const at::Tensor&,
                                                                    const std::optional<at::Tensor>&,
                                                                    std::array<bool, 2>);

std::optional<at::Tensor> defined_or_none(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

// Both norms' forward below the Autograd key: (y, mean (layer_norm; else undefined), rstd).
std::tuple<at::Tensor, at::Tensor, at::Tensor> norm_forward_below(NormKind kind, const at::Tensor& input,
                                                                  at::IntArrayRef shape,
                                                                  const std::optional<at::Tensor>& weight,
                                                                  const std::optional<at::Tensor>& bias,
                                                                  std::optional<double> eps) {
  static const auto layer_op = redispatch<LayerNormForwardSignature>("treduce::layer_norm_forward");
  static const auto rms_op = redispatch<RmsNormForwardSignature>("treduce::rms_norm_forward");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  if (kind == NormKind::Layer) return layer_op.call(input, shape, weight, bias, eps.value_or(1e-5));
  auto [y, rstd] = rms_op.call(input, shape, weight, eps);
  return {y, at::Tensor(), rstd};
}

// Both norms' backward ops through the dispatcher (their Autograd kernels below).
std::tuple<at::Tensor, at::Tensor, at::Tensor> norm_backward_call(NormKind kind, const at::Tensor& grad,
                                                                  const at::Tensor& input, at::IntArrayRef shape,
                                                                  const at::Tensor& mean, const at::Tensor& rstd,
                                                                  const std::optional<at::Tensor>& weight,
                                                                  const std::optional<at::Tensor>& bias,
                                                                  std::array<bool, 3> mask) {
  static const auto layer_op = c10::Dispatcher::singleton()
                                   .findSchemaOrThrow("treduce::layer_norm_backward", "")
                                   .typed<LayerNormBackwardSignature>();
  static const auto rms_op = c10::Dispatcher::singleton()
                                 .findSchemaOrThrow("treduce::rms_norm_backward", "")
                                 .typed<RmsNormBackwardSignature>();
  if (kind == NormKind::Layer) return layer_op.call(grad, input, shape, mean, rstd, weight, bias, mask);
  auto [dx, dw] = rms_op.call(grad, input, shape, rstd, weight, {mask[0], mask[1]});
  return {dx, dw, at::Tensor()};
}

// dx, dw, db as differentiable ops (layer_norm.h's formulas). The mean is recomputed from x;
// rstd keeps the forward's value, with the derivative it has as a function of x: d rstd =
// -rstd^3 / 2 d(mean of xc^2), whatever eps was (the backward ops are not given it).
std::tuple<at::Tensor, at::Tensor, at::Tensor> norm_backward_composite(NormKind kind, const at::Tensor& grad,
                                                                       const at::Tensor& input, at::IntArrayRef shape,
                                                                       const std::optional<at::Tensor>& weight,
                                                                       const at::Tensor& saved_rstd,
                                                                       std::array<bool, 3> mask) {
  const int64_t k = int64_t(shape.size());
  std::vector<int64_t> last, lead;
  for (int64_t d = 0; d < input.dim(); ++d) (d >= input.dim() - k ? last : lead).push_back(d);
  const at::Tensor g = grad.to(input.scalar_type());
  at::Tensor xc = input;
  if (kind == NormKind::Layer) xc = input - treduce::mean(input, last, true);
  const at::Tensor squares = treduce::mean(xc * xc, last, true);
  const at::Tensor r0 = saved_rstd.detach().to(input.scalar_type()).view(squares.sizes());
  const at::Tensor rstd = r0 - 0.5 * r0.pow(3) * (squares - squares.detach());
  const at::Tensor xhat = xc * rstd;
  const bool has_weight = weight && weight->defined();
  const at::Tensor gw = has_weight ? g * *weight : g;
  at::Tensor dx, dw, db;
  if (mask[0]) {
    at::Tensor inner = gw - xhat * treduce::mean(gw * xhat, last, true);
    if (kind == NormKind::Layer) inner = inner - treduce::mean(gw, last, true);
    dx = rstd * inner;
  }
  if (mask[1] && has_weight) dw = lead.empty() ? g * xhat : treduce::sum(g * xhat, "auto", lead, false);
  if (mask[2] && kind == NormKind::Layer) db = lead.empty() ? g : treduce::sum(g, "auto", lead, false);
  return {dx, dw, db};
}

class RowNormFunction : public torch::autograd::Function<RowNormFunction> {
 public:
  // weight and bias as optionals: absent, they are no input of the graph (no edge, no gradient).
  static variable_list forward(AutogradContext* ctx, const at::Tensor& input, const std::optional<at::Tensor>& weight,
                               const std::optional<at::Tensor>& bias, int64_t kind, std::vector<int64_t> shape,
                               std::optional<double> eps) {
    auto [y, mean, rstd] = norm_forward_below(NormKind(kind), input, shape, weight, bias, eps);
    ctx->save_for_backward({input, weight.value_or(at::Tensor()), bias.value_or(at::Tensor()), mean, rstd});
    ctx->saved_data["kind"] = kind;
    ctx->saved_data["shape"] = shape;
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const NormKind kind = NormKind(ctx->saved_data["kind"].toInt());
    const std::vector<int64_t> shape = ctx->saved_data["shape"].toIntVector();
    // (needs_input_grad counts the graph's inputs: an absent weight is none)
    const bool has_w = saved[1].defined(), has_b = saved[2].defined();
    const std::array<bool, 3> mask{ctx->needs_input_grad(0), has_w && ctx->needs_input_grad(1),
                                   has_b && ctx->needs_input_grad(has_w ? 2 : 1)};
    at::Tensor dx, dw, db;
    if (at::GradMode::is_enabled())
      std::tie(dx, dw, db) = norm_backward_composite(kind, grads[0], saved[0], shape, defined_or_none(saved[1]),
                                                     saved[4], mask);
    else
      std::tie(dx, dw, db) = norm_backward_call(kind, grads[0], saved[0], shape, saved[3], saved[4],
                                                defined_or_none(saved[1]), defined_or_none(saved[2]), mask);
    return {dx, dw, db, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

bool norm_records_grad(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                       const std::optional<at::Tensor>& bias) {
  return records_grad(input) || (weight && records_grad(*weight)) || (bias && records_grad(*bias));
}

at::Tensor row_norm_autograd(NormKind kind, const at::Tensor& input, at::IntArrayRef shape,
                         const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                         std::optional<double> eps) {
  if (!norm_records_grad(input, weight, bias)) return std::get<0>(norm_forward_below(kind, input, shape, weight, bias, eps));
  return RowNormFunction::apply(input, defined_or_none(weight.value_or(at::Tensor())),
                                defined_or_none(bias.value_or(at::Tensor())), int64_t(kind), shape.vec(), eps)[0];
}

at::Tensor layer_norm_autograd(const at::Tensor& input, at::IntArrayRef shape, const std::optional<at::Tensor>& weight,
                               const std::optional<at::Tensor>& bias, double eps) {
  return row_norm_autograd(NormKind::Layer, input, shape, weight, bias, eps);
}

at::Tensor rms_norm_autograd(const at::Tensor& input, at::IntArrayRef shape, const std::optional<at::Tensor>& weight,
                             std::optional<double> eps) {
  return row_norm_autograd(NormKind::Rms, input, shape, weight, std::nullopt, eps);
}

// The forwards' results carry no gradient (layer_norm's and rms_norm's do).
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_forward_autograd(const at::Tensor& input,
                                                                           at::IntArrayRef shape,
                                                                           const std::optional<at::Tensor>& weight,
                                                                           const std::optional<at::Tensor>& bias,
                                                                           double eps) {
  return norm_forward_below(NormKind::Layer, input, shape, weight, bias, eps);
}

std::tuple<at::Tensor, at::Tensor> rms_norm_forward_autograd(const at::Tensor& input, at::IntArrayRef shape,
                                                             const std::optional<at::Tensor>& weight,
                                                             std::optional<double> eps) {
  auto [y, mean, rstd] = norm_forward_below(NormKind::Rms, input, shape, weight, std::nullopt, eps);
  return {y, rstd};
}

// The backward ops: below the Autograd key, or, recording a graph, the composite (from the
// input: the saved statistics are not differentiated).
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward_autograd(
    const at::Tensor& grad, const at::Tensor& input, at::IntArrayRef shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> mask) {
  if (at::GradMode::is_enabled() && (grad.requires_grad() || input.requires_grad() || (weight && weight->requires_grad())))
    return norm_backward_composite(NormKind::Layer, grad, input, shape, weight, rstd,
                                   {mask[0], mask[1], mask[2] && bias && bias->defined()});
  static const auto op = redispatch<LayerNormBackwardSignature>("treduce::layer_norm_backward");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(grad, input, shape, mean, rstd, weight, bias, mask);
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward_autograd(const at::Tensor& grad, const at::Tensor& input,
                                                              at::IntArrayRef shape, const at::Tensor& rstd,
                                                              const std::optional<at::Tensor>& weight,
                                                              std::array<bool, 2> mask) {
  if (at::GradMode::is_enabled() && (grad.requires_grad() || input.requires_grad() || (weight && weight->requires_grad()))) {
    auto [dx, dw, db] = norm_backward_composite(NormKind::Rms, grad, input, shape, weight, rstd, {mask[0], mask[1], false});
    return {dx, dw};
  }
  static const auto op = redispatch<RmsNormBackwardSignature>("treduce::rms_norm_backward");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(grad, input, shape, rstd, weight, mask);
}

}  // namespace

// Every op's Autograd kernel, from the op table (ops.h).
void register_autograd(torch::Library& m) {
#define TREDUCE_AUTOGRAD(name, kernel, autograd, schema) m.impl(#name, &autograd);
  TREDUCE_ALL_OPS(TREDUCE_AUTOGRAD)
#undef TREDUCE_AUTOGRAD
}

}  // namespace treduce

TORCH_LIBRARY_IMPL(treduce, Autograd, m) { treduce::register_autograd(m); }
