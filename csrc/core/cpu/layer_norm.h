// The CPU loops of layer_norm and rms_norm (layer_norm.h), torch-free. Forward: a task is a row
// (its sum, its squares about the mean, then the write). Backward: a task is a chunk of rows
// (layer_norm_chunks: a count fixed by the shape, not by the threads), which writes its rows'
// dx and its own partial sums of g xhat and g per column; the chunks' partials are then summed
// in chunk order, so dw and db have the same bits on any number of threads.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../convert.h"
#include "../layer_norm.h"

namespace treduce::cpu {

// Up to 64 chunks, fewer for long rows: their partials (2 x chunks x cols accumulators) stay
// within 2^20 accumulators a kind.
inline int64_t layer_norm_chunks(int64_t rows, int64_t cols) {
  return std::max<int64_t>(1, std::min<int64_t>({rows, 64, (int64_t(1) << 20) / std::max<int64_t>(cols, 1)}));
}

template <NormKind kKind, class T, class Acc>
void layer_norm_forward_row(const LayerNormArgs& a, int64_t r) {
  const int64_t n = a.cols;
  const T* x = static_cast<const T*>(a.x) + r * n;
  const T* w = static_cast<const T*>(a.weight);
  const T* b = static_cast<const T*>(a.bias);
  T* y = static_cast<T*>(a.y) + r * n;
  Acc mean = Acc(0);
  if constexpr (kKind == NormKind::Layer) {
    for (int64_t i = 0; i < n; ++i) mean += element_cast<Acc>(x[i]);
    mean /= Acc(n);
  }
  Acc squares = Acc(0);
  for (int64_t i = 0; i < n; ++i) {
    const Acc d = element_cast<Acc>(x[i]) - mean;
    squares += d * d;
  }
  const Acc rstd = row_rstd(squares, n, a.eps);
  for (int64_t i = 0; i < n; ++i) {
    const Acc wi = w ? element_cast<Acc>(w[i]) : Acc(1), bi = b ? element_cast<Acc>(b[i]) : Acc(0);
    y[i] = element_cast<T>(norm_forward_one<kKind, Acc>(element_cast<Acc>(x[i]), mean, rstd, wi, bi));
  }
  if (a.mean) static_cast<Acc*>(a.mean)[r] = mean;
  static_cast<Acc*>(a.rstd)[r] = rstd;
}

// Rows [chunk * per, ...) of the backward: dx where wanted, and into dw_part and db_part (cols
// each, this chunk's) the chunk's sums of g xhat and g.
template <NormKind kKind, class T, class Acc>
void layer_norm_backward_chunk(const LayerNormArgs& a, int64_t chunk, int64_t per, Acc* dw_part, Acc* db_part) {
  const int64_t n = a.cols;
  const T* w = static_cast<const T*>(a.weight);
  const Acc inv_n = Acc(1) / Acc(n);
  if (dw_part) std::fill(dw_part, dw_part + n, Acc(0));
  if (db_part) std::fill(db_part, db_part + n, Acc(0));
  const int64_t end = std::min(a.rows, (chunk + 1) * per);
  for (int64_t r = chunk * per; r < end; ++r) {
    const T* x = static_cast<const T*>(a.x) + r * n;
    const T* g = static_cast<const T*>(a.grad) + r * n;
    const Acc mean = kKind == NormKind::Layer ? static_cast<const Acc*>(a.mean)[r] : Acc(0);
    const Acc rstd = static_cast<const Acc*>(a.rstd)[r];
    Acc sum_g = Acc(0), sum_gx = Acc(0);
    for (int64_t i = 0; i < n; ++i) {
      const Acc gi = element_cast<Acc>(g[i]), xhat = norm_xhat<kKind, Acc>(element_cast<Acc>(x[i]), mean, rstd);
      const Acc gw = w ? gi * element_cast<Acc>(w[i]) : gi;
      sum_g += gw, sum_gx += gw * xhat;
      if (dw_part) dw_part[i] += gi * xhat;
      if (db_part) db_part[i] += gi;
    }
    if (!a.grad_x) continue;
    T* dx = static_cast<T*>(a.grad_x) + r * n;
    for (int64_t i = 0; i < n; ++i) {
      const Acc gi = element_cast<Acc>(g[i]), xhat = norm_xhat<kKind, Acc>(element_cast<Acc>(x[i]), mean, rstd);
      const Acc gw = w ? gi * element_cast<Acc>(w[i]) : gi;
      dx[i] = element_cast<T>(norm_backward_one<kKind, Acc>(gw, xhat, rstd, sum_g, sum_gx, inv_n));
    }
  }
}

// dw and db (where wanted) from `chunks` partials of cols each, summed in chunk order.
template <class T, class Acc>
void layer_norm_weight_grads(const LayerNormArgs& a, int64_t chunks, const Acc* dw_part, const Acc* db_part) {
  const int64_t n = a.cols;
  for (int64_t i = 0; i < n; ++i) {
    Acc dw = Acc(0), db = Acc(0);
    for (int64_t c = 0; c < chunks; ++c) {
      if (dw_part) dw += dw_part[c * n + i];
      if (db_part) db += db_part[c * n + i];
    }
    if (a.grad_weight) static_cast<T*>(a.grad_weight)[i] = element_cast<T>(dw);
    if (a.grad_bias) static_cast<T*>(a.grad_bias)[i] = element_cast<T>(db);
  }
}

}  // namespace treduce::cpu
