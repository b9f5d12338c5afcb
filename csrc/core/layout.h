// What a reduction over some dims reads and writes, and how any tensor's sizes and strides fold
// into that form without moving data. Torch-free: the CUDA launcher takes a Layout3 as plain
// data, and the CPU code walks the same one.
#pragma once

#include <cstdint>

#include "convert.h"

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

// Runs an index can stand for (see RunIndex); more, and the caller copies.
inline constexpr int kMaxOuterRuns = 4;

// An index as the digits of up to kMaxOuterRuns runs of memory, the first run the most
// significant: k = (d0 * size1 + d1) * size2 + d2, each digit stepping `in` elements in the input
// and `out` in the output. Division by the sizes as a multiply and a shift, for indexes below 2^31
// (ATen's IntDivider): a 64-bit division on the GPU is a call of some 70 instructions, and with it
// the rows kernels took up to 18 registers more.
struct RunIndex {
  int runs = 0;
  int64_t size[kMaxOuterRuns] = {}, in[kMaxOuterRuns] = {}, out[kMaxOuterRuns] = {};
  uint32_t magic[kMaxOuterRuns] = {}, shift[kMaxOuterRuns] = {};

  // Appends a run (false when there are kMaxOuterRuns already).
  bool add(int64_t n, int64_t in_stride, int64_t out_stride) {
    if (runs == kMaxOuterRuns) return false;
    size[runs] = n, in[runs] = in_stride, out[runs] = out_stride;
    uint32_t s = 0;  // ATen's IntDivider<unsigned int>: exact for indexes below 2^31
    while ((int64_t(1) << s) < n) ++s;
    shift[runs] = s;
    magic[runs] = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << s) - uint64_t(n))) / uint64_t(n) + 1);
    ++runs;
    return true;
  }
  // Whether the innermost run is contiguous in the input (rows, for reduced runs; adjacent
  // results adjacent in memory, for kept runs).
  bool innermost_contiguous() const { return runs > 0 && in[runs - 1] == 1; }
  int64_t count() const {
    int64_t c = 1;
    for (int k = 0; k < runs; ++k) c *= size[k];
    return c;
  }
  TREDUCE_HOST_DEVICE int64_t in_offset(int64_t k) const { return offset(k, in); }
  TREDUCE_HOST_DEVICE int64_t out_offset(int64_t k) const { return offset(k, out); }

 private:
  TREDUCE_HOST_DEVICE static uint32_t high_word(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
    return __umulhi(a, b);
#else
    return uint32_t((uint64_t(a) * b) >> 32);
#endif
  }
  // Constant indexes only (unrolled): a parameter array indexed by a variable is copied to the
  // stack first.
  TREDUCE_HOST_DEVICE int64_t offset(int64_t k, const int64_t* stride) const {
    uint32_t n = uint32_t(k);
    int64_t offset = 0;
    TREDUCE_UNROLL
    for (int r = kMaxOuterRuns - 1; r > 0; --r) {
      if (r < runs) {
        const uint32_t q = (high_word(n, magic[r]) + n) >> shift[r];
        offset += int64_t(n - q * uint32_t(size[r])) * stride[r];
        n = q;
      }
    }
    return offset + int64_t(n) * stride[0];
  }
};

// out[outer_out(o) + i * out_inner] = reduce over r < reduced of
//   x[outer_in(o) + r * in_reduced + i * in_inner]
// for o < outer, i < inner. Strides in elements. A full reduction of a contiguous tensor is
// outer = inner = 1, in_reduced = 1.
//
// The outer index is one run of memory (outer_runs.runs <= 1: o * in_outer, o * out_outer), or
// the digits of several (kept dims apart in memory, or in another order in memory than in the
// result).
//
// combine > 1: the reduced dims were more than one run of memory. One run is `reduced`; the others
// are digits of the outer index whose out strides step through `combine` partials of each
// result: the kernels then write partial accumulators at [partial][output] (outputs = outer *
// inner / combine, in the result's order), and a second pass combines each output's partials
// in that order.
//
// inner_runs (runs > 1, the CUDA columns kernels only: cuda/plan_reduce.h's inner_merged): the
// inner index is the digits of several kept runs that follow one another in the input (i *
// in_inner reads it) but not in the result: output i of outer index o is at outer_out(o) +
// inner_runs.out_offset(i), and out_inner is 0.
struct Layout3 {
  int64_t outer = 1, reduced = 1, inner = 1;
  int64_t in_outer = 0, in_reduced = 0, in_inner = 0;
  int64_t out_outer = 0, out_inner = 0;
  RunIndex outer_runs;  // used when it has more than one run
  int64_t combine = 1;
  RunIndex inner_runs;  // used when it has more than one run

