// run_sum instantiations for TREDUCE_SUM_COMBOS_INT64 (dtype.h).
#include "kernels/run_sum.cuh"

namespace treduce::cuda {
TREDUCE_SUM_COMBOS_INT64(TREDUCE_INSTANTIATE_RUN_SUM)
}  // namespace treduce::cuda
