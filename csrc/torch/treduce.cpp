// The treduce operator library: every op's schema, the checks the CPU and
// CUDA implementations share, and the C++ entry point. The kernels register
// themselves in torch/cpu/reduce_cpu.cpp and torch/cuda/ops.cpp.
#include "treduce.h"

#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/mean_cpu_dispatch.h>
#include <ATen/ops/argmax_cpu_dispatch.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/linalg_vector_norm_cpu_dispatch.h>
#include <ATen/ops/nanmean_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/nansum_cpu_dispatch.h>
#include <ATen/ops/std_cpu_dispatch.h>
#include <ATen/ops/std_mean_cpu_dispatch.h>
#include <ATen/ops/var_cpu_dispatch.h>
#include <ATen/ops/var_mean_cpu_dispatch.h>
#include <torch/library.h>
#ifdef TREDUCE_WITH_CUDA
#include <ATen/cuda/EmptyTensor.h>
#endif

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "../core/exact.h"
#include "reduce_common.h"

namespace treduce {

namespace {

std::string supported_dtypes() {
  std::string s;
  for (int i = 0; i < kNumDTypes; ++i) s += std::string(i ? ", " : "") + dtype_name(DType(i));
  return s;
}

DType to_dtype(ReduceOp op, at::ScalarType t, const char* what) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kScalarTypes[i] == t) return DType(i);
  TORCH_CHECK_TYPE(false, "treduce.", op_name(op), ": ", what, " ", c10::toString(t),
                   " is not supported; supported dtypes: ", supported_dtypes());
}

std::string names(VariantTable t) {
  std::string s;
  for (int i = 0; i < t.count; ++i) s += std::string(i ? ", " : "") + t.docs[i].name;
  return s;
}

// One record per variant for treduce::variants, fields tab-separated.
std::vector<std::string> describe(VariantTable t) {
  std::vector<std::string> rows;
  for (int i = 0; i < t.count; ++i) {
    const VariantDoc& d = t.docs[i];
    rows.push_back(std::string(d.name) + '\t' + d.technique + '\t' + d.seed + '\t' +
                   d.fixes + '\t' + d.kernel + '\t' +
                   (d.float_atomics ? "nondeterministic" : "deterministic"));
  }
  return rows;
}

std::vector<std::string> variants_op(c10::string_view device) {
  const c10::DeviceType type = c10::Device(std::string(device)).type();
  TORCH_CHECK_VALUE(type == c10::DeviceType::CPU || type == c10::DeviceType::CUDA,
                    "treduce.variants: expected 'cpu' or 'cuda', got '", device, "'");
  return describe(type == c10::DeviceType::CPU ? cpu_variants() : cuda_variants());
}

}  // namespace

const char* op_name(ReduceOp op) {
  constexpr const char* kNames[kNumReduceOps] = {"sum", "mean",     "amax",    "amin",   "var",      "std",
                                                 "var_mean", "std_mean", "nansum", "nanmean", "logsumexp",
                                                 "prod", "vector_norm", "any", "all", "count_nonzero",
                                                 "aminmax", "max", "min", "argmax", "argmin"};
  return kNames[static_cast<int>(op)];
}

namespace {

// The exception torch's mean raises for an integer dtype: RuntimeError up to torch 2.14,
// NotImplementedError from 2.15. Asked of torch's CPU kernel once, the first time the error is
// raised: called directly on an empty tensor, it checks the dtype and raises before any work
// (directly, so that the override's kernel for aten::mean does not get the call back).
bool mean_dtype_error_is_not_implemented() {
  static const bool answer = [] {
    try {
      (void)at::cpu::mean(at::empty({0}, at::TensorOptions().dtype(at::kInt)), at::IntArrayRef{});
    } catch (const c10::NotImplementedError&) {
      return true;
    } catch (const c10::Error&) {
    }
    return false;
  }();
  return answer;
}

[[noreturn]] void mean_dtype_error(const std::string& message) {
  if (mean_dtype_error_is_not_implemented()) TORCH_CHECK_NOT_IMPLEMENTED(false, message);
  TORCH_CHECK(false, message);
}

// torch's own error for an op that takes no integers (its type and wording change between
// releases: RuntimeError up to 2.14, NotImplementedError from 2.15, and var_mean names itself),
// raised by torch's kernel on an empty tensor of that dtype, called directly: it checks the dtype
// before any work (and directly, so that the override's kernels do not get the call back).
[[noreturn]] void integer_input_error(ReduceOp op, DType in, const std::string& fallback) {
  const at::Tensor probe = at::empty({0}, at::TensorOptions().dtype(to_scalar_type(in)));
  switch (op) {
    case ReduceOp::Var: (void)at::cpu::var(probe); break;
    case ReduceOp::Std: (void)at::cpu::std(probe); break;
    case ReduceOp::VarMean: (void)at::cpu::var_mean(probe); break;
    case ReduceOp::StdMean: (void)at::cpu::std_mean(probe); break;
    case ReduceOp::NanMean: (void)at::compositeimplicitautograd::nanmean(probe); break;
    case ReduceOp::Norm: (void)at::cpu::linalg_vector_norm(probe); break;
    default: break;
  }
  TORCH_CHECK(false, fallback);  // torch took it after all: ours is the message
}

// nansum and nanmean of floats with an integer dtype=: torch's answer changes between releases
// (its nansum kernel refused integer results up to torch 2.14 and takes them from 2.15; its
// nanmean refuses them with another error from 2.15). Asked of torch's own kernel on a
// one-element tensor (an empty one skips the check), called directly; its error passes through
// (with the device's kernel name, which the CPU probe cannot know). Returns when torch computes it.
void integer_dtype_error(ReduceOp op, DType in, at::ScalarType dtype, const c10::Device& device) {
  const at::Tensor probe = at::zeros({1}, at::TensorOptions().dtype(to_scalar_type(in)));
  try {
    if (op == ReduceOp::NanMean) (void)at::compositeimplicitautograd::nanmean(probe, std::nullopt, false, dtype);
    else (void)at::cpu::nansum(probe, std::nullopt, false, dtype);
  } catch (const c10::NotImplementedError&) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"nansum_", device.is_cpu() ? "cpu" : "cuda", "\" not implemented for '",
                                c10::toString(dtype), "'");
  }
  TORCH_CHECK(op != ReduceOp::NanMean, "nanmean(): could not infer output dtype. Optional dtype must be either a "
              "floating point or complex dtype. Got: ", c10::toString(dtype));
}

