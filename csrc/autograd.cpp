// Gradients of sum, mean, amax and amin, registered in C++ on the Autograd key: a Python
// formula there would cost every call, gradient or not, a trip through the interpreter
// (about 10 us, more than the kernel on small inputs). The backward passes are written with
// differentiable ops, so double backward works, and the one reduction they need (the count of
// tied extrema) is our own sum.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <vector>

#include "reduce_common.h"
#include "treduce.h"

namespace treduce {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The reduced dims, wrapped and in increasing order (every dim for None or []).
std::vector<int64_t> reduced_dim_list(int64_t ndim, at::OptionalIntArrayRef dim) {
  const std::vector<bool> reduced = reduced_dims(ndim, dim);
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

}  // namespace
}  // namespace treduce

TORCH_LIBRARY_IMPL(treduce, Autograd, m) {
  m.impl("sum", &treduce::sum_autograd);
  m.impl("mean", &treduce::mean_autograd);
  m.impl("amax", &treduce::amax_autograd);
  m.impl("amin", &treduce::amin_autograd);
}
