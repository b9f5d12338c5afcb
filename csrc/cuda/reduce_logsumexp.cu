// auto for logsumexp (TREDUCE_FLOAT_COMBOS in dtype.h).
#include "kernels/dims.cuh"

namespace treduce::cuda {
#define TREDUCE_INSTANTIATE_LSE(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, LogSumExpOp<ctype_t<DType::ACC>>)
TREDUCE_FLOAT_COMBOS(TREDUCE_INSTANTIATE_LSE)
}  // namespace treduce::cuda
