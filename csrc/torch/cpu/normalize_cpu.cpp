// softmax, log_softmax and their backwards, cross_entropy, layer_norm and rms_norm on CPU
// tensors: the core/cpu loops' tasks (rows, strips of columns, samples, chunks of rows) on
// torch's threads.
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <vector>

#include "../../core/cpu/cross_entropy.h"
#include "../../core/cpu/layer_norm.h"
#include "../../core/cpu/normalize.h"
#include "../reduce_common.h"
#include "../row_norm_entries.h"
#include "lowp.h"

namespace treduce::cpu {
namespace {

template <SoftmaxOp kOp, class In, class Out>
void run(const NormalizeArgs& a) {
  using Acc = NormAcc<In>;
  const int64_t tasks = normalize_tasks(a);
  const int64_t per_task = a.size * std::min<int64_t>(a.inner, kNormStrip);
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, per_task));
  at::parallel_for(0, tasks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) normalize_task<kOp, In, Out, Acc>(a, t);
  });
}

// f(T{}) with the C++ type of a floating dtype.
template <class F>
void visit_floating(DType t, const F& f) {
  switch (t) {
    case DType::Half: return f(c10::Half());
    case DType::BFloat16: return f(c10::BFloat16());
    case DType::Float: return f(float());
    case DType::Double: return f(double());
    default: TORCH_INTERNAL_ASSERT(false, "no CPU kernel for this dtype");
  }
}

template <SoftmaxOp kOp>
void run_op(const NormalizeArgs& a) {
  using H = c10::Half;
  using B = c10::BFloat16;
  if (a.outer * a.size * a.inner == 0) return;
  if (a.in == a.out) {
    return visit_floating(a.in, [&](auto zero) {
      using T = decltype(zero);
      run<kOp, T, T>(a);
    });
  } else if constexpr (is_backward(kOp)) {
    if (a.out == DType::Half) return run<kOp, float, H>(a);
    if (a.out == DType::BFloat16) return run<kOp, float, B>(a);
  } else {
    if (a.in == DType::Half) return run<kOp, H, float>(a);
    if (a.in == DType::BFloat16) return run<kOp, B, float>(a);
  }
  TORCH_INTERNAL_ASSERT(false, "softmax: no CPU kernel for this dtype pair");
}

at::Tensor finish(PreparedSoftmax& p) {
  switch (p.args.op) {
    case SoftmaxOp::Softmax: run_op<SoftmaxOp::Softmax>(p.args); break;
    case SoftmaxOp::LogSoftmax: run_op<SoftmaxOp::LogSoftmax>(p.args); break;
    case SoftmaxOp::SoftmaxBackward: run_op<SoftmaxOp::SoftmaxBackward>(p.args); break;
    case SoftmaxOp::LogSoftmaxBackward: run_op<SoftmaxOp::LogSoftmaxBackward>(p.args); break;
  }
  return p.convert_to ? p.out.to(*p.convert_to) : p.out;
}

template <SoftmaxOp kOp>
at::Tensor softmax_cpu(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  PreparedSoftmax p = prepare_softmax(kOp, self, dim, dtype);
  return finish(p);
}

template <SoftmaxOp kOp>
at::Tensor softmax_backward_cpu(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                at::ScalarType input_dtype) {
  PreparedSoftmax p = prepare_softmax_backward(kOp, grad, output, dim, input_dtype);
  return finish(p);
}


std::tuple<at::Tensor, at::Tensor, at::Tensor> cross_entropy_forward_cpu(const at::Tensor& self, const at::Tensor& target,
                                                                         const std::optional<at::Tensor>& weight,
                                                                         int64_t reduction, int64_t ignore_index,
                                                                         double label_smoothing) {
  PreparedCrossEntropy p = prepare_cross_entropy(self, target, weight, reduction, ignore_index, label_smoothing, true);
  const CrossEntropyArgs& a = p.args;
  visit_floating(a.dtype, [&](auto zero) {
    using In = decltype(zero);
    using Acc = NormAcc<In>;
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, a.classes));
    at::parallel_for(0, a.outer * a.inner, grain, [&](int64_t begin, int64_t end) {
      for (int64_t s = begin; s < end; ++s) xent_forward_sample<In, Acc>(a, s);
    });
    if (a.reduction != LossReduction::None) xent_reduce<In, Acc>(a);
  });
  return {p.loss, p.lse, p.total_weight};
}

at::Tensor cross_entropy_cpu(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                             int64_t reduction, int64_t ignore_index, double label_smoothing) {
  return std::get<0>(cross_entropy_forward_cpu(self, target, weight, reduction, ignore_index, label_smoothing));
}

