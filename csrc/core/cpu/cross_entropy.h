// The CPU loops of cross_entropy (cross_entropy.h), torch-free: a sample at a time (the caller
// runs samples on its threads), two reads of its logits forward (maximum, then exps) and one
// backward; the reduction sums the per-sample losses in sample order (the same bits on any
// number of threads).
#pragma once

#include <cstdint>

#include "../convert.h"
#include "../cross_entropy.h"

namespace treduce::cpu {

template <class In, class Acc>
Acc xent_weight(const CrossEntropyArgs& a, int64_t c) {
  return a.weight ? element_cast<Acc>(static_cast<const In*>(a.weight)[c]) : Acc(1);
}

// Sample s's loss, weight w_t and logsumexp (targets already checked to be in range).
template <class In, class Acc>
void xent_forward_sample(const CrossEntropyArgs& a, int64_t s) {
  const In* x = static_cast<const In*>(a.x);
  const int64_t base = (s / a.inner) * a.classes * a.inner + s % a.inner, step = a.inner;
  Acc m = -INFINITY;
  for (int64_t c = 0; c < a.classes; ++c) m = norm_max(m, element_cast<Acc>(x[base + c * step]));
  Acc sum = Acc(0), smooth = Acc(0), weight_sum = Acc(0);
  const bool smoothing = a.smoothing != 0.0;
  for (int64_t c = 0; c < a.classes; ++c) {
    const Acc v = element_cast<Acc>(x[base + c * step]);
    sum += norm_exp(v - m);
    if (smoothing) {
      const Acc w = xent_weight<In, Acc>(a, c);
      smooth += w * (m - v), weight_sum += w;
    }
  }
  const Acc lse = m + norm_log(sum);
  const int64_t t = a.target[s];
  Acc loss = Acc(0), w_t = Acc(0);
  if (t != a.ignore_index) {
    w_t = xent_weight<In, Acc>(a, t);
    loss = xent_loss<Acc>(lse, m, element_cast<Acc>(x[base + t * step]), w_t, smooth, weight_sum, Acc(a.smoothing),
                          a.classes);
  }
  static_cast<Acc*>(a.lse)[s] = lse;
  if (a.reduction == LossReduction::None) {
    static_cast<In*>(a.loss)[s] = element_cast<In>(loss);
  } else {
    static_cast<Acc*>(a.sample_loss)[s] = loss;
    static_cast<Acc*>(a.sample_weight)[s] = w_t;
  }
}

// The reduced loss and the summed weights, in sample order.
template <class In, class Acc>
void xent_reduce(const CrossEntropyArgs& a) {
  const int64_t n = a.outer * a.inner;
  const Acc* losses = static_cast<const Acc*>(a.sample_loss);
  const Acc* weights = static_cast<const Acc*>(a.sample_weight);
  Acc l = Acc(0), w = Acc(0);
  for (int64_t s = 0; s < n; ++s) l += losses[s], w += weights[s];
  *static_cast<Acc*>(a.total_weight) = w;
  *static_cast<In*>(a.loss) = element_cast<In>(a.reduction == LossReduction::Mean ? l / w : l);
}

// Sample s's gradient over its logits; weight_sum is sum_c w_c.
template <class In, class Acc>
void xent_backward_sample(const CrossEntropyArgs& a, int64_t s, Acc weight_sum) {
  const In* x = static_cast<const In*>(a.x);
  In* dst = static_cast<In*>(a.grad_x);
  const int64_t base = (s / a.inner) * a.classes * a.inner + s % a.inner, step = a.inner;
  const int64_t t = a.target[s];
  if (t == a.ignore_index) {
    for (int64_t c = 0; c < a.classes; ++c) dst[base + c * step] = element_cast<In>(Acc(0));
    return;
  }
  const In* g = static_cast<const In*>(a.grad);
  Acc gs = element_cast<Acc>(g[a.reduction == LossReduction::None ? s : 0]);
  if (a.reduction == LossReduction::Mean) gs /= *static_cast<const Acc*>(a.total_weight);
  const Acc w_t = xent_weight<In, Acc>(a, t), lse = static_cast<const Acc*>(a.lse)[s];
  const Acc smoothing = Acc(a.smoothing);
  for (int64_t c = 0; c < a.classes; ++c) {
    const Acc w_c = smoothing != Acc(0) ? xent_weight<In, Acc>(a, c) : Acc(0);
    dst[base + c * step] = element_cast<In>(
        xent_grad<Acc>(element_cast<Acc>(x[base + c * step]), lse, c == t, w_t, w_c, weight_sum, gs, smoothing, a.classes));
  }
}

}  // namespace treduce::cpu
