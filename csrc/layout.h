// What a reduction over some dims reads and writes, as three numbers and six strides, and how a
// tensor's sizes and strides fold into that form. Torch-free: the CUDA launcher takes a Layout3
// as plain data, and the CPU code walks the same one.
#pragma once

#include <cstdint>

namespace treduce {

// The ops, as the host code tells them apart (names, type rules, counts). Var, Std, VarMean and
// StdMean run one operator (VarOp), which differs only in what it stores; Any, All and
// CountNonzero run the sum of x != 0 (reduce_ops.h's Logic); MaxDim and ArgMax run
// ArgExtremumOp (values and positions; argmax keeps the positions only), as MinDim and ArgMin.
enum class ReduceOp : int8_t {
  Sum, Mean, Max, Min, Var, Std, VarMean, StdMean, NanSum, NanMean, LogSumExp, Prod, Norm,
  Any, All, CountNonzero, AMinMax, MaxDim, MinDim, ArgMax, ArgMin,
};
inline constexpr int kNumReduceOps = 21;

constexpr bool is_indexed(ReduceOp op) { return op >= ReduceOp::MaxDim && op <= ReduceOp::ArgMin; }
constexpr bool is_max_kind(ReduceOp op) { return op == ReduceOp::MaxDim || op == ReduceOp::ArgMax; }

constexpr bool is_var_family(ReduceOp op) { return op >= ReduceOp::Var && op <= ReduceOp::StdMean; }

// out[o * out_outer + i * out_inner] = reduce over r < reduced of
//   x[o * in_outer + r * in_reduced + i * in_inner]
// for o < outer, i < inner. Strides in elements. A full reduction of a contiguous tensor is
// outer = inner = 1, in_reduced = 1.
struct Layout3 {
  int64_t outer = 1, reduced = 1, inner = 1;
  int64_t in_outer = 0, in_reduced = 0, in_inner = 0;
  int64_t out_outer = 0, out_inner = 0;

  bool is_full_contiguous() const { return outer == 1 && inner == 1 && in_reduced == 1; }
};

// One dim of the input: its size, its stride in the input, its stride in the (contiguous)
// output (unused for reduced dims), and whether it is reduced.
struct DimInfo {
  int64_t size, in_stride, out_stride;
  bool reduced;
};

// Folds the dims into a Layout3 without moving data, when the strides allow it: size-1 dims
// are dropped, the rest put in memory order (largest input stride first) and neighbours of the
// same kind merged where they are one run of memory in the input (and, for kept dims, in the
// output). That leaves runs of kept and reduced dims; [kept] [reduced] [kept] or any part of
// it is a Layout3. Anything else (two separate runs of reduced dims, say) returns false and
// the caller makes a copy with the reduced dims last.
// Works in place on the caller's n dims (overwritten) and allocates nothing: it runs on every
// call of every op, and a few dims take an insertion sort less time than a heap allocation.
inline bool fold_layout(DimInfo* dims, int64_t n, Layout3* out) {
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i)
    if (dims[i].size != 1) dims[kept++] = dims[i];
  for (int64_t i = 1; i < kept; ++i) {  // stable: equal strides keep their order
    const DimInfo d = dims[i];
    int64_t j = i;
    for (; j > 0 && dims[j - 1].in_stride < d.in_stride; --j) dims[j] = dims[j - 1];
    dims[j] = d;
  }
  int64_t count = 0;  // the runs, written over the dims already read
  DimInfo* runs = dims;
  for (int64_t i = 0; i < kept; ++i) {
    const DimInfo d = dims[i];
    if (count > 0) {
      DimInfo& prev = runs[count - 1];
      const bool in_run = prev.reduced == d.reduced && prev.in_stride == d.in_stride * d.size &&
                          (d.reduced || prev.out_stride == d.out_stride * d.size);
      if (in_run) {
        prev = {prev.size * d.size, d.in_stride, d.out_stride, d.reduced};
        continue;
      }
    }
    runs[count++] = d;
  }
  int reduced_runs = 0;
  for (int64_t i = 0; i < count; ++i) reduced_runs += runs[i].reduced;
  if (reduced_runs > 1 || count > 3) return false;

  Layout3 l;
  int64_t k = 0;
  if (reduced_runs == 0) {
    // Nothing of size > 1 is reduced: a reduction of length 1, up to two kept runs.
    if (count > 2) return false;
    if (count == 2) {
      l.outer = runs[0].size, l.in_outer = runs[0].in_stride, l.out_outer = runs[0].out_stride;
      ++k;
    }
  } else if (!runs[0].reduced) {
    l.outer = runs[0].size, l.in_outer = runs[0].in_stride, l.out_outer = runs[0].out_stride;
    ++k;
  }
  if (reduced_runs == 1) {
    if (!runs[k].reduced) return false;  // [kept] [kept] [reduced]
    l.reduced = runs[k].size, l.in_reduced = runs[k].in_stride;
    ++k;
  } else {
    l.in_reduced = 1;  // one element per output: any stride reads it
  }
  if (k < count) {
    l.inner = runs[k].size, l.in_inner = runs[k].in_stride, l.out_inner = runs[k].out_stride;
    ++k;
  }
  if (k != count) return false;  // [reduced] [kept] [kept]
  *out = l;
  return true;
}

}  // namespace treduce
