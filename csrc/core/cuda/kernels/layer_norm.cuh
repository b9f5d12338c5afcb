// layer_norm and rms_norm on the GPU (core/layer_norm.h says what they compute), rows of `cols`
// contiguous elements:
//  - rows that a team holds in registers: kTeam threads a row (4 to 1024; several teams a block
//    up to 32 threads, a block a team past them), kPacks loads a thread of kVec elements (16-byte
//    packs where every row, the weight and the bias start on 16 bytes, else single elements).
//    Forward: one read, the mean and the squares about it from registers, one write. Backward:
//    one read of x and g, one write of dx, and the thread's column sums of g xhat and g kept in
//    registers over the rows the team takes (teams stride over the rows), so dw and db cost a
//    partial a block and one small column combine (weight_grads_kernel), not another read;
//  - longer rows: a block a row, three reads forward (sum, squares, write), two backward, dw
//    and db from a column kernel that reads x and g again (columns_grads_kernel).
// Every sum is in a fixed order (shuffles, then the team's warps in order, then the partials in
// block order): the same bits run after run.
#pragma once

#include "../../layer_norm.h"
#include "common.cuh"
#include "normalize.cuh"

namespace treduce::cuda::lnorm {

using norm::group_sum;
using norm::Pack;

inline constexpr int kLoopThreads = 512;    // a block a row, past what registers hold
inline constexpr int kCombineY = 8;         // columns_grads_kernel: 32 columns x kCombineY
inline constexpr int kPartialsY = 32;       // weight_grads_kernel: 32 columns x kPartialsY
inline constexpr int kPartialsWays = 4;     // ... each thread's loads in flight
inline constexpr int kLeastBlock = 128;     // a block holds kLeastBlock / kTeam teams of small teams

template <int kTeam>
inline constexpr int kTeamBlock = kTeam < kLeastBlock ? kLeastBlock : kTeam;

// The sum of v over the team, in every thread of it; `shared` holds kTeam / 32 values (teams
// past a warp: one a block).
template <int kTeam, class Acc>
__device__ __forceinline__ Acc team_sum(Acc v, Acc* shared) {
  if constexpr (kTeam <= 32) {
    return group_sum<kTeam>(v);
  } else {
    v = group_sum<32>(v);
    __syncthreads();  // (the last call's readers are done)
    if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
    __syncthreads();
    Acc t = shared[0];
#pragma unroll
    for (int k = 1; k < kTeam / 32; ++k) t += shared[k];
    return t;
  }
}

template <class T, class Acc, int kPacks, int kVec>
__device__ __forceinline__ void load_row(const T* row, int lane, int kTeam_, int64_t cols, Acc (&v)[kPacks][kVec]) {
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const int64_t first = (int64_t(lane) + int64_t(kTeam_) * j) * kVec;
    if (first < cols) {
      const Pack<T, kVec> p = *reinterpret_cast<const Pack<T, kVec>*>(row + first);
#pragma unroll
      for (int e = 0; e < kVec; ++e) v[j][e] = element_cast<Acc>(p.v[e]);
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) v[j][e] = Acc(0);
    }
  }
}

// Forward, rows in registers; teams stride over the rows.
template <NormKind kKind, class T, class Acc, int kTeam, int kPacks, int kVec>
__global__ void __launch_bounds__(kTeamBlock<kTeam>) forward_kernel(LayerNormArgs a) {
  __shared__ Acc shared[kTeam / 32 + 1];
  constexpr int kTeams = kTeamBlock<kTeam> / kTeam;
  const int lane = threadIdx.x % kTeam;
  const int64_t n = a.cols;
  const T* w = static_cast<const T*>(a.weight);
  const T* b = static_cast<const T*>(a.bias);
  const Acc inv_n = Acc(1) / Acc(n);
  const int64_t teams = int64_t(gridDim.x) * kTeams;
  // (every thread of a block runs the same number of rounds: team_sum's barriers)
  for (int64_t r0 = int64_t(blockIdx.x) * kTeams; r0 < a.rows; r0 += teams) {
    const int64_t r = r0 + threadIdx.x / kTeam;
    const bool live = r < a.rows;
    Acc v[kPacks][kVec];
    load_row<T, Acc, kPacks, kVec>(static_cast<const T*>(a.x) + (live ? r : 0) * n, live ? lane : int(n), kTeam, n, v);
    Acc mean = Acc(0);
    if constexpr (kKind == NormKind::Layer) {
      Acc s = Acc(0);
#pragma unroll
      for (int j = 0; j < kPacks; ++j)
#pragma unroll
        for (int e = 0; e < kVec; ++e) s += v[j][e];
      mean = team_sum<kTeam>(s, shared) * inv_n;
    }
    Acc q = Acc(0);
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const bool in_row = (int64_t(lane) + int64_t(kTeam) * j) * kVec < n;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const Acc d = v[j][e] - mean;
        q += in_row ? d * d : Acc(0);
      }
    }
    const Acc rstd = row_rstd(team_sum<kTeam>(q, shared), n, a.eps);
    if (!live) continue;
    T* y = static_cast<T*>(a.y) + r * n;
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int64_t first = (int64_t(lane) + int64_t(kTeam) * j) * kVec;
      if (first >= n) continue;
      Pack<T, kVec> out, wp, bp;
      if (w) wp = *reinterpret_cast<const Pack<T, kVec>*>(w + first);
      if (b) bp = *reinterpret_cast<const Pack<T, kVec>*>(b + first);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const Acc we = w ? element_cast<Acc>(wp.v[e]) : Acc(1), be = b ? element_cast<Acc>(bp.v[e]) : Acc(0);
        out.v[e] = element_cast<T>(norm_forward_one<kKind, Acc>(v[j][e], mean, rstd, we, be));
      }
      *reinterpret_cast<Pack<T, kVec>*>(y + first) = out;
    }
    if (lane == 0) {
      if (a.mean) static_cast<Acc*>(a.mean)[r] = mean;
      static_cast<Acc*>(a.rstd)[r] = rstd;
    }
  }
}

