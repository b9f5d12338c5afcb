// The ops on CUDA tensors: checks, device guard, stream, scratch from the caching
// allocator, then the torch-free launchers (launch.h). Compiled by the
// host compiler: torch headers stay out of the .cu files.
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "../reduce_common.h"
#include "../../core/cuda/launch.h"

namespace treduce::cuda {
namespace {

// Scratch of eager calls: one block of device memory per (device, stream), taken from the
// stream-ordered allocator (cudaMallocAsync) on that stream by its first call and kept for the
// life of the process; a call that needs more gets a larger one.
// Calls on one stream run one after another, so each finds it free, and its first
// kTicketWords words, the one-kernel tickets (launch.h), are 0 between calls. An eager call
// then costs one allocation (its result) and, for a full reduction or rows cut into segments,
// one launch: less than torch.sum's (which also zeroes a semaphore). Outside torch's caching
// allocator on purpose: torch.compile's CUDA-graph trees route a warm-up's allocations into a
// graph's private pool, where memory held past the call is an error. CUDA graphs do not use it: a captured call keeps its own memory (a graph may be replayed
// on any stream, beside anything).
constexpr size_t kTicketBytes = kTicketWords * sizeof(unsigned);  // then the scratch proper, aligned
constexpr size_t kFirstScratchBytes = 256 << 10;
constexpr size_t kMostScratchBytes = 64 << 20;  // larger needs go to the caching allocator
constexpr size_t kMostStreams = 256;            // (device, stream) pairs with a block of their own

// A block of at least kTicketBytes + bytes whose tickets are 0, or null (too large, or no
// stream-ordered allocator on this device).
char* stream_scratch(c10::DeviceIndex device, cudaStream_t stream, size_t bytes) {
  struct Block {
    char* data = nullptr;
    size_t size = 0;
  };
  using Key = std::pair<c10::DeviceIndex, cudaStream_t>;  // each device's default stream is null
  const Key key{device, stream};
  thread_local Key last_key{-1, nullptr};
  thread_local Block last;
  const size_t need = kTicketBytes + bytes;
  if (need > kMostScratchBytes) return nullptr;
  if (key == last_key && need <= last.size) return last.data;
  static std::mutex mutex;
  static auto* blocks = new std::map<Key, Block>();  // never freed, like the memory
  const std::lock_guard<std::mutex> lock(mutex);
  // A program that makes a new stream for every task would otherwise keep a block for each:
  // past kMostStreams, calls on streams without one take the caching allocator's, as graphs do.
  if (blocks->size() >= kMostStreams && blocks->find(key) == blocks->end()) return nullptr;
  Block& block = (*blocks)[key];
  if (need > block.size) {
    size_t size = kFirstScratchBytes;
    while (size < need) size *= 2;
    void* data = nullptr;
    if (cudaMallocAsync(&data, size, stream) != cudaSuccess) {
      (void)cudaGetLastError();  // no stream-ordered allocator: the caller takes the caching allocator's
      return nullptr;
    }
    C10_CUDA_CHECK(cudaMemsetAsync(data, 0, kTicketBytes, stream));
    // The smaller block is not freed: another thread's cache (below) may still hand it out for
    // a call on this stream, which then is as good as ever (its tickets are 0 between calls too).
    // Sizes double, so all of a stream's blocks are less than twice its largest.
    block = {static_cast<char*>(data), size};
  }
  last_key = key;
  last = block;
  return block.data;
}

// Runs a prepared call: the ladder variants through launch_sum (a full reduction of a
// contiguous input), auto through launch_reduce (any op, any layout). Scratch is the stream's
// own for eager calls of auto (above), else from the caching allocator; the call never
// synchronises and is safe in CUDA graphs.
// argmax and argmin: positions only (the kernels skip a null value pointer).
bool positions_only(const Prepared& p) {
  return p.is_auto && (p.op == ReduceOp::ArgMax || p.op == ReduceOp::ArgMin);
}

// The launchers' arguments of a prepared call (no workspace or ticket yet).
ReduceArgs args_of(const Prepared& p) {
  const cudaDeviceProp* props = at::cuda::getCurrentDeviceProperties();
  ReduceArgs args{};
  args.in = p.input.const_data_ptr();
  args.n = p.input.numel();
  args.types = p.types;
  // Kept dims expanded in the input: the distinct results first (plan_layout).
  const at::Tensor& out = p.distinct.defined() ? p.distinct : p.out;
  const at::Tensor& out2 = p.distinct.defined() ? p.distinct2 : p.out2;
  args.out = positions_only(p) ? nullptr : out.mutable_data_ptr();
  args.stream = at::cuda::getCurrentCUDAStream().stream();
  args.sm_count = props->multiProcessorCount;
  args.cc_major = props->major;
  args.op = p.op;
  args.layout = p.layout;
  args.indexed = p.indexed;
  args.project = p.project;
  if (out2.defined()) args.out2 = out2.mutable_data_ptr();
  return args;
}

// The distinct results of kept dims expanded in the input (plan_layout) into every place of
// the result: repeat_kernel where plan_repeat folds it (a dense result), else torch's copy.
void repeat_into(const at::Tensor& out, const at::Tensor& distinct, const ReduceArgs& a) {
  const at::Tensor src = distinct.expand_as(out);
  RepeatPlan plan;
  if (out.is_contiguous() && distinct.is_contiguous() &&
      plan_repeat(out.sizes().data(), src.strides().data(), int(out.dim()), int(out.element_size()),
                  reinterpret_cast<uintptr_t>(distinct.const_data_ptr()),
                  reinterpret_cast<uintptr_t>(out.const_data_ptr()), &plan)) {
    C10_CUDA_CHECK(launch_repeat(plan, distinct.const_data_ptr(), out.mutable_data_ptr(), a));
  } else {
    out.copy_(src);
  }
}

at::Tensor run(const Prepared& p) {
  if (p.done) return p.out;
  ReduceArgs args = args_of(p);
  const c10::cuda::CUDAStream stream = at::cuda::getCurrentCUDAStream();
  const auto launch = [&](size_t* workspace_bytes) {
    return p.is_auto ? launch_reduce(args, workspace_bytes)
                     : launch_sum(static_cast<Variant>(p.variant), args, workspace_bytes);
  };
  size_t bytes = 0;
  C10_CUDA_CHECK(launch(&bytes));
  at::Tensor workspace;
  if (bytes > 0) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    C10_CUDA_CHECK(cudaStreamIsCapturing(args.stream, &capture));
    char* scratch = p.is_auto && capture == cudaStreamCaptureStatusNone
                        ? stream_scratch(stream.device_index(), args.stream, bytes)
                        : nullptr;
    if (scratch != nullptr) {
      args.ticket = reinterpret_cast<unsigned*>(scratch);
      args.workspace = scratch + kTicketBytes;
    } else {
      workspace = at::empty({static_cast<int64_t>(bytes)}, p.out.options().dtype(at::kByte));
      args.workspace = workspace.mutable_data_ptr();
    }
  }
  C10_CUDA_CHECK(launch(nullptr));
  if (p.distinct.defined()) {
    if (!positions_only(p)) repeat_into(p.out, p.distinct, args);
    if (p.out2.defined()) repeat_into(p.out2, p.distinct2, args);
  }
  return p.out;
}

}  // namespace