// argmax and argmin of bool: torch's error, a RuntimeError up to torch 2.14 and a
// NotImplementedError from 2.15, asked of torch's CPU kernel once (called directly, so that the
// override's kernel does not get the call back).
[[noreturn]] void arg_bool_error(const char* name) {
  static const bool not_implemented = [] {
    try {
      (void)at::cpu::argmax(at::empty({1}, at::TensorOptions().dtype(at::kBool)));
    } catch (const c10::NotImplementedError&) {
      return true;
    } catch (const c10::Error&) {
    }
    return false;
  }();
  const std::string message = std::string(name) + "(): does not support bool input";
  if (not_implemented) TORCH_CHECK_NOT_IMPLEMENTED(false, message);
  TORCH_CHECK(false, message);
}

// The types of each op, as torch gives them.
SumTypes plan_types(ReduceOp op, DType in, std::optional<at::ScalarType> dtype) {
  const char* name = op_name(op);
  if (op == ReduceOp::Max || op == ReduceOp::Min) return {in, in, minmax_acc_dtype(in), in};
  if (is_var_family(op)) {
    if (is_integral(in)) integer_input_error(op, in, "std and var only support floating point and complex dtypes");
    return {in, in, in == DType::Double ? DType::Double : DType::Float, in};
  }
  const DType out = dtype ? to_dtype(op, *dtype, "dtype=") : default_sum_dtype(in);  // TypeError first
  if (op == ReduceOp::Mean) {
    // torch.mean's own wording and exception type.
    if (dtype && !at::isFloatingType(*dtype)) {
      mean_dtype_error(std::string(name) + "(): could not infer output dtype. Optional dtype must be either a "
                       "floating point or complex dtype. Got: " + c10::toString(*dtype));
    }
    if (!dtype && is_integral(in)) {
      mean_dtype_error(std::string(name) + "(): could not infer output dtype. Input dtype must be either a "
                       "floating point or complex dtype. Got: " + c10::toString(to_scalar_type(in)));
    }
  }
  return plan_sum_types(in, out);
}

// The out strides of a contiguous result of the kept dims' sizes, in the input's dim order.
void contiguous_out_strides(c10::SmallVector<DimInfo, kInlineDims>& dims) {
  int64_t out_stride = 1;
  for (int64_t i = int64_t(dims.size()) - 1; i >= 0; --i) {
    dims[i].out_stride = dims[i].reduced ? 0 : out_stride;
    if (!dims[i].reduced) out_stride *= dims[i].size;
  }
}

c10::SmallVector<DimInfo, kInlineDims> dim_infos(const at::Tensor& x, const DimFlags& reduced) {
  const int64_t ndim = x.dim();
  c10::SmallVector<DimInfo, kInlineDims> dims(ndim);
  for (int64_t i = 0; i < ndim; ++i) dims[i] = {x.size(i), x.stride(i), 0, bool(reduced[i])};
  contiguous_out_strides(dims);  // the result is contiguous, as torch's
  return dims;
}

int lookup_variant(ReduceOp op, c10::DeviceType device, c10::string_view name) {
  const bool on_cpu = device == c10::DeviceType::CPU;
  if (name == "auto") {  // nearly every call: its index, found once, not a walk over the names
    static const int cpu_auto = cpu_variants().find("auto");
    static const int cuda_auto = cuda_variants().find("auto");
    const int i = on_cpu ? cpu_auto : cuda_auto;
    if (i >= 0) return i;
  }
  const VariantTable own = on_cpu ? cpu_variants() : cuda_variants();
  const VariantTable other = on_cpu ? cuda_variants() : cpu_variants();
  const char* here = on_cpu ? "CPU" : "CUDA";
  const char* what = op_name(op);
  const int i = own.find(name);
  if (i >= 0 && (op == ReduceOp::Sum || name == "auto")) return i;
  TORCH_CHECK_VALUE(i < 0, "treduce.", what, ": variant '", name, "' computes sums only; ", what,
                    " runs 'auto'");
  TORCH_CHECK_VALUE(other.find(name) < 0, "treduce.", what, ": variant '", name, "' runs on ",
                    on_cpu ? "CUDA" : "CPU", " tensors only; ", here,
                    " tensors can use: ", names(own));
  TORCH_CHECK_VALUE(false, "treduce.", what, ": unknown variant '", name, "'; ", here,
                    " tensors can use: ", names(own));
}

}  // namespace

// Which dims are reduced: all of them for None or [], else the listed ones, wrapped as torch
// wraps them (a 0-d tensor takes dim 0 and -1).
DimFlags reduced_dims(int64_t ndim, at::OptionalIntArrayRef dim) {
  DimFlags reduced(ndim, !dim || dim->empty());
  if (!dim) return reduced;
  DimFlags seen(std::max<int64_t>(ndim, 1), false);
  for (const int64_t d : *dim) {
    const int64_t w = c10::maybe_wrap_dim(d, ndim);  // IndexError when out of range
    // Numbers go into the message as strings: streaming an int64_t into c10::str crashed this
    // library on a GCC 13 build (the exception never reached Python).
    TORCH_CHECK(!seen[w], "dim " + std::to_string(w) + " appears multiple times in the list of dims");
    seen[w] = true;
    if (ndim > 0) reduced[w] = true;
  }
  return reduced;
}