// Backward, rows in registers: dx, and the block's column sums of g xhat and g into
// partials[blockIdx.x][cols] and partials[gridDim.x + blockIdx.x][cols] (small teams' sums
// combined through shared memory in team order first).
template <NormKind kKind, class T, class Acc, int kTeam, int kPacks, int kVec>
__global__ void __launch_bounds__(kTeamBlock<kTeam>) backward_kernel(LayerNormArgs a) {
  __shared__ Acc shared[kTeam / 32 + 1];
  constexpr int kTeams = kTeamBlock<kTeam> / kTeam;
  const int lane = threadIdx.x % kTeam;
  const int64_t n = a.cols;
  const T* w = static_cast<const T*>(a.weight);
  const Acc inv_n = Acc(1) / Acc(n);
  const int64_t teams = int64_t(gridDim.x) * kTeams;
  const bool weight_grads = a.grad_weight || a.grad_bias;
  Acc dw[kPacks][kVec], db[kPacks][kVec], wv[kPacks][kVec];
#pragma unroll
  for (int j = 0; j < kPacks; ++j)
#pragma unroll
    for (int e = 0; e < kVec; ++e) dw[j][e] = db[j][e] = Acc(0), wv[j][e] = Acc(1);
  if (w) load_row<T, Acc, kPacks, kVec>(w, lane, kTeam, n, wv);
  for (int64_t r0 = int64_t(blockIdx.x) * kTeams; r0 < a.rows; r0 += teams) {
    const int64_t r = r0 + threadIdx.x / kTeam;
    const bool live = r < a.rows;
    Acc x[kPacks][kVec], g[kPacks][kVec];
    const int at = live ? lane : int(n);  // (a dead team's lanes load nothing)
    load_row<T, Acc, kPacks, kVec>(static_cast<const T*>(a.x) + (live ? r : 0) * n, at, kTeam, n, x);
    load_row<T, Acc, kPacks, kVec>(static_cast<const T*>(a.grad) + (live ? r : 0) * n, at, kTeam, n, g);
    const Acc mean = kKind == NormKind::Layer && live ? static_cast<const Acc*>(a.mean)[r] : Acc(0);
    const Acc rstd = live ? static_cast<const Acc*>(a.rstd)[r] : Acc(0);
    Acc sum_g = Acc(0), sum_gx = Acc(0);
#pragma unroll
    for (int j = 0; j < kPacks; ++j)
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        // (zeros past the row and in dead teams: g 0 adds nothing)
        const Acc xhat = norm_xhat<kKind, Acc>(x[j][e], mean, rstd);
        const Acc gw = g[j][e] * wv[j][e];
        sum_g += gw, sum_gx += gw * xhat;
        dw[j][e] += g[j][e] * xhat, db[j][e] += g[j][e];
        x[j][e] = xhat, g[j][e] = gw;
      }
    if constexpr (kKind == NormKind::Layer) sum_g = team_sum<kTeam>(sum_g, shared);
    sum_gx = team_sum<kTeam>(sum_gx, shared);
    if (!live || !a.grad_x) continue;
    T* dx = static_cast<T*>(a.grad_x) + r * n;
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int64_t first = (int64_t(lane) + int64_t(kTeam) * j) * kVec;
      if (first >= n) continue;
      Pack<T, kVec> out;
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        out.v[e] = element_cast<T>(norm_backward_one<kKind, Acc>(g[j][e], x[j][e], rstd, sum_g, sum_gx, inv_n));
      *reinterpret_cast<Pack<T, kVec>*>(dx + first) = out;
    }
  }
  if (!weight_grads) return;
  Acc* part_w = static_cast<Acc*>(a.partials) + int64_t(blockIdx.x) * n;
  Acc* part_b = static_cast<Acc*>(a.partials) + (int64_t(gridDim.x) + blockIdx.x) * n;
  if constexpr (kTeams > 1) {
    // The block's teams, in team order: each team's sums through shared memory in turn.
    extern __shared__ __align__(16) unsigned char dynamic[];
    Acc* cw = reinterpret_cast<Acc*>(dynamic);
    Acc* cb = cw + n;
    for (int t = 0; t < kTeams; ++t) {
      if (int(threadIdx.x / kTeam) == t) {
#pragma unroll
        for (int j = 0; j < kPacks; ++j)
#pragma unroll
          for (int e = 0; e < kVec; ++e) {
            const int64_t i = (int64_t(lane) + int64_t(kTeam) * j) * kVec + e;
            if (i < n) {
              cw[i] = t == 0 ? dw[j][e] : cw[i] + dw[j][e];
              cb[i] = t == 0 ? db[j][e] : cb[i] + db[j][e];
            }
          }
      }
      __syncthreads();
    }
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) part_w[i] = cw[i], part_b[i] = cb[i];
  } else {
#pragma unroll
    for (int j = 0; j < kPacks; ++j)
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const int64_t i = (int64_t(lane) + int64_t(kTeam) * j) * kVec + e;
        if (i < n) part_w[i] = dw[j][e], part_b[i] = db[j][e];
      }
  }
}