// torch_reduce.explain: the plan auto follows for a prepared call, as an eager call on the
// current stream takes it (with the stream's ticket words where its workspace fits the stream's
// scratch, see stream_scratch); JSON (plan.h's plan_json).
std::string explain_cuda(const Prepared& p) {
  if (p.done) return "null";
  const c10::cuda::CUDAGuard guard(p.input.device());
  ReduceArgs args = args_of(p);
  Plan plan;
  C10_CUDA_CHECK(launch_reduce(args, nullptr, &plan));
  const bool eager = plan.workspace > 0 && kTicketBytes + plan.workspace <= kMostScratchBytes;
  if (eager) {
    static unsigned no_ticket[1];  // planned with, never written: nothing is launched
    args.ticket = no_ticket;
    C10_CUDA_CHECK(launch_reduce(args, nullptr, &plan));
  }
  return plan_json(plan);
}

namespace {

// variant="exact" and its state (exact.h, kernels/exact.cuh): the rounded sums into p.out, or,
// with `state` defined, the states into it. Scratch (the blocks' states) from the caching
// allocator.
void run_exact(const Prepared& p, const at::Tensor& state) {
  const cudaDeviceProp* props = at::cuda::getCurrentDeviceProperties();
  ReduceArgs args{};
  args.in = p.input.const_data_ptr();
  args.types = p.types;
  args.out = p.out.mutable_data_ptr();
  args.stream = at::cuda::getCurrentCUDAStream().stream();
  args.sm_count = props->multiProcessorCount;
  args.cc_major = props->major;
  args.layout = p.layout;
  int64_t* words = state.defined() ? state.mutable_data_ptr<int64_t>() : nullptr;
  size_t bytes = 0;
  C10_CUDA_CHECK(launch_exact(args, words, &bytes));
  at::Tensor workspace;
  if (bytes > 0) {
    workspace = at::empty({static_cast<int64_t>(bytes)}, p.out.options().dtype(at::kByte));
    args.workspace = workspace.mutable_data_ptr();
  }
  C10_CUDA_CHECK(launch_exact(args, words, nullptr));
}

at::Tensor exact_sum_cuda(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<at::ScalarType> dtype) {
  if (!exact_applies(self, dtype)) return run(prepare_reduce(ReduceOp::Sum, self, "auto", dim, keepdim, dtype));
  const Prepared p = prepare_exact(self, dim, keepdim, dtype, /*widen=*/true);
  if (!p.done) run_exact(p, at::Tensor());
  return p.out;
}

at::Tensor exact_state_cuda(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype) {
  const c10::cuda::CUDAGuard guard(self.device());
  const Prepared p = prepare_exact_state(self, dim, keepdim, dtype, /*widen=*/true);
  at::Tensor state = exact_state_tensor(p);
  if (!p.done) run_exact(p, state);
  return state;
}

at::Tensor exact_round_cuda(const at::Tensor& state, at::ScalarType dtype) {
  const c10::cuda::CUDAGuard guard(state.device());
  at::Tensor out = exact_round_result(state, dtype);
  const at::Tensor s = state.contiguous();
  C10_CUDA_CHECK(launch_exact_round(s.const_data_ptr<int64_t>(), out.numel(), out.mutable_data_ptr(),
                                    dtype_of_scalar(dtype), at::cuda::getCurrentCUDAStream()));
  return out;
}

template <ReduceOp kOp>
at::Tensor sum_or_mean_cuda(const at::Tensor& self, c10::string_view variant, at::OptionalIntArrayRef dim,
                            bool keepdim, std::optional<at::ScalarType> dtype) {
  const c10::cuda::CUDAGuard guard(self.device());
  if (kOp == ReduceOp::Sum && variant == "exact") return exact_sum_cuda(self, dim, keepdim, dtype);
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

template <ReduceOp kOp>
at::Tensor logic_cuda(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  const c10::cuda::CUDAGuard guard(self.device());
  return run(prepare_logic(kOp, self, dim, keepdim));
}

at::Tensor count_nonzero_cuda(const at::Tensor& self, at::OptionalIntArrayRef dim) {
  return logic_cuda<ReduceOp::CountNonzero>(self, dim, false);
}

std::tuple<at::Tensor, at::Tensor> aminmax_cuda(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  const c10::cuda::CUDAGuard guard(self.device());
  const Prepared p = prepare_aminmax(self, dim, keepdim);
  run(p);
  return {p.out, p.out2};
}

template <ReduceOp kOp>
std::tuple<at::Tensor, at::Tensor> max_dim_cuda(const at::Tensor& self, int64_t dim, bool keepdim) {
  const c10::cuda::CUDAGuard guard(self.device());
  const Prepared p = prepare_indexed(kOp, self, dim, keepdim);
  run(p);
  return {p.out, p.out2};
}

template <ReduceOp kOp>
at::Tensor arg_cuda(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  const c10::cuda::CUDAGuard guard(self.device());
  const Prepared p = prepare_indexed(kOp, self, dim, keepdim);
  run(p);
  return p.out2;
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
const DeviceKernels& cuda_kernels() {
  static const DeviceKernels table = [] {
    DeviceKernels k;
    k.sum = &cuda::sum_or_mean_cuda<ReduceOp::Sum>;
    k.mean = &cuda::sum_or_mean_cuda<ReduceOp::Mean>;
    k.amax = &cuda::extremum_cuda<ReduceOp::Max>;
    k.amin = &cuda::extremum_cuda<ReduceOp::Min>;
    k.var = &cuda::var_cuda<ReduceOp::Var>;
    k.std = &cuda::var_cuda<ReduceOp::Std>;
    k.var_mean = &cuda::var_mean_cuda<ReduceOp::VarMean>;
    k.std_mean = &cuda::var_mean_cuda<ReduceOp::StdMean>;
    k.nansum = &cuda::nan_cuda<ReduceOp::NanSum>;
    k.nanmean = &cuda::nan_cuda<ReduceOp::NanMean>;
    k.logsumexp = &cuda::logsumexp_cuda;
    k.prod = &cuda::prod_cuda;
    k.vector_norm = &cuda::norm_cuda;
    k.any = &cuda::logic_cuda<ReduceOp::Any>;
    k.all = &cuda::logic_cuda<ReduceOp::All>;
    k.count_nonzero = &cuda::count_nonzero_cuda;
    k.aminmax = &cuda::aminmax_cuda;
    k.max = &cuda::max_dim_cuda<ReduceOp::MaxDim>;
    k.min = &cuda::max_dim_cuda<ReduceOp::MinDim>;
    k.argmax = &cuda::arg_cuda<ReduceOp::ArgMax>;
    k.argmin = &cuda::arg_cuda<ReduceOp::ArgMin>;
    cuda::set_normalizing_kernels(k);
    return k;
  }();
  return table;
}
}  // namespace treduce

TORCH_LIBRARY_IMPL(treduce, CUDA, m) {
  treduce::register_kernels(m, treduce::cuda_kernels());
  m.impl("_exact_state", &treduce::cuda::exact_state_cuda);
  m.impl("_exact_round", &treduce::cuda::exact_round_cuda);
  m.impl("_read_probe", &treduce::cuda::read_probe_cuda);
}