  bool is_full_contiguous() const {
    return outer == 1 && inner == 1 && in_reduced == 1 && combine == 1;
  }
  // Elements reduced into each result.
  int64_t count() const { return reduced * combine; }
  int64_t outputs() const { return outer * inner / combine; }

  // Where outer index o starts in the input and in the output.
  TREDUCE_HOST_DEVICE int64_t outer_in(int64_t o) const {
    return outer_runs.runs <= 1 ? o * in_outer : outer_runs.in_offset(o);
  }
  TREDUCE_HOST_DEVICE int64_t outer_out(int64_t o) const {
    return outer_runs.runs <= 1 ? o * out_outer : outer_runs.out_offset(o);
  }
  // Where inner index i goes in the output, from outer_out(o).
  TREDUCE_HOST_DEVICE int64_t inner_out(int64_t i) const {
    return inner_runs.runs <= 1 ? i * out_inner : inner_runs.out_offset(i);
  }
  // Whether every outer run's input stride is a multiple of `elements` (a run of one element
  // has no stride to speak of).
  bool outer_strides_multiple_of(int64_t elements) const {
    if (outer_runs.runs <= 1) return outer == 1 || in_outer % elements == 0;
    for (int k = 0; k < outer_runs.runs; ++k)
      if (outer_runs.in[k] % elements != 0) return false;
    return true;
  }
};

// The same reduction as plain indexes, for kernels that take any layout in one pass: result k
// (the result is contiguous) starts at kept.in_offset(k), and its element j is at that plus
// reduced.in_offset(j), j < count (for one reduced dim, its position). `usable` is false when the
// runs are more than RunIndex takes, or the indexes reach 2^31.
struct IndexedLayout {
  RunIndex kept, reduced;
  int64_t outputs = 1, count = 1;
  bool usable = false;
  // The reduced runs in the input's logical order, not in memory order (logical_runs): then
  // positions count along them, and only the kernels that read these indexes may take it.
  bool in_logical_order = false;
};

// One dim of the input: its size, its stride in the input, its stride in the (contiguous)
// output (unused for reduced dims), and whether it is reduced.
struct DimInfo {
  int64_t size, in_stride, out_stride;
  bool reduced;
};

// Drops size-1 dims, puts the rest in memory order (largest input stride first; equal strides
// keep their order) and merges neighbours of the same kind that are one run of memory in the
// input (and, for kept dims, in the output). Works in place; returns the number of runs.
// Expanded dims (stride 0) go first, outermost: innermost, a kept one made the result's
// neighbouring outputs read one element and write far apart (nanmean of (3, 1, 80, 40) expanded
// to 3072 over dim 0: columns of 3 down 3072 outputs of stride 0, 159 us against 14 for
// torch.compile), and a reduced one read one element over and over as a row.
inline int64_t fold_runs(DimInfo* dims, int64_t n) {
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i)
    if (dims[i].size != 1) dims[kept++] = dims[i];
  const auto order = [](int64_t stride) { return stride == 0 ? INT64_MAX : stride; };
  for (int64_t i = 1; i < kept; ++i) {  // a few dims: an insertion sort, no allocation
    const DimInfo d = dims[i];
    int64_t j = i;
    for (; j > 0 && order(dims[j - 1].in_stride) < order(d.in_stride); --j) dims[j] = dims[j - 1];
    dims[j] = d;
  }
  int64_t count = 0;  // the runs, written over the dims already read
  for (int64_t i = 0; i < kept; ++i) {
    const DimInfo d = dims[i];
    if (count > 0) {
      DimInfo& prev = dims[count - 1];
      if (prev.reduced == d.reduced && prev.in_stride == d.in_stride * d.size &&
          (d.reduced || prev.out_stride == d.out_stride * d.size)) {
        prev = {prev.size * d.size, d.in_stride, d.out_stride, d.reduced};
        continue;
      }
    }
    dims[count++] = d;
  }
  return count;
}