namespace {

// A result's memory from the device's allocator, as torch's own kernels allocate theirs: through
// at::empty it took a trip through the dispatcher, a visible part of a small call's host time.
// (Every element is written by the op, so the deterministic mode's fill is not needed.)
at::Tensor empty_result(at::IntArrayRef shape, const at::TensorOptions& options) {
#ifdef TREDUCE_WITH_CUDA
  if (options.device().is_cuda()) return at::Tensor(at::detail::empty_cuda(shape, options));
#endif
  if (options.device().is_cpu()) return at::Tensor(at::detail::empty_cpu(shape, options));
  return at::empty(shape, options);
}

// Whether reducing each element r times over gives the same value as once.
constexpr bool ignores_repeats(ReduceOp op) {
  return op == ReduceOp::Max || op == ReduceOp::Min || op == ReduceOp::AMinMax || op == ReduceOp::Any ||
         op == ReduceOp::All || op == ReduceOp::Mean || op == ReduceOp::NanMean;
}

// The result's shape, its allocation and the layout of the input, for every op.
void plan_layout(Prepared& p, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  const char* name = op_name(p.op);
  const int64_t ndim = self.dim();
  const DimFlags reduced = reduced_dims(ndim, dim);
  c10::SmallVector<int64_t, kInlineDims> shape;
  for (int64_t i = 0; i < ndim; ++i) {
    if (!reduced[i]) shape.push_back(self.size(i));
    else if (keepdim) shape.push_back(1);
  }
  if ((p.op == ReduceOp::Max || p.op == ReduceOp::Min) && self.numel() == 0) {
    // As torch: no identity to return.
    TORCH_CHECK(dim && !dim->empty(), name,
                "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                "reduction dim with the 'dim' argument.");
    for (int64_t i = 0; i < ndim; ++i)
      TORCH_CHECK_INDEX(!reduced[i] || self.size(i) != 0, std::string(name) + "(): Expected reduction dim " +
                                                              std::to_string(i) + " to have non-zero size.");
  }

  const at::TensorOptions options = self.options().dtype(to_scalar_type(p.types.out));
  p.out = empty_result(shape, options);
  if (p.op == ReduceOp::VarMean || p.op == ReduceOp::StdMean || p.op == ReduceOp::AMinMax) {
    p.out2 = empty_result(shape, options);
  } else if (is_indexed(p.op)) {
    p.out2 = empty_result(shape, options.dtype(at::kLong));  // the positions
  }
  if (p.out.numel() == 0) {
    p.done = true;
    return;
  }
  if (self.numel() == 0) {  // a reduced dim of size 0: the op's value for no elements
    if (p.op == ReduceOp::Mean || p.op == ReduceOp::NanMean || is_var_family(p.op)) {
      p.out.fill_(std::numeric_limits<double>::quiet_NaN());
      if (p.out2.defined()) p.out2.fill_(std::numeric_limits<double>::quiet_NaN());
    } else if (p.op == ReduceOp::LogSumExp) {
      p.out.fill_(-std::numeric_limits<double>::infinity());
    } else if (p.op == ReduceOp::Prod || p.op == ReduceOp::All) {
      p.out.fill_(1);
    } else {
      p.out.zero_();
    }
    p.done = true;
    return;
  }

  p.input = self;
  auto infos = dim_infos(self, reduced);
  // Kept dims expanded with stride 0 (auto, from 2^16 results): every result along such a
  // dim is the same reduction, so the kernels reduce index 0 of it (size 1 here: folded away)
  // into a contiguous result of the distinct values, and run copies that along (CUDA: one copy
  // kernel; CPU: torch's copy). Reduced in full, var over dim -1 of (128, 256, 1, 7) expanded
  // to 56 on dim 2, float16, reduced each of its 32768 distinct rows 56 times through an outer
  // run of stride 0: 35.8 us; now 6.3, of which the copy 4.2 (torch.compile 2.1, torch 26;
  // H200, hot). CPU, 2 threads: logsumexp over dim 1 of (5, 3, 1) expanded to 128256 on dim 2,
  // bfloat16, reduced 641280 rows of 3 for 5 distinct ones: 11141 us (torch 3866). Also under
  // 2^16 results where the repeats' reads would be 2^20 elements or more: prod over dim 0 of
  // (11008, 1, 80) expanded to 56 on dim 1, float32, 4480 results of 11008 each, read the same
  // 3.5 MB 56 times: 24.4 us hot, torch 22.3 (H100, random shapes seed 33151).
  int64_t copies = 1;  // the results each distinct one stands for
  for (int64_t i = 0; i < ndim; ++i)
    if (!reduced[i] && infos[i].in_stride == 0) copies *= infos[i].size;
  const int64_t repeated_reads = self.numel() - self.numel() / copies;  // elements read for the copies alone
  if (p.is_auto && copies > 1 && (p.out.numel() >= (int64_t(1) << 16) || repeated_reads >= (int64_t(1) << 20))) {
    std::vector<int64_t> distinct_shape = p.out.sizes().vec();
    int64_t at = 0;  // the dim's index in the result
    for (int64_t i = 0; i < ndim; ++i) {
      if (!reduced[i] && infos[i].in_stride == 0) {
        infos[i].size = 1;
        distinct_shape[at] = 1;
      }
      if (!reduced[i] || keepdim) ++at;
    }
    contiguous_out_strides(infos);  // of the distinct results
    p.distinct = at::empty(distinct_shape, p.out.options());
    if (p.out2.defined()) p.distinct2 = at::empty(distinct_shape, p.out2.options());
  }
  if (p.is_auto) {
    // An expanded reduced dim (stride 0) repeats the same elements r times, which leaves the
    // extrema, any, all and the means as they are, and the others' projections take r into
    // account (ProjectArgs::repeats, a sum's r-fold): it is not read. (mean((1, 256) expanded to
    // 49152 rows, 0) read one element 49152 times a result; std over (128, 1) expanded to 14336
    // along dim 1 read 14336 copies of each element, 0.22x torch.compile's speed.) Positions (max
    // and min over a dim, argmax, argmin) are the first copy's: such a dim before every other
    // reduced dim read (of more than one element) adds 0 to the position and leaves the weights
    // of the dims after it as they are, so only those are not read. (min over a dim of (1024,
    // 256, 1) int16 expanded to 64 read each element 64 times: 13.8 us, torch.compile 6.2; H200.)
    const bool positions = is_indexed(p.op);
    int64_t kept = 0, repeats = 1;
    bool leading = true;  // no reduced dim of more than one element read yet
    for (const DimInfo& d : infos) {
      if (d.reduced && d.in_stride == 0 && (leading || !positions)) {
        repeats *= d.size;
        continue;
      }
      if (d.reduced && d.size > 1) leading = false;
      infos[kept++] = d;
    }
    infos.resize(kept);
    if (!positions && !ignores_repeats(p.op)) p.project.repeats = repeats;
  }
  // Any strides fold without a copy (layout.h), but for more kept runs than an outer index takes,
  // or several reduced runs where partials cannot be combined (exact, the ladder): then a
  // copy with the kept dims first and the reduced ones last, which always folds into [kept]
  // [reduced].
  if (!fold_layout(infos.data(), int64_t(infos.size()), &p.layout, p.is_auto, &p.indexed)) {
    std::vector<int64_t> perm;
    DimFlags permuted_reduced;
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t i = 0; i < ndim; ++i)
        if (reduced[i] == bool(pass)) {
          perm.push_back(i);
          permuted_reduced.push_back(pass);
        }
    p.input = self.permute(perm).contiguous();
    p.distinct = p.distinct2 = at::Tensor();  // the copy's layout has every result
    auto permuted = dim_infos(p.input, permuted_reduced);
    const bool folded = fold_layout(permuted.data(), int64_t(permuted.size()), &p.layout, false, &p.indexed);
    TORCH_INTERNAL_ASSERT(folded, "a contiguous [kept][reduced] tensor must fold");
  }
}

// treduce._plan: how auto reduces x over `dim` for the op named `op`, as JSON: the folded Layout3
// of what the kernels read (layout.h), whether that is a copy of x, and on CUDA the plan
// (cuda/plan.h: kernels, grids, blocks, workspace). The call is prepared as the op prepares it
// (its checks and result), and nothing is launched.
std::string plan_op(const at::Tensor& x, at::OptionalIntArrayRef dim, c10::string_view op) {
  ReduceOp which = ReduceOp::Sum;
  bool known = false;
  for (int k = 0; k < kNumReduceOps; ++k)
    if (op == op_name(ReduceOp(k))) which = ReduceOp(k), known = true;
  TORCH_CHECK_VALUE(known, "treduce._plan: unknown op '", op, "'");
  const auto one_dim = [&]() -> std::optional<int64_t> {
    if (!dim.has_value() || dim->empty()) return std::nullopt;
    TORCH_CHECK_VALUE(dim->size() == 1, "treduce._plan: ", op, " takes one dim");
    return (*dim)[0];
  };
  Prepared p;
  switch (which) {
    case ReduceOp::Var: case ReduceOp::Std: case ReduceOp::VarMean: case ReduceOp::StdMean:
      p = prepare_var(which, x, dim, std::nullopt, false); break;
    case ReduceOp::NanSum: case ReduceOp::NanMean: case ReduceOp::LogSumExp:
      p = prepare_nan_or_lse(which, x, dim, false, std::nullopt); break;
    case ReduceOp::Prod: p = prepare_prod(x, one_dim(), false, std::nullopt); break;
    case ReduceOp::Norm: p = prepare_norm(x, at::Scalar(2), dim, false, std::nullopt); break;
    case ReduceOp::Any: case ReduceOp::All: case ReduceOp::CountNonzero:
      p = prepare_logic(which, x, dim, false); break;
    case ReduceOp::AMinMax: p = prepare_aminmax(x, one_dim(), false); break;
    case ReduceOp::MaxDim: case ReduceOp::MinDim:
      TORCH_CHECK_VALUE(one_dim().has_value(), "treduce._plan: ", op, " takes one dim");
      p = prepare_indexed(which, x, one_dim(), false); break;
    case ReduceOp::ArgMax: case ReduceOp::ArgMin: p = prepare_indexed(which, x, one_dim(), false); break;
    default: p = prepare_reduce(which, x, "auto", dim, false, std::nullopt); break;
  }
  const Layout3& l = p.layout;
  std::string runs;
  for (int k = 0; k < l.outer_runs.runs; ++k) {
    runs += std::string(k ? ", " : "") + "[" + std::to_string(l.outer_runs.size[k]) + ", " +
            std::to_string(l.outer_runs.in[k]) + ", " + std::to_string(l.outer_runs.out[k]) + "]";
  }
  const auto field = [](const char* name, int64_t v) { return std::string("\"") + name + "\": " + std::to_string(v) + ", "; };
  const bool copy = !p.done && p.input.defined() && !p.input.is_same(x);
  std::string plan = "null";
#ifdef TREDUCE_WITH_CUDA
  if (x.is_cuda()) plan = cuda::explain_cuda(p);
#endif
  return "{" + field("outer", l.outer) + field("reduced", l.reduced) + field("inner", l.inner) +
         field("in_outer", l.in_outer) + field("in_reduced", l.in_reduced) + field("in_inner", l.in_inner) +
         field("out_outer", l.out_outer) + field("out_inner", l.out_inner) + "\"outer_runs\": [" + runs + "], " +
         field("combine", l.combine) + field("repeats", p.project.repeats) +
         field("distinct", p.distinct.defined() ? p.distinct.numel() : 0) + "\"copy\": " + (copy ? "true" : "false") + ", \"done\": " +
         (p.done ? "true" : "false") + ", \"plan\": " + plan + "}";
}

void check_device(ReduceOp op, const at::Tensor& self) {
  TORCH_CHECK(self.device().is_cpu() || self.device().is_cuda(), "treduce.", op_name(op),
              ": expected a CPU or CUDA tensor, got one on ", self.device());
}

}  // namespace

