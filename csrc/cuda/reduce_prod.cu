// auto for prod (TREDUCE_PROD_COMBOS in dtype.h).
#include "kernels/dims.cuh"

namespace treduce::cuda {
#define TREDUCE_INSTANTIATE_PROD(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, ProdOp<ctype_t<DType::ACC>>)
TREDUCE_PROD_COMBOS(TREDUCE_INSTANTIATE_PROD)
}  // namespace treduce::cuda
