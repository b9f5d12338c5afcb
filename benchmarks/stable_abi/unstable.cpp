// The probe op on torch's full C++ API, as torch_reduce's ops are written: unboxed kernel, C++
// autograd that skips the graph node when no gradient is needed (csrc/torch/autograd.cpp's pattern).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

namespace {

// The whole sum of a small contiguous float32 CPU tensor: just enough work to be a real op.
at::Tensor sum_cpu(const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous(), "probe: contiguous float32 only");
  at::Tensor out = at::empty({}, x.options());
  const float* p = x.const_data_ptr<float>();
  float s = 0;
  for (int64_t i = 0; i < x.numel(); ++i) s += p[i];
  *out.mutable_data_ptr<float>() = s;
  return out;
}

at::Tensor sum_below(const at::Tensor& x) {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("treduce_probe_unstable::sum", "").typed<at::Tensor(const at::Tensor&)>();
  at::AutoDispatchBelowADInplaceOrView below;
  return op.call(x);
}

struct SumFunction : torch::autograd::Function<SumFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    ctx->saved_data["sizes"] = x.sizes();
    return sum_below(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list g) {
    return {g[0].expand(ctx->saved_data["sizes"].toIntVector())};
  }
};

at::Tensor sum_autograd(const at::Tensor& x) {
  if (!(at::GradMode::is_enabled() && x.requires_grad())) return sum_below(x);
  return SumFunction::apply(x);
}

}  // namespace

TORCH_LIBRARY(treduce_probe_unstable, m) { m.def("sum(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(treduce_probe_unstable, CPU, m) { m.impl("sum", &sum_cpu); }
TORCH_LIBRARY_IMPL(treduce_probe_unstable, Autograd, m) { m.impl("sum", &sum_autograd); }