Prepared prepare_reduce(ReduceOp op, const at::Tensor& self, c10::string_view variant,
                        at::OptionalIntArrayRef dim, bool keepdim,
                        std::optional<at::ScalarType> dtype) {
  check_device(op, self);
  Prepared p;
  p.op = op;
  p.types = plan_types(op, to_dtype(op, self.scalar_type(), "input dtype"), dtype);
  p.variant = lookup_variant(op, self.device().type(), variant);
  p.is_auto = variant == "auto";
  const bool over_dims = p.is_auto || variant == "exact";  // the ladder variants reduce whole tensors
  if (!over_dims) {
    const DimFlags reduced = reduced_dims(self.dim(), dim);
    bool full = true;  // every dim of size > 1 reduced: one result
    for (int64_t i = 0; i < self.dim(); ++i) full = full && (reduced[i] || self.size(i) == 1);
    TORCH_CHECK_VALUE(full, "treduce.sum: variant '", variant,
                      "' reduces whole tensors only; 'auto' and 'exact' reduce over dims");
  }
  plan_layout(p, self, dim, keepdim);
  if (p.done) return p;
  if (op == ReduceOp::Mean) p.project.count = p.layout.count();
  if (!over_dims && !p.layout.is_full_contiguous()) {
    // The ladder variants read one dense run of memory.
    p.input = self.contiguous();
    p.layout = Layout3{};
    p.indexed = IndexedLayout{};
    p.layout.reduced = self.numel();
    p.layout.in_reduced = 1;
  }
  return p;
}

