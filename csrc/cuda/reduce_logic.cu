// auto for any, all and count_nonzero: the int64 sum of x != 0. Every other input dtype's
// instantiation is a sum's already (reduce_sum_int64.cu, reduce_sum_to_bool.cu); uint8 is
// summed as it is there, so its count of non-zeros is here.
#include "kernels/dims.cuh"

namespace treduce::cuda {
TREDUCE_INSTANTIATE_RUN_REDUCE(UInt8, Bool, Sum<int64_t>)
}  // namespace treduce::cuda
