// The torch-free interface between the op (cuda/ops.cpp) and the kernels
// (cuda/*.cu). Everything here is plain data: pointers, sizes, dtype tags.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "../dtype.h"
#include "../variant.h"

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
  Auto,
};

struct SumArgs {
  const void* in;      // n elements of types.in, contiguous
  int64_t n;
  SumTypes types;
  void* out;           // one element of types.out
  void* workspace;     // sum_workspace_bytes() bytes, 256-byte aligned
  cudaStream_t stream;
  int sm_count;        // multiprocessors of the device, for grid sizing
};

// Scratch a call needs (block partials, an atomic accumulator); 0 if none.
size_t sum_workspace_bytes(Variant v, int64_t n, DType acc, int sm_count);

// Enqueues the whole reduction on a.stream; returns the first launch error.
// Never synchronises.
cudaError_t launch_sum(Variant v, const SumArgs& a);

}  // namespace treduce::cuda