Prepared prepare_nan_or_lse(ReduceOp op, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype) {
  check_device(op, self);
  const DType in = to_dtype(op, self.scalar_type(), "input dtype");
  if (op == ReduceOp::NanSum && is_integral(in)) {
    return prepare_reduce(ReduceOp::Sum, self, "auto", dim, keepdim, dtype);  // no NaN: a sum, as torch
  }
  if (op == ReduceOp::NanMean && is_integral(in)) {
    integer_input_error(op, in, std::string("nanmean(): expected input to have floating point or complex dtype but got ") +
                                    c10::toString(self.scalar_type()));
  }
  DType out = in;
  if (op == ReduceOp::LogSumExp) {
    if (is_integral(in)) out = DType::Float;  // as torch: integers give the default float dtype
  } else if (dtype) {
    out = to_dtype(op, *dtype, "dtype=");
    if (is_integral(out)) {
      integer_dtype_error(op, in, *dtype, self.device());
      // torch 2.15's nansum takes it: each element truncated, NaN as 0, summed in integers.
      return prepare_reduce(ReduceOp::Sum, self.masked_fill(self.isnan(), 0), "auto", dim, keepdim, dtype);
    }
  }
  Prepared p;
  p.op = op;
  p.types = {out, out, out == DType::Double ? DType::Double : DType::Float, out};
  p.variant = lookup_variant(op, self.device().type(), "auto");
  // Another dtype: the elements converted first (each exactly, or as torch rounds them), so that
  // the kernels run for the four floating types only.
  plan_layout(p, out == in ? self : self.to(to_scalar_type(out)), dim, keepdim);
  return p;
}

Prepared prepare_var(ReduceOp op, const at::Tensor& self, at::OptionalIntArrayRef dim,
                     const std::optional<at::Scalar>& correction, bool keepdim) {
  check_device(op, self);
  Prepared p;
  p.op = op;
  p.types = plan_types(op, to_dtype(op, self.scalar_type(), "input dtype"), std::nullopt);
  p.variant = lookup_variant(op, self.device().type(), "auto");
  const double c = correction ? correction->toDouble() : 1.0;
  plan_layout(p, self, dim, keepdim);
  // torch's warning, with torch's count: input elements per result (0 when there is no result).
  const int64_t results = p.out.numel();
  const int64_t count = results == 0 ? 0 : self.numel() / results;
  if (double(count) - c <= 0) {
    TORCH_WARN(op_name(op), "(): degrees of freedom is <= 0. Correction should be strictly less than the "
               "reduction factor (input numel divided by output numel).");
  }
  p.project.count = count;
  p.project.scalar = c;
  p.project.root = op == ReduceOp::Std || op == ReduceOp::StdMean;
  return p;
}

Prepared prepare_prod(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                      std::optional<at::ScalarType> dtype) {
  check_device(ReduceOp::Prod, self);
  DType in = to_dtype(ReduceOp::Prod, self.scalar_type(), "input dtype");
  const DType out = dtype ? to_dtype(ReduceOp::Prod, *dtype, "dtype=") : default_sum_dtype(in);
  // As torch: the elements converted to the result dtype, then multiplied (integers in int64,
  // whose wrapping gives the same low bits as the result dtype's). Integers into integers are
  // read as they are; anything else is converted first, so that the kernels run for
  // TREDUCE_PROD_COMBOS only.
  at::Tensor x = self;
  const bool read_as_is = in == out || (is_integral(in) && is_integral(out) && out != DType::Bool);
  if (!read_as_is) {
    x = self.to(to_scalar_type(out));
    in = out;
  }
  Prepared p;
  p.op = ReduceOp::Prod;
  p.types = {in, in, sum_acc_dtype(in), out};
  p.variant = lookup_variant(ReduceOp::Prod, self.device().type(), "auto");
  const std::vector<int64_t> dims = dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{};
  plan_layout(p, x, dim ? at::OptionalIntArrayRef(dims) : std::nullopt, keepdim);
  return p;
}

