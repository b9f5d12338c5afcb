// auto for amin (every dtype; TREDUCE_MINMAX_COMBOS in dtype.h).
#include "kernels/dims.cuh"

namespace treduce::cuda {
#define TREDUCE_INSTANTIATE_MIN(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, MinOp<ctype_t<DType::ACC>>)
TREDUCE_MINMAX_COMBOS(TREDUCE_INSTANTIATE_MIN)
}  // namespace treduce::cuda