// Folds the dims into a Layout3 without moving data. The innermost run (smallest input stride)
// is the rows' reduced run (inner = 1) when it is reduced, else the columns' inner run; one
// reduced run is `reduced`; every other kept run is a digit of the outer index. More than one
// reduced run (with `allow_combine`): the longest is `reduced`, the others become digits of the
// outer index that step through partials (Layout3::combine), so the second pass has the fewest
// partials to combine. Returns false when the runs need more outer digits than kMaxOuterRuns,
// or several reduced runs without `allow_combine` (callers that cannot combine partials): the
// caller then copies. Works in place on the caller's n dims and allocates
// nothing: it runs on every call of every op. `contiguous_from` > 0: a reduced run of stride 1
// at least that long is `reduced` even where another is longer (the CUDA planner's choice of
// rows over columns for the first pass: cuda/plan_reduce.h, rows_first).
inline bool fold_layout(DimInfo* dims, int64_t n, Layout3* out, bool allow_combine = true,
                        IndexedLayout* indexed = nullptr, int64_t contiguous_from = 0) {
  int64_t count = fold_runs(dims, n);
  if (indexed != nullptr) {
    // The kept runs in the result's order (largest out stride first: the result is contiguous,
    // and the strides of its kept runs differ), the reduced ones in memory order.
    IndexedLayout ix;
    ix.usable = true;
    for (int64_t below = INT64_MAX;;) {
      int64_t pick = -1;
      for (int64_t i = 0; i < count; ++i)
        if (!dims[i].reduced && dims[i].out_stride < below && (pick < 0 || dims[i].out_stride > dims[pick].out_stride))
          pick = i;
      if (pick < 0) break;
      below = dims[pick].out_stride;
      ix.usable = ix.usable && ix.kept.add(dims[pick].size, dims[pick].in_stride, dims[pick].out_stride);
    }
    for (int64_t i = 0; i < count; ++i)
      if (dims[i].reduced) ix.usable = ix.usable && ix.reduced.add(dims[i].size, dims[i].in_stride, 0);
    ix.outputs = ix.kept.count();
    ix.count = ix.reduced.count();
    ix.usable = ix.usable && ix.outputs < INT32_MAX && ix.count < INT32_MAX;
    *indexed = ix;
  }
  int64_t longest = -1, reduced_runs = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (!dims[i].reduced) continue;
    ++reduced_runs;
    if (longest < 0 || dims[i].size >= dims[longest].size) longest = i;  // ties: the inner one
  }
  for (int64_t i = 0; contiguous_from > 0 && i < count; ++i)
    if (dims[i].reduced && dims[i].in_stride == 1 && dims[i].size >= contiguous_from) longest = i;
  Layout3 l;
  if (reduced_runs > 1) {
    if (!allow_combine) return false;
    // The kept runs' out strides are their place in the (contiguous) result; the other reduced
    // runs count partials, innermost fastest, each partial a whole result apart.
    int64_t outputs = 1;
    for (int64_t i = 0; i < count; ++i)
      if (!dims[i].reduced) outputs *= dims[i].size;
    int64_t partial_stride = outputs;
    for (int64_t i = count - 1; i >= 0; --i) {
      if (!dims[i].reduced || i == longest) continue;
      dims[i].reduced = false;
      dims[i].out_stride = partial_stride;
      partial_stride *= dims[i].size;
    }
    l.combine = partial_stride / outputs;
    count = fold_runs(dims, count);  // the partials' runs may now merge with kept neighbours
  }
  int64_t r = -1;  // the reduced run, if any
  for (int64_t i = 0; i < count; ++i)
    if (dims[i].reduced) r = i;
  if (r >= 0) l.reduced = dims[r].size, l.in_reduced = dims[r].in_stride;
  else l.in_reduced = 1;  // one element a result: any stride reads it
  int64_t last = count;   // runs [0, last) other than r are outer digits
  if (count > 0 && r != count - 1) {
    --last;
    l.inner = dims[last].size, l.in_inner = dims[last].in_stride, l.out_inner = dims[last].out_stride;
  }
  for (int64_t i = 0; i < last; ++i) {
    if (i == r) continue;
    if (!l.outer_runs.add(dims[i].size, dims[i].in_stride, dims[i].out_stride)) return false;
  }
  l.outer = l.outer_runs.count();
  if (l.outer_runs.runs <= 1) {
    if (l.outer_runs.runs == 1) l.in_outer = l.outer_runs.in[0], l.out_outer = l.outer_runs.out[0];
    l.outer_runs = RunIndex{};
  } else if (l.outer > INT32_MAX) {
    return false;  // the divisions' range
  }
  *out = l;
  return true;
}

