// run_cub instantiations for TREDUCE_SUM_COMBOS_TO_BOOL (dtype.h).
#include "kernels/cub.cuh"

namespace treduce::cuda {
TREDUCE_SUM_COMBOS_TO_BOOL(TREDUCE_INSTANTIATE_RUN_CUB)
}  // namespace treduce::cuda