// dw and db from `parts` partials a column (partials[p][cols], then the bias's): 32 columns a
// block, kPartialsY threads down each; thread y sums partials y, y + kPartialsY, ... into
// kPartialsWays accumulators in turn (their loads in flight together: with one, a column of 528
// partials was a chain of dependent loads, 30 us of a 2048-wide backward), then the ways and the
// threads down are combined in order.
template <class T, class Acc>
__global__ void __launch_bounds__(32 * kPartialsY) weight_grads_kernel(LayerNormArgs a, int64_t parts) {
  __shared__ Acc sw[kPartialsY][33], sb[kPartialsY][33];
  const int64_t n = a.cols;
  const int64_t i = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const Acc* pw = static_cast<const Acc*>(a.partials);
  const Acc* pb = pw + parts * n;
  Acc w = Acc(0), b = Acc(0);
  if (i < n) {
    Acc ws[kPartialsWays] = {}, bs[kPartialsWays] = {};
    constexpr int64_t kStep = int64_t(kPartialsY) * kPartialsWays;
    int64_t p = threadIdx.y;
    for (; p + (kPartialsWays - 1) * kPartialsY < parts; p += kStep)
#pragma unroll
      for (int k = 0; k < kPartialsWays; ++k)
        ws[k] += pw[(p + k * kPartialsY) * n + i], bs[k] += pb[(p + k * kPartialsY) * n + i];
#pragma unroll
    for (int k = 0; k < kPartialsWays; ++k)
      if (p + k * kPartialsY < parts) ws[k] += pw[(p + k * kPartialsY) * n + i], bs[k] += pb[(p + k * kPartialsY) * n + i];
#pragma unroll
    for (int k = 0; k < kPartialsWays; ++k) w += ws[k], b += bs[k];
  }
  sw[threadIdx.y][threadIdx.x] = w, sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y != 0 || i >= n) return;
  for (int k = 1; k < kPartialsY; ++k) w += sw[k][threadIdx.x], b += sb[k][threadIdx.x];
  if (a.grad_weight) static_cast<T*>(a.grad_weight)[i] = element_cast<T>(w);
  if (a.grad_bias) static_cast<T*>(a.grad_bias)[i] = element_cast<T>(b);
}

// A block a row, any length (rows past what registers hold; single elements).
template <class Acc>
__device__ __forceinline__ Acc block_sum(Acc v, Acc* shared) {
  v = group_sum<32>(v);
  __syncthreads();
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  Acc t = shared[0];
  for (int k = 1; k < int(blockDim.x / 32); ++k) t += shared[k];
  return t;
}

