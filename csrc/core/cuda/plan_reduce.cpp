// The planner and its tuning table in one unit of their own (plan.h's plan_call): the kernel units
// call it and do not include them.
#include "plan_reduce.h"

namespace treduce::cuda {

Plan plan_call(const Device& d, const OpTraits& t, const PlanInput& in) { return plan_reduce(d, t, in); }

}  // namespace treduce::cuda
