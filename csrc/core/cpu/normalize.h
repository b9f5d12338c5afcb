// The CPU loops of softmax, log_softmax and their backwards (normalize.h), torch-free: a task is
// a row (inner == 1) or a strip of up to kNormStrip adjacent columns of one outer index, whose
// statistics are kept side by side so that every pass reads the rows of the strip in memory
// order. Two reads forward (the maximum, then the sum of exps) and a third that writes, as
// torch's; the caller runs the tasks on its threads.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../convert.h"
#include "../normalize.h"

namespace treduce::cpu {

inline constexpr int64_t kNormStrip = 64;

// Tasks of a call: its rows, or its strips.
inline int64_t normalize_tasks(const NormalizeArgs& a) {
  return a.inner == 1 ? a.outer : a.outer * ((a.inner + kNormStrip - 1) / kNormStrip);
}

template <SoftmaxOp kOp, class In, class Out, class Acc>
void normalize_task(const NormalizeArgs& a, int64_t task) {
  const In* x = static_cast<const In*>(a.x);
  const In* y = static_cast<const In*>(a.y);
  Out* out = static_cast<Out*>(a.out_data);
  const int64_t n = a.size, inner = a.inner;
  const auto load = [](In v) { return element_cast<Acc>(v); };
  int64_t o = task, i0 = 0, w = 1;
  if (inner > 1) {
    const int64_t strips = (inner + kNormStrip - 1) / kNormStrip;
    o = task / strips;
    i0 = (task % strips) * kNormStrip;
    w = std::min(kNormStrip, inner - i0);
  }
  const int64_t base = o * n * inner + i0;
  Acc first[kNormStrip], second[kNormStrip];
  if constexpr (!is_backward(kOp)) {
    for (int64_t i = 0; i < w; ++i) first[i] = -INFINITY, second[i] = Acc(0);
    for (int64_t d = 0; d < n; ++d) {
      const In* row = x + base + d * inner;
      for (int64_t i = 0; i < w; ++i) first[i] = norm_max(first[i], load(row[i]));
    }
    for (int64_t d = 0; d < n; ++d) {
      const In* row = x + base + d * inner;
      for (int64_t i = 0; i < w; ++i) second[i] += norm_exp(load(row[i]) - first[i]);
    }
    for (int64_t d = 0; d < n; ++d) {
      const In* row = x + base + d * inner;
      Out* dst = out + base + d * inner;
      for (int64_t i = 0; i < w; ++i)
        dst[i] = element_cast<Out>(normalize_one<kOp, Acc>(load(row[i]), Acc(0), first[i], second[i]));
    }
  } else {
    for (int64_t i = 0; i < w; ++i) first[i] = Acc(0);
    for (int64_t d = 0; d < n; ++d) {
      const int64_t at = base + d * inner;
      for (int64_t i = 0; i < w; ++i) first[i] += backward_term<kOp, Acc>(load(x[at + i]), load(y[at + i]));
    }
    for (int64_t d = 0; d < n; ++d) {
      const int64_t at = base + d * inner;
      for (int64_t i = 0; i < w; ++i)
        out[at + i] = element_cast<Out>(normalize_one<kOp, Acc>(load(x[at + i]), load(y[at + i]), first[i], Acc(0)));
    }
  }
}

}  // namespace treduce::cpu