template <NormKind kKind, class T, class Acc>
__global__ void __launch_bounds__(kLoopThreads) forward_loop_kernel(LayerNormArgs a) {
  __shared__ Acc shared[kLoopThreads / 32];
  const int64_t r = blockIdx.x, n = a.cols;
  const T* x = static_cast<const T*>(a.x) + r * n;
  const T* w = static_cast<const T*>(a.weight);
  const T* b = static_cast<const T*>(a.bias);
  Acc mean = Acc(0);
  if constexpr (kKind == NormKind::Layer) {
    Acc s = Acc(0);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += element_cast<Acc>(x[i]);
    mean = block_sum(s, shared) / Acc(n);
  }
  Acc q = Acc(0);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const Acc d = element_cast<Acc>(x[i]) - mean;
    q += d * d;
  }
  const Acc rstd = row_rstd(block_sum(q, shared), n, a.eps);
  T* y = static_cast<T*>(a.y) + r * n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const Acc we = w ? element_cast<Acc>(w[i]) : Acc(1), be = b ? element_cast<Acc>(b[i]) : Acc(0);
    y[i] = element_cast<T>(norm_forward_one<kKind, Acc>(element_cast<Acc>(x[i]), mean, rstd, we, be));
  }
  if (threadIdx.x == 0) {
    if (a.mean) static_cast<Acc*>(a.mean)[r] = mean;
    static_cast<Acc*>(a.rstd)[r] = rstd;
  }
}

template <NormKind kKind, class T, class Acc>
__global__ void __launch_bounds__(kLoopThreads) backward_loop_kernel(LayerNormArgs a) {
  __shared__ Acc shared[kLoopThreads / 32];
  const int64_t r = blockIdx.x, n = a.cols;
  const T* x = static_cast<const T*>(a.x) + r * n;
  const T* g = static_cast<const T*>(a.grad) + r * n;
  const T* w = static_cast<const T*>(a.weight);
  const Acc mean = kKind == NormKind::Layer ? static_cast<const Acc*>(a.mean)[r] : Acc(0);
  const Acc rstd = static_cast<const Acc*>(a.rstd)[r];
  Acc sg = Acc(0), sgx = Acc(0);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const Acc gw = element_cast<Acc>(g[i]) * (w ? element_cast<Acc>(w[i]) : Acc(1));
    sg += gw, sgx += gw * norm_xhat<kKind, Acc>(element_cast<Acc>(x[i]), mean, rstd);
  }
  if constexpr (kKind == NormKind::Layer) sg = block_sum(sg, shared);
  sgx = block_sum(sgx, shared);
  T* dx = static_cast<T*>(a.grad_x) + r * n;
  const Acc inv_n = Acc(1) / Acc(n);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const Acc gw = element_cast<Acc>(g[i]) * (w ? element_cast<Acc>(w[i]) : Acc(1));
    const Acc xhat = norm_xhat<kKind, Acc>(element_cast<Acc>(x[i]), mean, rstd);
    dx[i] = element_cast<T>(norm_backward_one<kKind, Acc>(gw, xhat, rstd, sg, sgx, inv_n));
  }
}

// dw and db over long rows: 32 columns a block, kCombineY threads down the rows (each every
// kCombineY-th row), combined in y order.
template <NormKind kKind, class T, class Acc>
__global__ void __launch_bounds__(32 * kCombineY) columns_grads_kernel(LayerNormArgs a) {
  __shared__ Acc sw[kCombineY][33], sb[kCombineY][33];
  const int64_t n = a.cols;
  const int64_t i = int64_t(blockIdx.x) * 32 + threadIdx.x;
  Acc w = Acc(0), b = Acc(0);
  if (i < n)
    for (int64_t r = threadIdx.y; r < a.rows; r += kCombineY) {
      const Acc mean = kKind == NormKind::Layer ? static_cast<const Acc*>(a.mean)[r] : Acc(0);
      const Acc rstd = static_cast<const Acc*>(a.rstd)[r];
      const Acc g = element_cast<Acc>(static_cast<const T*>(a.grad)[r * n + i]);
      w += g * norm_xhat<kKind, Acc>(element_cast<Acc>(static_cast<const T*>(a.x)[r * n + i]), mean, rstd);
      b += g;
    }
  sw[threadIdx.y][threadIdx.x] = w, sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y != 0 || i >= n) return;
  for (int k = 1; k < kCombineY; ++k) w += sw[k][threadIdx.x], b += sb[k][threadIdx.x];
  if (a.grad_weight) static_cast<T*>(a.grad_weight)[i] = element_cast<T>(w);
  if (a.grad_bias) static_cast<T*>(a.grad_bias)[i] = element_cast<T>(b);
}

}  // namespace treduce::cuda::lnorm