Prepared prepare_norm(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype) {
  constexpr ReduceOp op = ReduceOp::Norm;
  check_device(op, self);
  const DType in = to_dtype(op, self.scalar_type(), "input dtype");
  if (is_integral(in)) {
    integer_input_error(op, in, std::string("linalg.vector_norm: Expected a floating point or complex tensor as "
                                            "input. Got ") + c10::toString(self.scalar_type()));
  }
  DType out = in;
  if (dtype) {
    TORCH_CHECK(at::isFloatingType(*dtype), "linalg.vector_norm: dtype should be floating point or complex, but got ",
                c10::toString(*dtype));
    TORCH_CHECK(c10::promoteTypes(self.scalar_type(), *dtype) == *dtype, "linalg.vector_norm: the dtype of the input (",
                c10::toString(self.scalar_type()), ") should be convertible without narrowing to the specified dtype (",
                c10::toString(*dtype), ")");
    out = to_dtype(op, *dtype, "dtype=");
  }
  const double q = ord.toDouble();
  const DimFlags reduced = reduced_dims(self.dim(), dim);  // torch's dim errors first
  if (self.numel() == 0 && (q < 0 || q == std::numeric_limits<double>::infinity())) {
    // No identity: torch's errors, with the order and dims as it prints them (an integer as
    // one, a float as an ostream does: %g). Formatted here, not by streaming the Scalar into an
    // ostream: that crossed into libc10's operator<< and crashed a GCC 13 build, as int64_t
    // streamed into c10::str did.
    char what[64];
    if (ord.isIntegral(/*includeBool=*/false)) std::snprintf(what, sizeof what, "%lld", static_cast<long long>(ord.toLong()));
    else std::snprintf(what, sizeof what, "%g", q);
    TORCH_CHECK(dim && !dim->empty(), "linalg.vector_norm cannot compute the ", what,
                " norm on an empty tensor because the operation does not have an identity");
    for (const int64_t d : *dim) {
      TORCH_CHECK(self.size(d) != 0, "linalg.vector_norm cannot compute the ", what, " norm on the dimension ",
                  std::to_string(d), "because this dimension is empty and the operation does not have an identity");
    }
  }
  at::Tensor x = out == in ? self : self.to(to_scalar_type(out));
  Prepared p;
  p.op = op;
  const DType acc = out == DType::Double ? DType::Double : DType::Float;
  p.types = {out, out, acc, out};
  p.variant = lookup_variant(op, self.device().type(), "auto");
  p.project.scalar = q;
  bool one_element = self.numel() > 0;  // every reduced dim of size 1: torch's |x| (or x != 0)
  for (int64_t i = 0; i < self.dim(); ++i) one_element = one_element && (!reduced[i] || self.size(i) == 1);
  const bool pow = norm_ord(q) == NormOrd::Pow && !one_element;
  if (pow) {
    // |x|^p for each element in the accumulator's dtype (as torch raises them), read by a sum.
    p.types.in = p.types.mid = acc;
  }
  plan_layout(p, pow ? x.to(to_scalar_type(acc)).abs().pow(q) : x, dim, keepdim);
  if (!p.done && one_element) {
    // Into the result directly: one elementwise kernel (abs and a copy were two, and an allocation).
    const at::Tensor v = x.reshape(p.out.sizes());
    if (q == 0) at::ne_out(p.out, v, 0);
    else at::abs_out(p.out, v);
    p.done = true;
  }
  return p;
}

Prepared prepare_logic(ReduceOp op, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  check_device(op, self);
  const DType in = to_dtype(op, self.scalar_type(), "input dtype");
  Prepared p;
  p.op = op;
  // torch's result dtypes: count_nonzero int64; any and all bool, uint8 for uint8 input.
  const DType out = op == ReduceOp::CountNonzero ? DType::Int64 : in == DType::UInt8 ? DType::UInt8 : DType::Bool;
  p.types = {in, DType::Bool, DType::Int64, out};
  p.variant = lookup_variant(op, self.device().type(), "auto");
  if (op != ReduceOp::CountNonzero && dim && dim->empty()) {
    // torch's any and all over an empty list of dims reduce nothing: x != 0, element by element.
    p.out = self.ne(0).to(to_scalar_type(out)).contiguous();
    p.done = true;
    return p;
  }
  plan_layout(p, self, dim, keepdim);
  if (op == ReduceOp::Any) p.project.logic = Logic::Any;
  if (op == ReduceOp::All) {
    p.project.logic = Logic::All;
    p.project.count = p.layout.count();
  }
  return p;
}

Prepared prepare_aminmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  constexpr ReduceOp op = ReduceOp::AMinMax;
  check_device(op, self);
  const DType in = to_dtype(op, self.scalar_type(), "input dtype");
  const std::vector<int64_t> dims = dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{};
  if (self.numel() == 0) {  // torch's errors: no identity
    TORCH_CHECK(dim, "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
    const int64_t w = c10::maybe_wrap_dim(*dim, self.dim());
    TORCH_CHECK_INDEX(self.dim() == 0 || self.size(w) != 0,
                      "aminmax: Expected reduction dim " + std::to_string(w) + " to have non-zero size.");
  }
  Prepared p;
  p.op = op;
  p.types = {in, in, minmax_acc_dtype(in), in};
  p.variant = lookup_variant(op, self.device().type(), "auto");
  plan_layout(p, self, dim ? at::OptionalIntArrayRef(dims) : std::nullopt, keepdim);
  return p;
}

