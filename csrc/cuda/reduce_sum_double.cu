// auto (sum and mean) for TREDUCE_SUM_COMBOS_DOUBLE (dtype.h).
#include "kernels/dims.cuh"

namespace treduce::cuda {
#define TREDUCE_INSTANTIATE_SUM(IN, MID, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, MID, Sum<ctype_t<DType::ACC>>)
TREDUCE_SUM_COMBOS_DOUBLE(TREDUCE_INSTANTIATE_SUM)
}  // namespace treduce::cuda
