// auto for max and min over a dim with indices, argmax and argmin: the minimum (every dtype;
// TREDUCE_MINMAX_COMBOS in dtype.h).
#include "kernels/dims.cuh"

namespace treduce::cuda {
#define TREDUCE_INSTANTIATE_ARG(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, ArgMinOp<ctype_t<DType::ACC>>)
TREDUCE_MINMAX_COMBOS(TREDUCE_INSTANTIATE_ARG)
}  // namespace treduce::cuda
