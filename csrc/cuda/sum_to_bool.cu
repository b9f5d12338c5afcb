// run_sum instantiations for TREDUCE_SUM_COMBOS_TO_BOOL (dtype.h).
#include "kernels/run_sum.cuh"

namespace treduce::cuda {
TREDUCE_SUM_COMBOS_TO_BOOL(TREDUCE_INSTANTIATE_RUN_SUM)
}  // namespace treduce::cuda
