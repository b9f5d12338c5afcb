// treduce::sum on CUDA tensors: checks, device guard, stream, scratch from the
// caching allocator, then the torch-free launcher (launch.h). Compiled by the
// host compiler: torch headers stay out of the .cu files.
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <string>

#include "../sum_common.h"
#include "launch.h"

namespace treduce::cuda {
namespace {

at::Tensor sum_cuda(const at::Tensor& self, c10::string_view variant,
                    std::optional<at::ScalarType> dtype) {
  const SumTypes types = check_sum_args(self, dtype);
  const int index = lookup_variant(c10::DeviceType::CUDA, variant);
  const VariantDoc& doc = cuda_variants().docs[index];
  if (doc.float_atomics && !is_integral(types.acc)) {
    at::globalContext().alertNotDeterministic(
        "treduce.sum with variant '" + std::string(doc.name) +
        "' on floating-point data (it adds with atomics, in varying order)");
  }

  const c10::cuda::CUDAGuard guard(self.device());
  const at::Tensor x = dense_input(self);
  at::Tensor out = at::empty({}, self.options().dtype(to_scalar_type(types.out)));
  const cudaDeviceProp* props = at::cuda::getCurrentDeviceProperties();
  const auto v = static_cast<Variant>(index);
  SumArgs args{};
  args.in = x.const_data_ptr();
  args.n = x.numel();
  args.types = types;
  args.out = out.mutable_data_ptr();
  args.stream = at::cuda::getCurrentCUDAStream();
  args.sm_count = props->multiProcessorCount;
  args.cc_major = props->major;
  size_t bytes = 0;
  C10_CUDA_CHECK(launch_sum(v, args, &bytes));
  at::Tensor workspace;
  if (bytes > 0) {
    workspace = at::empty({static_cast<int64_t>(bytes)}, self.options().dtype(at::kByte));
    args.workspace = workspace.mutable_data_ptr();
  }
  C10_CUDA_CHECK(launch_sum(v, args));
  return out;
}

at::Tensor read_probe_cuda(const at::Tensor& self) {
  TORCH_CHECK(self.is_contiguous(), "treduce._read_probe: expected a contiguous tensor");
  const c10::cuda::CUDAGuard guard(self.device());
  TORCH_CHECK(reinterpret_cast<uintptr_t>(self.const_data_ptr()) % 16 == 0,
              "treduce._read_probe: expected a 16-byte aligned tensor");
  at::Tensor out = at::empty({}, self.options().dtype(at::kInt));  // left unwritten: no fill in the timing
  C10_CUDA_CHECK(launch_read_probe(self.const_data_ptr(), self.nbytes(),
                                   static_cast<unsigned*>(out.mutable_data_ptr()),
                                   at::cuda::getCurrentCUDAStream(),
                                   at::cuda::getCurrentDeviceProperties()->multiProcessorCount));
  return out;
}

}  // namespace
}  // namespace treduce::cuda

TORCH_LIBRARY_IMPL(treduce, CUDA, m) {
  m.impl("sum", &treduce::cuda::sum_cuda);
  m.impl("_read_probe", &treduce::cuda::read_probe_cuda);
}
