// auto for vector_norm of orders inf, -inf and any other p (TREDUCE_NORM_COMBOS_OTHER in dtype.h).
#include "kernels/dims.cuh"

namespace treduce::cuda {
#define TREDUCE_INSTANTIATE_NORM(K, IN, ACC)                                                            \
  template cudaError_t run_reduce<Reduction<ctype_t<DType::IN>, ctype_t<DType::IN>,                     \
                                            NormOp<ctype_t<DType::ACC>, NormOrd::K>>>(const ReduceArgs&, \
                                                                                      size_t*, Plan*);
TREDUCE_NORM_COMBOS_OTHER(TREDUCE_INSTANTIATE_NORM)
}  // namespace treduce::cuda