at::Tensor cross_entropy_backward_cpu(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                      const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                      double label_smoothing, const at::Tensor& lse, const at::Tensor& total_weight) {
  PreparedCrossEntropy p = prepare_cross_entropy_backward(grad, self, target, weight, reduction, ignore_index,
                                                          label_smoothing, lse, total_weight);
  const CrossEntropyArgs& a = p.args;
  visit_floating(a.dtype, [&](auto zero) {
    using In = decltype(zero);
    using Acc = NormAcc<In>;
    Acc weight_sum = Acc(a.classes);
    if (a.weight && a.smoothing != 0.0) {
      weight_sum = Acc(0);
      for (int64_t c = 0; c < a.classes; ++c) weight_sum += xent_weight<In, Acc>(a, c);
    }
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, a.classes));
    at::parallel_for(0, a.outer * a.inner, grain, [&](int64_t begin, int64_t end) {
      for (int64_t s = begin; s < end; ++s) xent_backward_sample<In, Acc>(a, s, weight_sum);
    });
  });
  return p.grad_x;
}

// Both norms on this device, for RowNormEntries (row_norm_entries.h).
struct Norms {
  template <NormKind kKind>
  static std::tuple<at::Tensor, at::Tensor, at::Tensor> forward(const at::Tensor& input, at::IntArrayRef shape,
                                                                const std::optional<at::Tensor>& weight,
                                                                const std::optional<at::Tensor>& bias,
                                                                std::optional<double> eps) {
    PreparedLayerNorm p = prepare_layer_norm(kKind, input, shape, weight, bias, eps);
    if (!p.empty) {
      const LayerNormArgs& a = p.args;
      visit_floating(a.dtype, [&](auto zero) {
        using T = decltype(zero);
        using Acc = NormAcc<T>;
        const int64_t grain = std::max<int64_t>(1, 32768 / a.cols);
        at::parallel_for(0, a.rows, grain, [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) layer_norm_forward_row<kKind, T, Acc>(a, r);
        });
      });
    }
    return {p.y, p.mean, p.rstd};
  }

  template <NormKind kKind>
  static std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(const at::Tensor& grad, const at::Tensor& input,
                                                               at::IntArrayRef shape, const at::Tensor& mean,
                                                               const at::Tensor& rstd,
                                                               const std::optional<at::Tensor>& weight,
                                                               const std::optional<at::Tensor>& bias,
                                                               std::array<bool, 3> mask) {
    PreparedLayerNorm p = prepare_layer_norm_backward(kKind, grad, input, shape, mean, rstd, weight, bias, mask);
    if (!p.empty) {
      const LayerNormArgs& a = p.args;
      visit_floating(a.dtype, [&](auto zero) {
        using T = decltype(zero);
        using Acc = NormAcc<T>;
        const int64_t chunks = layer_norm_chunks(a.rows, a.cols), per = (a.rows + chunks - 1) / chunks;
        const bool dw = a.grad_weight != nullptr, db = a.grad_bias != nullptr;
        std::vector<Acc> parts(size_t((dw + db) * chunks * a.cols));
        Acc* dw_part = dw ? parts.data() : nullptr;
        Acc* db_part = db ? parts.data() + (dw ? chunks * a.cols : 0) : nullptr;
        at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
          for (int64_t c = begin; c < end; ++c)
            layer_norm_backward_chunk<kKind, T, Acc>(a, c, per, dw_part ? dw_part + c * a.cols : nullptr,
                                                     db_part ? db_part + c * a.cols : nullptr);
        });
        if (dw || db) layer_norm_weight_grads<T, Acc>(a, chunks, dw_part, db_part);
      });
    }
    return {p.grad_x, p.grad_weight, p.grad_bias};
  }
};

}  // namespace

void set_normalizing_kernels(DeviceKernels& k) {
  RowNormEntries<Norms>::set(k);
  k.cross_entropy = &cross_entropy_cpu;
  k.cross_entropy_forward = &cross_entropy_forward_cpu;
  k.cross_entropy_backward = &cross_entropy_backward_cpu;
  k.softmax = &softmax_cpu<SoftmaxOp::Softmax>;
  k.log_softmax = &softmax_cpu<SoftmaxOp::LogSoftmax>;
  k.softmax_backward = &softmax_backward_cpu<SoftmaxOp::SoftmaxBackward>;
  k.log_softmax_backward = &softmax_backward_cpu<SoftmaxOp::LogSoftmaxBackward>;
}

}  // namespace treduce::cpu