Prepared prepare_indexed(ReduceOp op, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  check_device(op, self);
  const char* name = op_name(op);
  const DType in = to_dtype(op, self.scalar_type(), "input dtype");
  const bool arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  if (arg && in == DType::Bool) arg_bool_error(name);
  if (self.numel() == 0) {  // torch's errors: no identity
    TORCH_CHECK_INDEX(dim, std::string(name) + "(): Expected reduction dim to be specified for input.numel() == 0.");
    const int64_t w = c10::maybe_wrap_dim(*dim, self.dim());
    TORCH_CHECK_INDEX(self.dim() == 0 || self.size(w) != 0,
                      std::string(name) + "(): Expected reduction dim " + std::to_string(w) + " to have non-zero size.");
  }
  Prepared p;
  p.op = op;
  p.types = {in, in, minmax_acc_dtype(in), in};
  p.variant = lookup_variant(op, self.device().type(), "auto");
  const std::vector<int64_t> dims = dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{};
  // Every dim: positions in the flattened (row-major) order, as torch's, which a layout folded
  // in memory order would not give for other strides: a contiguous copy, but for a few elements
  // on CUDA, whose runs in logical order the small kernel reads in place (argmax over every dim
  // of (3, 96, 16).transpose(0, 1) int8 took 4.54 us with the copy, torch.compile 1.77; H200,
  // CUDA graphs).
  IndexedLayout logical;
  const bool in_place = !dim && self.is_cuda() && !self.is_contiguous() && self.numel() <= kLogicalRunsMost &&
                        logical_runs(self.sizes().data(), self.strides().data(), self.dim(), &logical);
  plan_layout(p, dim || in_place || self.is_contiguous() ? self : self.contiguous(),
              dim ? at::OptionalIntArrayRef(dims) : std::nullopt, keepdim);
  if (in_place && !p.done && p.input.is_same(self)) p.indexed = logical;
  return p;
}

bool exact_applies(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return at::isFloatingType(self.scalar_type()) && at::isFloatingType(dtype ? *dtype : self.scalar_type());
}

Prepared prepare_exact(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype, bool widen) {
  const at::ScalarType in = self.scalar_type(), out = dtype ? *dtype : in;
  to_dtype(ReduceOp::Sum, out, "dtype=");  // torch's TypeError for a dtype we do not take
  const bool exactly = out == at::kDouble || (out == at::kFloat && (in == at::kHalf || in == at::kBFloat16));
  if (widen && out != in && exactly) return prepare_reduce(ReduceOp::Sum, self, "exact", dim, keepdim, out);
  return prepare_reduce(ReduceOp::Sum, out == in ? self : self.to(out), "exact", dim, keepdim, std::nullopt);
}

Prepared prepare_exact_state(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                             std::optional<at::ScalarType> dtype, bool widen) {
  check_device(ReduceOp::Sum, self);
  TORCH_CHECK_TYPE(exact_applies(self, dtype), "treduce._exact_state: expected a floating input and result, got ",
                   c10::toString(self.scalar_type()), " summed as ",
                   c10::toString(dtype ? *dtype : self.scalar_type()),
                   " (integer sums are exact already: use variant 'auto')");
  return prepare_exact(self, dim, keepdim, dtype, widen);
}

at::Tensor exact_state_tensor(const Prepared& p) {
  std::vector<int64_t> shape(p.out.sizes().begin(), p.out.sizes().end());
  shape.push_back(kExactStateWords);
  at::Tensor state = at::empty(shape, p.out.options().dtype(at::kLong));
  if (p.done) state.zero_();  // no elements: the zero state (an empty sum is +0.0)
  return state;
}

at::Tensor exact_round_result(const at::Tensor& state, at::ScalarType dtype) {
  TORCH_CHECK(state.device().is_cpu() || state.device().is_cuda(),
              "treduce._exact_round: expected a CPU or CUDA tensor, got one on ", state.device());
  TORCH_CHECK_TYPE(state.scalar_type() == at::kLong, "treduce._exact_round: expected an int64 state, got ",
                   c10::toString(state.scalar_type()));
  if (state.dim() < 1 || state.size(-1) != kExactStateWords) {
    // Numbers into the message as strings, as reduced_dims' (a GCC 13 build ended here in a
    // segmentation fault while streaming the shape's int64s, twice).
    std::string shape = "[";
    for (int64_t i = 0; i < state.dim(); ++i) shape += (i ? ", " : "") + std::to_string(state.size(i));
    TORCH_CHECK_VALUE(false, "treduce._exact_round: expected a state whose last dim has " +
                                 std::to_string(kExactStateWords) + " words, got shape " + shape + "]");
  }
  TORCH_CHECK_TYPE(dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kFloat || dtype == at::kDouble,
                   "treduce._exact_round: expected float16, bfloat16, float32 or float64, got ", c10::toString(dtype));
  const auto sizes = state.sizes();
  return at::empty(std::vector<int64_t>(sizes.begin(), sizes.end() - 1), state.options().dtype(dtype));
}

DType dtype_of_scalar(at::ScalarType t) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kScalarTypes[i] == t) return DType(i);
  TORCH_INTERNAL_ASSERT(false, "no DType for ", c10::toString(t));
}

// The C++ entry points: through the dispatcher, so autograd and every other key apply.
at::Tensor sum(const at::Tensor& x, std::string_view variant, at::OptionalIntArrayRef dim,
               bool keepdim, std::optional<at::ScalarType> dtype) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("treduce::sum", "")
                             .typed<SumSignature>();
  return op.call(x, c10::string_view(variant.data(), variant.size()), dim, keepdim, dtype);
}

