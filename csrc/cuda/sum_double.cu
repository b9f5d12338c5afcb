// run_sum instantiations for TREDUCE_SUM_COMBOS_DOUBLE (dtype.h).
#include "kernels/run_sum.cuh"

namespace treduce::cuda {
TREDUCE_SUM_COMBOS_DOUBLE(TREDUCE_INSTANTIATE_RUN_SUM)
}  // namespace treduce::cuda