// Every element of a tensor (sizes, strides) as one result's reduced runs in its logical
// (row-major) order: size-1 dims dropped, a dim merged into the one before it where the two step
// as one. For full reductions of indexed operators, whose positions count in that order, read
// in place where a layout folded in memory order would need a contiguous copy first (CUDA, up to
// kLogicalRunsMost elements: cuda/plan_reduce.h takes the small kernel for them). False past
// kMaxOuterRuns runs, or where an offset reaches 2^31.
inline constexpr int64_t kLogicalRunsMost = 8192;  // elements: the small kernel's team of 256, 32 loads a lane
inline bool logical_runs(const int64_t* sizes, const int64_t* strides, int64_t n, IndexedLayout* out) {
  IndexedLayout ix;
  int64_t size = 1, stride = 0, span = 0;  // the run being built (size 1: none yet)
  for (int64_t i = 0; i <= n; ++i) {
    if (i < n && sizes[i] == 1) continue;
    if (i < n && size > 1 && stride == strides[i] * sizes[i]) {  // one run with the one before
      size *= sizes[i], stride = strides[i];
      continue;
    }
    if (size > 1) {
      if (!ix.reduced.add(size, stride, 0)) return false;
      span += (size - 1) * stride;
    }
    if (i < n) size = sizes[i], stride = strides[i];
  }
  ix.count = ix.reduced.count();
  ix.usable = ix.in_logical_order = span < INT32_MAX && ix.count < INT32_MAX;
  *out = ix;
  return ix.usable;
}

// The outer index of `l` as runs: its outer runs, or its outer as one run.
inline RunIndex outer_run_index(const Layout3& l) {
  if (l.outer_runs.runs > 1) return l.outer_runs;
  RunIndex r;
  r.add(l.outer, l.in_outer, l.out_outer);
  return r;
}

// `l` with run k of `r` (its outer runs, or its outer as one run) as the inner run, the other
// runs, then l's own inner run where it is longer than 1, as the outer digits (the last the
// fastest); false past kMaxOuterRuns runs.
inline bool run_as_inner(const Layout3& l, const RunIndex& r, int k, Layout3* out) {
  Layout3 t = l;
  t.inner = r.size[k], t.in_inner = r.in[k], t.out_inner = r.out[k];
  RunIndex o;
  for (int q = 0; q < r.runs; ++q)
    if (q != k && !o.add(r.size[q], r.in[q], r.out[q])) return false;
  if (l.inner > 1 && !o.add(l.inner, l.in_inner, l.out_inner)) return false;
  t.outer = o.count();
  t.outer_runs = o.runs == 1 ? RunIndex{} : o;
  if (o.runs == 1) t.in_outer = o.in[0], t.out_outer = o.out[0];
  *out = t;
  return true;
}