at::Tensor mean(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim,
                std::optional<at::ScalarType> dtype) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("treduce::mean", "")
                             .typed<SumSignature>();
  return op.call(x, "auto", dim, keepdim, dtype);
}

at::Tensor amax(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("treduce::amax", "")
                             .typed<MinMaxSignature>();
  return op.call(x, "auto", dim, keepdim);
}

at::Tensor amin(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("treduce::amin", "")
                             .typed<MinMaxSignature>();
  return op.call(x, "auto", dim, keepdim);
}

namespace {
template <class Signature>
c10::TypedOperatorHandle<Signature> op_handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}
}  // namespace

at::Tensor var(const at::Tensor& x, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
               bool keepdim) {
  static const auto op = op_handle<VarSignature>("treduce::var");
  return op.call(x, dim, correction, keepdim);
}

at::Tensor std(const at::Tensor& x, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
               bool keepdim) {
  static const auto op = op_handle<VarSignature>("treduce::std");
  return op.call(x, dim, correction, keepdim);
}

std::tuple<at::Tensor, at::Tensor> var_mean(const at::Tensor& x, at::OptionalIntArrayRef dim,
                                            const std::optional<at::Scalar>& correction, bool keepdim) {
  static const auto op = op_handle<VarMeanSignature>("treduce::var_mean");
  return op.call(x, dim, correction, keepdim);
}

std::tuple<at::Tensor, at::Tensor> std_mean(const at::Tensor& x, at::OptionalIntArrayRef dim,
                                            const std::optional<at::Scalar>& correction, bool keepdim) {
  static const auto op = op_handle<VarMeanSignature>("treduce::std_mean");
  return op.call(x, dim, correction, keepdim);
}

at::Tensor nansum(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  static const auto op = op_handle<NanSignature>("treduce::nansum");
  return op.call(x, dim, keepdim, dtype);
}

at::Tensor nanmean(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  static const auto op = op_handle<NanSignature>("treduce::nanmean");
  return op.call(x, dim, keepdim, dtype);
}

at::Tensor logsumexp(const at::Tensor& x, at::IntArrayRef dim, bool keepdim) {
  static const auto op = op_handle<LogSumExpSignature>("treduce::logsumexp");
  return op.call(x, dim, keepdim);
}

at::Tensor prod(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  static const auto op = op_handle<ProdSignature>("treduce::prod");
  return op.call(x, dim, keepdim, dtype);
}

at::Tensor vector_norm(const at::Tensor& x, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype) {
  static const auto op = op_handle<NormSignature>("treduce::vector_norm");
  return op.call(x, ord, dim, keepdim, dtype);
}

at::Tensor any(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim) {
  static const auto op = op_handle<LogicSignature>("treduce::any");
  return op.call(x, dim, keepdim);
}

at::Tensor all(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim) {
  static const auto op = op_handle<LogicSignature>("treduce::all");
  return op.call(x, dim, keepdim);
}

at::Tensor count_nonzero(const at::Tensor& x, at::OptionalIntArrayRef dim) {
  static const auto op = op_handle<CountSignature>("treduce::count_nonzero");
  return op.call(x, dim);
}

std::tuple<at::Tensor, at::Tensor> aminmax(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  static const auto op = op_handle<AMinMaxSignature>("treduce::aminmax");
  return op.call(x, dim, keepdim);
}

std::tuple<at::Tensor, at::Tensor> max(const at::Tensor& x, int64_t dim, bool keepdim) {
  static const auto op = op_handle<MaxDimSignature>("treduce::max");
  return op.call(x, dim, keepdim);
}

std::tuple<at::Tensor, at::Tensor> min(const at::Tensor& x, int64_t dim, bool keepdim) {
  static const auto op = op_handle<MaxDimSignature>("treduce::min");
  return op.call(x, dim, keepdim);
}

at::Tensor argmax(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  static const auto op = op_handle<ArgSignature>("treduce::argmax");
  return op.call(x, dim, keepdim);
}

at::Tensor argmin(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  static const auto op = op_handle<ArgSignature>("treduce::argmin");
  return op.call(x, dim, keepdim);
}

void register_kernels(torch::Library& m, const DeviceKernels& k) {
#define TREDUCE_IMPL(name, kernel, autograd, schema)                                         \
  TORCH_CHECK(k.name != nullptr, "the device's kernel table has no " #name); \
  m.impl(#name, k.name);
  TREDUCE_ALL_OPS(TREDUCE_IMPL)
#undef TREDUCE_IMPL
}

#ifndef TREDUCE_WITH_CUDA
VariantTable cuda_variants() { return {nullptr, 0}; }
#endif

}  // namespace treduce

TORCH_LIBRARY(treduce, m) {
  // The ops (ops.h).
#define TREDUCE_DEF(name, kernel, autograd, schema) m.def(#name schema);
  TREDUCE_ALL_OPS(TREDUCE_DEF)
#undef TREDUCE_DEF
  // The exact sum's state (exact.h), for sums whose partial states are added elsewhere (across
  // processes, by an integer all-reduce): the reduced shape plus a dim of int64 words. Rounded
  // once by _exact_round into the result dtype, it is sum(variant="exact").
  m.def("_exact_state(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor");
  m.def("_exact_round(Tensor state, ScalarType dtype) -> Tensor");
  m.def("variants(str device) -> str[]", &treduce::variants_op);
  // Diagnostic: how auto reads x for a reduction over dim (JSON; torch_reduce.explain).
  m.def("_plan(Tensor self, int[1]? dim=None, str op=\"sum\") -> str", &treduce::plan_op);
  // Diagnostic, for the benchmark (CUDA only): reads every byte of a contiguous tensor and
  // nothing else. The result is meaningless; the time is the memory's read bandwidth.
  m.def("_read_probe(Tensor self) -> Tensor");
}
