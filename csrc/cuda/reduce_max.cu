// auto for amax (every dtype; TREDUCE_MINMAX_COMBOS in dtype.h).
#include "kernels/dims.cuh"

namespace treduce::cuda {
#define TREDUCE_INSTANTIATE_MAX(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, MaxOp<ctype_t<DType::ACC>>)
TREDUCE_MINMAX_COMBOS(TREDUCE_INSTANTIATE_MAX)
}  // namespace treduce::cuda