// Columns as strided rows: `l` with its inner run as the fastest outer digit and inner 1, each
// result's column a row `in_reduced` apart, so that the rows kernels' teams (a team of lanes a
// row) read the columns of neighbouring results from the same sectors in one warp. argmax over
// dim -2 of (32064, 56, 7)[:, :, ::2] float32 (4 results an outer index, 8 bytes apart) took the
// columns kernel, a block of 4 x 64 threads an outer index, under a load a thread: 111 us in CUDA
// graphs against torch.compile's 14.8 (H200). False past kMaxOuterRuns runs or 2^31 results.
inline bool inner_as_rows(const Layout3& l, Layout3* out) {
  if (l.inner == 1 || l.combine != 1 || l.inner_runs.runs > 1 || l.outer * l.inner >= INT32_MAX) return false;
  const RunIndex r = outer_run_index(l);
  RunIndex o;
  for (int q = 0; q < r.runs; ++q)
    if (r.size[q] > 1 && !o.add(r.size[q], r.in[q], r.out[q])) return false;
  if (!o.add(l.inner, l.in_inner, l.out_inner)) return false;
  Layout3 t = l;
  t.inner = 1, t.in_inner = 0, t.out_inner = 0;
  t.outer = o.count();
  t.outer_runs = o.runs == 1 ? RunIndex{} : o;
  if (o.runs == 1) t.in_outer = o.in[0], t.out_outer = o.out[0];
  *out = t;
  return true;
}

// Rows (inner == 1) reached through several outer runs whose result-contiguous run (out stride
// 1) is not the fastest digit in memory: the same reduction with that run as the inner one, so
// that a kernel going along inner writes neighbouring results (amax over rows of 8 of (77, 14336,
// 8) uint8 transposed to (14336, 77, 8): neighbouring rows in memory are results 77 apart). False
// where there is no such run.
inline bool rows_in_result_order(const Layout3& l, Layout3* out) {
  const RunIndex& r = l.outer_runs;
  if (l.inner != 1 || l.combine != 1 || r.runs < 2 || r.out[r.runs - 1] == 1) return false;
  int k = -1;
  for (int q = 0; q < r.runs; ++q)
    if (r.out[q] == 1 && r.size[q] > 1) k = q;
  return k >= 0 && run_as_inner(l, r, k, out);
}

// Short rows packed one after another along an outer run (its in stride the row's length, the
// rows contiguous) whose results are apart in the result, while another outer run holds the
// result's contiguous run: the same reduction with the packed run as inner (in stride
// `reduced`), a transposed reduction, so that transpose tiles read neighbouring rows with
// neighbouring lanes and store along the result's run. mean over the dim of 3 of (3072, 4096,
// 3).transpose(2, 0) float16 went along the result's run (rows_in_result_order), whose rows are
// 24 KB apart: a sector a lane, 163.7 us in CUDA graphs, torch.compile 33.4 (H200). False where
// there are no such runs.
inline bool packed_rows_transposed(const Layout3& l, Layout3* out) {
  const RunIndex& r = l.outer_runs;
  if (l.inner != 1 || l.combine != 1 || l.in_reduced != 1 || l.reduced < 2 || r.runs < 2) return false;
  int k = -1;
  bool result_run = false;
  for (int q = 0; q < r.runs; ++q) {
    if (r.in[q] == l.reduced && r.out[q] != 1 && r.size[q] > 1) k = q;
    result_run = result_run || (r.out[q] == 1 && r.size[q] > 1);
  }
  return k >= 0 && result_run && run_as_inner(l, r, k, out);
}

// Columns of fewer bytes than a sector whose results are transposed against the input, where
// an outer run with out stride 1 holds the inner run between its elements (in[k] = inner,
// inner contiguous: a row of the input is [k][inner] in memory): the same reduction with that
// run as inner (in stride `inner`) and the old inner as the last outer digit, so that adjacent
// threads read adjacent memory and store adjacent results. any over dim 3 of (2, 96, 32064,
// 2).transpose(3, 1) int16 read rows 2 elements wide, a sector each: 167 us in CUDA graphs,
// torch.compile 7.7 (H200). False where there is no such run.
inline bool columns_in_result_order(const Layout3& l, int64_t in_bytes, Layout3* out) {
  if (l.inner == 1 || l.out_inner == 1 || l.combine != 1 || l.in_inner != 1 || l.inner * in_bytes >= 32) return false;
  const RunIndex r = outer_run_index(l);
  int k = -1;
  for (int q = 0; q < r.runs; ++q)
    if (r.out[q] == 1 && r.size[q] > 1 && r.in[q] == l.inner) k = q;
  return k >= 0 && run_as_inner(l, r, k, out);
}

