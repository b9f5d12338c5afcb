// auto for aminmax (every dtype; TREDUCE_MINMAX_COMBOS in dtype.h).
#include "kernels/dims.cuh"

namespace treduce::cuda {
#define TREDUCE_INSTANTIATE_MINMAX(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, MinMaxOp<ctype_t<DType::ACC>>)
TREDUCE_MINMAX_COMBOS(TREDUCE_INSTANTIATE_MINMAX)
}  // namespace treduce::cuda
