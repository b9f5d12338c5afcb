// auto for nansum and nanmean (TREDUCE_FLOAT_COMBOS in dtype.h).
#include "kernels/dims.cuh"

namespace treduce::cuda {
#define TREDUCE_INSTANTIATE_NANSUM(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, NanSumOp<ctype_t<DType::ACC>>)
#define TREDUCE_INSTANTIATE_NANMEAN(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, NanMeanOp<ctype_t<DType::ACC>>)
TREDUCE_FLOAT_COMBOS(TREDUCE_INSTANTIATE_NANSUM)
TREDUCE_FLOAT_COMBOS(TREDUCE_INSTANTIATE_NANMEAN)
}  // namespace treduce::cuda