// Columns whose inner run continues in memory through outer runs (in stride 1, an outer run's
// in stride the inner run's length, then the next's...) that a fold could not merge because the
// result holds them in another order: the same reduction with those runs as one inner run read
// in memory order, its results stored through inner_runs (Layout3). mean over dim 3 of (40, 80,
// 2048, 16).transpose(1, 3) float16 read rows of 16 elements, 32 bytes each, 81920 blocks of
// them: 182 us in CUDA graphs, torch.compile 53 (H200). False where no run continues the inner
// one, or past kMaxOuterRuns inner runs.
inline bool inner_merged(const Layout3& l, Layout3* out) {
  if (l.inner == 1 || l.in_inner != 1 || l.combine != 1 || l.inner_runs.runs > 1) return false;
  RunIndex r = outer_run_index(l);
  // The inner runs, the slowest first: their sizes and out strides.
  int64_t sizes[kMaxOuterRuns] = {l.inner}, outs[kMaxOuterRuns] = {l.out_inner};
  int n = 1;
  int64_t span = l.inner;  // the elements the inner runs cover, contiguous
  bool used[kMaxOuterRuns] = {};
  for (bool grew = true; grew && n < kMaxOuterRuns;) {
    grew = false;
    for (int q = 0; q < r.runs; ++q) {
      if (used[q] || r.size[q] == 1 || r.in[q] != span) continue;
      for (int k = n; k > 0; --k) sizes[k] = sizes[k - 1], outs[k] = outs[k - 1];
      sizes[0] = r.size[q], outs[0] = r.out[q], used[q] = grew = true;
      span *= r.size[q], ++n;
      break;
    }
  }
  if (n == 1) return false;
  Layout3 t = l;
  t.inner = span, t.in_inner = 1, t.out_inner = 0;
  t.inner_runs = RunIndex{};
  for (int k = 0; k < n; ++k) t.inner_runs.add(sizes[k], 0, outs[k]);
  RunIndex o;
  for (int q = 0; q < r.runs; ++q)
    if (!used[q]) o.add(r.size[q], r.in[q], r.out[q]);
  if (o.runs == 0) o.add(1, 0, 0);
  t.outer = o.count();
  t.outer_runs = o.runs == 1 ? RunIndex{} : o;
  t.in_outer = o.runs == 1 ? o.in[0] : 0, t.out_outer = o.runs == 1 ? o.out[0] : 0;
  if (span >= INT32_MAX) return false;  // the divisions' range
  *out = t;
  return true;
}

// Results transposed against the input (inner's out stride not 1) reached through several outer
// runs whose result-contiguous run (out stride 1) is not the last digit: the same reduction with
// that run as the last outer digit, so that neighbouring outer indexes are neighbouring results
// (tiles_transposed, cuda/kernels/dims.cuh). Sum over the size-1 dim 2 of (1, 31, 1024,
// 3072).permute(3, 2, 0, 1) int16 has outer runs (31: out 1) and (1024: out 31) before inner
// (3072: out 31744): in memory order, a kernel going along inner stored results 31744 apart.
// False where there is no such run.
inline bool outer_in_result_order(const Layout3& l, Layout3* out) {
  const RunIndex& r = l.outer_runs;
  if (l.inner == 1 || l.out_inner == 1 || l.combine != 1 || r.runs < 2 || r.out[r.runs - 1] == 1) return false;
  int k = -1;
  for (int q = 0; q < r.runs; ++q)
    if (r.out[q] == 1 && r.size[q] > 1) k = q;
  if (k < 0) return false;
  Layout3 t = l;
  t.outer_runs = RunIndex{};
  for (int q = 0; q < r.runs; ++q)
    if (q != k) t.outer_runs.add(r.size[q], r.in[q], r.out[q]);
  t.outer_runs.add(r.size[k], r.in[k], r.out[k]);
  *out = t;
  return true;
}

}  // namespace treduce
