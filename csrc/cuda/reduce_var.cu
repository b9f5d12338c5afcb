// auto for var, std, var_mean and std_mean (TREDUCE_VAR_COMBOS in dtype.h).
#include "kernels/dims.cuh"

namespace treduce::cuda {
#define TREDUCE_INSTANTIATE_VAR(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, VarOp<ctype_t<DType::ACC>>)
TREDUCE_VAR_COMBOS(TREDUCE_INSTANTIATE_VAR)
}  // namespace treduce::cuda
