// run_sum instantiations for TREDUCE_SUM_COMBOS_VIA_LOWP (dtype.h).
#include "kernels/run_sum.cuh"

namespace treduce::cuda {
TREDUCE_SUM_COMBOS_VIA_LOWP(TREDUCE_INSTANTIATE_RUN_SUM)
}  // namespace treduce::cuda
