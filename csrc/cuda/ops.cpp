// The ops on CUDA tensors: checks, device guard, stream, scratch from the caching
// allocator, then the torch-free launchers (launch.h). Compiled by the
// host compiler: torch headers stay out of the .cu files.
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <string>

#include "../reduce_common.h"
#include "launch.h"

namespace treduce::cuda {
namespace {

// Runs a prepared call: the ladder variants through launch_sum (a full reduction of a
// contiguous input), auto through launch_reduce (any op, any layout). Scratch comes from the
// caching allocator, so the call never synchronises and is safe in CUDA graphs.
at::Tensor run(const Prepared& p) {
  if (p.done) return p.out;
  const cudaDeviceProp* props = at::cuda::getCurrentDeviceProperties();
  ReduceArgs args{};
  args.in = p.input.const_data_ptr();
  args.n = p.input.numel();
  args.types = p.types;
  args.out = p.out.mutable_data_ptr();
  args.stream = at::cuda::getCurrentCUDAStream();
  args.sm_count = props->multiProcessorCount;
  args.cc_major = props->major;
  args.op = p.op;
  args.layout = p.layout;
  args.project = p.project;
  if (p.out2.defined()) args.out2 = p.out2.mutable_data_ptr();
  const auto launch = [&](size_t* workspace_bytes) {
    return p.is_auto ? launch_reduce(args, workspace_bytes)
                     : launch_sum(static_cast<Variant>(p.variant), args, workspace_bytes);
  };
  size_t bytes = 0;
  C10_CUDA_CHECK(launch(&bytes));
  at::Tensor workspace;
  if (bytes > 0) {
    workspace = at::empty({static_cast<int64_t>(bytes)}, p.out.options().dtype(at::kByte));
    args.workspace = workspace.mutable_data_ptr();
  }
  C10_CUDA_CHECK(launch(nullptr));
  return p.out;
}

template <ReduceOp kOp>
at::Tensor sum_or_mean_cuda(const at::Tensor& self, c10::string_view variant, at::OptionalIntArrayRef dim,
                            bool keepdim, std::optional<at::ScalarType> dtype) {
  const c10::cuda::CUDAGuard guard(self.device());
  const Prepared p = prepare_reduce(kOp, self, variant, dim, keepdim, dtype);
  const VariantDoc& doc = cuda_variants().docs[p.variant];
  if (doc.float_atomics && !is_integral(p.types.acc)) {
    at::globalContext().alertNotDeterministic(
        "treduce.sum with variant '" + std::string(doc.name) +
        "' on floating-point data (it adds with atomics, in varying order)");
  }
  return run(p);
}

template <ReduceOp kOp>
at::Tensor extremum_cuda(const at::Tensor& self, c10::string_view variant, at::OptionalIntArrayRef dim,
                         bool keepdim) {
  const c10::cuda::CUDAGuard guard(self.device());
  return run(prepare_reduce(kOp, self, variant, dim, keepdim, std::nullopt));
}

template <ReduceOp kOp>
at::Tensor var_cuda(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                    bool keepdim) {
  const c10::cuda::CUDAGuard guard(self.device());
  return run(prepare_var(kOp, self, dim, correction, keepdim));
}

template <ReduceOp kOp>
std::tuple<at::Tensor, at::Tensor> var_mean_cuda(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                                 const std::optional<at::Scalar>& correction, bool keepdim) {
  const c10::cuda::CUDAGuard guard(self.device());
  const Prepared p = prepare_var(kOp, self, dim, correction, keepdim);
  run(p);
  return {p.out, p.out2};
}

template <ReduceOp kOp>
at::Tensor nan_cuda(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype) {
  const c10::cuda::CUDAGuard guard(self.device());
  return run(prepare_nan_or_lse(kOp, self, dim, keepdim, dtype));
}

at::Tensor logsumexp_cuda(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
  const c10::cuda::CUDAGuard guard(self.device());
  return run(prepare_nan_or_lse(ReduceOp::LogSumExp, self, dim, keepdim, std::nullopt));
}

at::Tensor prod_cuda(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                     std::optional<at::ScalarType> dtype) {
  const c10::cuda::CUDAGuard guard(self.device());
  return run(prepare_prod(self, dim, keepdim, dtype));
}

at::Tensor norm_cuda(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<at::ScalarType> dtype) {
  const c10::cuda::CUDAGuard guard(self.device());
  return run(prepare_norm(self, ord, dim, keepdim, dtype));
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

namespace treduce {
DeviceKernels cuda_kernels() {
  return {&cuda::sum_or_mean_cuda<ReduceOp::Sum>,   &cuda::sum_or_mean_cuda<ReduceOp::Mean>,
          &cuda::extremum_cuda<ReduceOp::Max>,      &cuda::extremum_cuda<ReduceOp::Min>,
          &cuda::var_cuda<ReduceOp::Var>,           &cuda::var_cuda<ReduceOp::Std>,
          &cuda::var_mean_cuda<ReduceOp::VarMean>,  &cuda::var_mean_cuda<ReduceOp::StdMean>,
          &cuda::nan_cuda<ReduceOp::NanSum>,        &cuda::nan_cuda<ReduceOp::NanMean>,
          &cuda::logsumexp_cuda,                  &cuda::prod_cuda,
          &cuda::norm_cuda};
}
}  // namespace treduce

TORCH_LIBRARY_IMPL(treduce, CUDA, m) {
  const treduce::DeviceKernels k = treduce::cuda_kernels();
  m.impl("sum", k.sum);
  m.impl("mean", k.mean);
  m.impl("amax", k.amax);
  m.impl("amin", k.amin);
  m.impl("var", k.var);
  m.impl("std", k.std);
  m.impl("var_mean", k.var_mean);
  m.impl("std_mean", k.std_mean);
  m.impl("nansum", k.nansum);
  m.impl("nanmean", k.nanmean);
  m.impl("logsumexp", k.logsumexp);
  m.impl("prod", k.prod);
  m.impl("vector_norm", k.vector_norm);
  m.impl("_read_probe", &treduce::cuda::read_probe_cuda);
}
