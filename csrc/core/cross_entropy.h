// cross_entropy with class-index targets, torch-free: torch's F.cross_entropy (log_softmax, then
// nll_loss, plus label smoothing) fused, for logits seen as (outer, classes, inner): sample
// (o, i)'s logits are x[o][c][i] over c. Forward reads each sample's logits once: their
// logsumexp (kept for the backward), the target's logit, and with smoothing the weighted sums
// it needs; backward reads them once more and writes the gradient. With weight w (1 without),
// target t, smoothing e and C classes, sample s's loss is
//   (1 - e) w_t (lse - x_t) + (e / C) sum_c w_c (lse - x_c)      (0 where t is ignore_index)
// and its gradient over x_c, for incoming g_s,
//   g_s ((1 - e) w_t (p_c - [c == t]) + (e / C) (p_c W - w_c)),    p_c = exp(x_c - lse), W = sum w.
// Mean divides the summed losses by the summed w_t of the samples not ignored (NaN if none, as
// torch). The per-sample losses are summed in sample order by one thread set whose schedule does
// not depend on timing: the same bits run after run.
#pragma once

#include <math.h>

#include <cstdint>

#include "convert.h"
#include "dtype.h"
#include "normalize.h"

namespace treduce {

enum class LossReduction : int8_t { None = 0, Mean = 1, Sum = 2 };  // torch's enum values

struct CrossEntropyArgs {
  DType dtype = DType::Float;       // logits, weight, loss and gradient
  const void* x = nullptr;
  const int64_t* target = nullptr;  // outer * inner class indices
  const void* weight = nullptr;     // classes weights, or null
  int64_t outer = 1, classes = 1, inner = 1;
  int64_t ignore_index = -100;
  double smoothing = 0.0;
  LossReduction reduction = LossReduction::Mean;
  // forward: per-sample float32 (float64 for double logits) losses and their w_t (workspace or,
  // for reduction none, the loss itself in `loss`), each sample's logsumexp, the result.
  void* sample_loss = nullptr;
  void* sample_weight = nullptr;
  void* lse = nullptr;         // outer * inner, Acc
  void* loss = nullptr;        // the result: reduction none, outer * inner in dtype; else one
  void* total_weight = nullptr;  // one Acc: sum of w_t (the mean's divisor)
  // backward
  const void* grad = nullptr;  // incoming gradient: outer * inner (none) or one, in dtype
  void* grad_x = nullptr;      // the logits' gradient, contiguous like x
  int sm_count = 132;
};

// A sample's statistics over its classes in any order: the running maximum and sum of exps, and
// with smoothing sum_c w_c (max - x_c) (each term >= 0: no cancellation, rescaled as the
// maximum rises) and sum_c w_c.
template <class Acc>
struct XentStats {
  ExpSum<Acc> e;
  Acc smooth, weight;
  TREDUCE_HOST_DEVICE static XentStats identity() { return {ExpSum<Acc>::identity(), Acc(0), Acc(0)}; }
  TREDUCE_HOST_DEVICE void add(Acc x, Acc w) {
    if (x > e.max && weight != Acc(0)) smooth += weight * (x - e.max);
    e.add(x);
    smooth += w * (e.max - x);
    weight += w;
  }
  TREDUCE_HOST_DEVICE static XentStats combine(XentStats a, XentStats b) {
    const ExpSum<Acc> e = ExpSum<Acc>::combine(a.e, b.e);
    // each part's smooth sum moved up to the common maximum (parts without weight add nothing)
    const Acc sa = a.weight != Acc(0) ? a.smooth + a.weight * (e.max - a.e.max) : Acc(0);
    const Acc sb = b.weight != Acc(0) ? b.smooth + b.weight * (e.max - b.e.max) : Acc(0);
    return {e, sa + sb, a.weight + b.weight};
  }
};

// A sample's loss from its statistics (lse = max + log(sum)) and its target's logit and weight.
template <class Acc>
TREDUCE_HOST_DEVICE Acc xent_loss(Acc lse, Acc max, Acc x_t, Acc w_t, Acc smooth, Acc weight_sum, Acc smoothing,
                                  int64_t classes) {
  Acc loss = (Acc(1) - smoothing) * w_t * (lse - x_t);
  if (smoothing != Acc(0)) loss += smoothing / Acc(classes) * (smooth + weight_sum * (lse - max));
  return loss;
}

// The gradient of a sample's loss over one logit (g: its incoming gradient, already divided for
// mean).
template <class Acc>
TREDUCE_HOST_DEVICE Acc xent_grad(Acc x, Acc lse, bool is_target, Acc w_t, Acc w_c, Acc weight_sum, Acc g,
                                  Acc smoothing, int64_t classes) {
  const Acc p = norm_exp(x - lse);
  Acc d = (Acc(1) - smoothing) * w_t * (p - (is_target ? Acc(1) : Acc(0)));
  if (smoothing != Acc(0)) d += smoothing / Acc(classes) * (p * weight_sum - w_c);
  return g * d;
}

}  // namespace treduce
