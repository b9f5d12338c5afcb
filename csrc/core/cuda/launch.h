// The torch-free interface between the op (torch/cuda/ops.cpp) and the kernels
// (cuda/*.cu). Everything here is plain data: pointers, sizes, dtype tags.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "../dtype.h"
#include "../layout.h"
#include "../reduce_ops.h"
#include "../variant.h"
#include "plan.h"

// The normalizing ops' arguments (normalize.h, cross_entropy.h, layer_norm.h): declared here, so
// that the reductions' units do not depend on those headers.
namespace treduce {
struct NormalizeArgs;
struct CrossEntropyArgs;
struct LayerNormArgs;
}  // namespace treduce

namespace treduce::cuda {

// The CUDA variants, in the order of cuda_variants() (the ladder order).
enum class Variant : int {
  Neighbored,
  StridedIndex,
  Sequential,
  FirstAdd,
  Unroll4,
  Unroll8,
  UnrollLastWarp,
  CompleteUnroll,
  Atomic,
  TwoPass,
  BlockAtomic,
  WarpShuffle,
  SingleBlock,
  Cub,
  Auto,
  Exact,  // not a launch_sum variant: torch/cuda/ops.cpp calls launch_exact
};

struct ReduceArgs {
  const void* in;      // launch_sum: n elements of types.in, contiguous; launch_reduce: element
  int64_t n;           // (0, 0, 0) of `layout`
  SumTypes types;      // amax / amin: in = mid = out, acc = minmax_acc_dtype(in)
  void* out;           // launch_sum: one element of types.out; launch_reduce: element (0, 0)
  void* workspace;     // the bytes the launcher asked for, 256-byte aligned
  cudaStream_t stream;
  int sm_count;        // multiprocessors of the device, for grid sizing
  int cc_major;        // compute capability: 9 and up launch with programmatic dependence
  ReduceOp op = ReduceOp::Sum;   // launch_reduce only, like everything below
  Layout3 layout;
  IndexedLayout indexed;         // the same as plain indexes (small reductions: one kernel)
  ProjectArgs project;           // what the op's projection reads (reduce_ops.h)
  void* out2 = nullptr;          // var_mean / std_mean: the mean, like `out`
  // kTicketWords words that are 0 and that no other call can touch until this one's kernels
  // are done (the stream's own scratch, see torch/cuda/ops.cpp), or null. With them a full reduction,
  // or rows cut into segments, run as one kernel whose last block (of the grid, of the row)
  // adds the partials and sets its word back to 0; without, two.
  unsigned* ticket = nullptr;
};

// (kTicketWords: plan.h.)

// With workspace_bytes null: enqueues the whole reduction on a.stream and returns the first
// launch error; never synchronises. Otherwise: stores the scratch the call needs (block
// partials, an accumulator, CUB's temporary storage; 0 if none) and launches nothing, and
// a.workspace and a.out are not read.
cudaError_t launch_sum(Variant v, const ReduceArgs& a, size_t* workspace_bytes = nullptr);

// `auto` for every op over any Layout3 (a.layout, a.op; a.n is not read), same protocol. With
// `plan` set: the plan (plan.h) that a launch with these arguments follows, and nothing launched.
cudaError_t launch_reduce(const ReduceArgs& a, size_t* workspace_bytes = nullptr, Plan* plan = nullptr);

// variant="exact" (kernels/exact.cuh) over any Layout3 of a floating input (a.types.in; the
// result's dtype a.types.out, the same or one that holds every input element exactly): each
// result rounded into a.out, or, with `state` set, each result's
// exact state (exact.h) into state[offset * kExactStateWords ...]. Same protocol as
// launch_reduce.
cudaError_t launch_exact(const ReduceArgs& a, int64_t* state, size_t* workspace_bytes = nullptr);

// _exact_round: n states (contiguous) rounded into n results of `dtype` (a floating DType).
cudaError_t launch_exact_round(const int64_t* state, int64_t n, void* out, DType dtype, cudaStream_t stream);

// The distinct results src copied into every place of the dense result out, as plan_repeat
// (plan.h) folded them (repeat.cu), on a.stream after the kernels that wrote src (a.sm_count
// and a.cc_major are read, nothing else). Never synchronises.
cudaError_t launch_repeat(const RepeatPlan& p, const void* src, void* out, const ReduceArgs& a);

// Streams through `bytes` bytes (16-byte aligned; a multiple of 16 is read) and does nothing
// else: the bandwidth ceiling the benchmark compares against. See read_probe.cu.
cudaError_t launch_read_probe(const void* data, int64_t bytes, unsigned* out, cudaStream_t stream,
                              int sm_count);

// softmax, log_softmax and their backwards (normalize.h) on `stream`; never synchronises.
cudaError_t launch_normalize(const NormalizeArgs& a, cudaStream_t stream);

// cross_entropy (cross_entropy.h): forward (a.sample_loss and a.sample_weight: workspace of
// outer * inner accumulators each, unless reduction none) or backward, on `stream`.
cudaError_t launch_cross_entropy(const CrossEntropyArgs& a, bool backward, cudaStream_t stream);

// layer_norm and rms_norm (layer_norm.h), forward or backward, on `stream`; never synchronises.
// The backward's a.partials: layer_norm_workspace(a) bytes (0: none), asked for with every
// pointer of a set but partials (the shape of the launch depends on their alignment).
size_t layer_norm_workspace(const LayerNormArgs& a);
cudaError_t launch_layer_norm(const LayerNormArgs& a, bool backward, cudaStream_t stream);

}  // namespace treduce::cuda
