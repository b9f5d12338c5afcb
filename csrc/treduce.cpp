// The treduce operator library: every op's schema, the checks the CPU and
// CUDA implementations share, and the C++ entry point. The kernels register
// themselves in cpu/sum_cpu.cpp and cuda/ops.cpp.
#include "treduce.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <string>

#include "sum_common.h"

namespace treduce {

namespace {

std::string supported_dtypes() {
  std::string s;
  for (int i = 0; i < kNumDTypes; ++i) s += std::string(i ? ", " : "") + dtype_name(DType(i));
  return s;
}

DType to_dtype(at::ScalarType t, const char* what) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kScalarTypes[i] == t) return DType(i);
  TORCH_CHECK_TYPE(false, "treduce.sum: ", what, " ", c10::toString(t),
                   " is not supported; supported dtypes: ", supported_dtypes());
}

std::string names(VariantTable t) {
  std::string s;
  for (int i = 0; i < t.count; ++i) s += std::string(i ? ", " : "") + t.docs[i].name;
  return s;
}

// One record per variant for treduce::variants, fields tab-separated.
std::vector<std::string> describe(VariantTable t) {
  std::vector<std::string> rows;
  for (int i = 0; i < t.count; ++i) {
    const VariantDoc& d = t.docs[i];
    rows.push_back(std::string(d.name) + '\t' + d.technique + '\t' + d.seed + '\t' +
                   d.fixes + '\t' + d.kernel + '\t' +
                   (d.float_atomics ? "nondeterministic" : "deterministic"));
  }
  return rows;
}

std::vector<std::string> variants_op(c10::string_view device) {
  const c10::DeviceType type = c10::Device(std::string(device)).type();
  TORCH_CHECK_VALUE(type == c10::DeviceType::CPU || type == c10::DeviceType::CUDA,
                    "treduce.variants: expected 'cpu' or 'cuda', got '", device, "'");
  return describe(type == c10::DeviceType::CPU ? cpu_variants() : cuda_variants());
}

}  // namespace

SumTypes check_sum_args(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  const DType in = to_dtype(self.scalar_type(), "input dtype");
  const DType out = dtype ? to_dtype(*dtype, "dtype=") : default_sum_dtype(in);
  return plan_sum_types(in, out);
}

int lookup_variant(c10::DeviceType device, c10::string_view name) {
  const bool on_cpu = device == c10::DeviceType::CPU;
  const VariantTable own = on_cpu ? cpu_variants() : cuda_variants();
  const VariantTable other = on_cpu ? cuda_variants() : cpu_variants();
  const char* here = on_cpu ? "CPU" : "CUDA";
  const int i = own.find(name);
  if (i >= 0) return i;
  TORCH_CHECK_VALUE(other.find(name) < 0, "treduce.sum: variant '", name, "' runs on ",
                    on_cpu ? "CUDA" : "CPU", " tensors only; ", here,
                    " tensors can use: ", names(own));
  TORCH_CHECK_VALUE(false, "treduce.sum: unknown variant '", name, "'; ", here,
                    " tensors can use: ", names(own));
}

at::Tensor dense_input(const at::Tensor& self) {
  return self.is_non_overlapping_and_dense() ? self : self.contiguous();
}

at::Tensor sum(const at::Tensor& x, std::string_view variant,
               std::optional<at::ScalarType> dtype) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("treduce::sum", "")
          .typed<at::Tensor(const at::Tensor&, c10::string_view,
                            std::optional<at::ScalarType>)>();
  return op.call(x, c10::string_view(variant.data(), variant.size()), dtype);
}

#ifndef TREDUCE_WITH_CUDA
VariantTable cuda_variants() { return {nullptr, 0}; }
#endif

}  // namespace treduce

// `dim` and `keepdim` will join `sum` as optional arguments after `variant`,
// so existing calls keep their meaning.
TORCH_LIBRARY(treduce, m) {
  m.def("sum(Tensor self, str variant=\"auto\", *, ScalarType? dtype=None) -> Tensor");
  m.def("variants(str device) -> str[]", &treduce::variants_op);
  // Diagnostic, for the benchmark (CUDA only): reads every byte of a contiguous tensor and
  // nothing else. The result is meaningless; the time is the memory's read bandwidth.
  m.def("_read_probe(Tensor self) -> Tensor");
}
