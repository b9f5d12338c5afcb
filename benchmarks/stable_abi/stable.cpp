// The same probe op on the LibTorch stable ABI (torch >= 2.10): a boxed kernel, every tensor
// query and the allocation through the C shim. The stable ABI has no autograd API; the gradient
// is registered from Python (probe.py).
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

namespace {

torch::stable::Tensor sum_cpu(torch::stable::Tensor x) {
  STD_TORCH_CHECK(x.scalar_type() == torch::headeronly::ScalarType::Float && x.is_contiguous(),
                  "probe: contiguous float32 only");
  torch::stable::Tensor out = torch::stable::new_empty(x, {});
  const float* p = static_cast<const float*>(x.data_ptr());
  float s = 0;
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) s += p[i];
  *static_cast<float*>(out.data_ptr()) = s;
  return out;
}

}  // namespace

// `sum` gets a gradient from Python, `sum_plain` none: the boxing cost alone.
STABLE_TORCH_LIBRARY(treduce_probe_stable, m) {
  m.def("sum(Tensor x) -> Tensor");
  m.def("sum_plain(Tensor x) -> Tensor");
}
STABLE_TORCH_LIBRARY_IMPL(treduce_probe_stable, CPU, m) {
  m.impl("sum", TORCH_BOX(&sum_cpu));
  m.impl("sum_plain", TORCH_BOX(&sum_cpu));
}
