// Launch arithmetic that needs neither CUDA nor torch (the kernels get it through common.cuh),
// so the C++ test program checks it on any machine.
#pragma once

#include <algorithm>
#include <cstdint>

namespace treduce::cuda {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// How many segments (blocks) each of `outer` rows is cut into, from 1 to `most`, when `wave`
// blocks run on the device at once: the fewest whose blocks fill their waves within 5% of the
// best fill any count up to `most` reaches. (A wave's worth of blocks plus a few leaves the
// device nearly idle while the few run.)
//
// The fill of s segments is outer * s / (waves * wave), waves = ceil(outer * s / wave). Within
// one number of waves it rises with s, so the best is at the last s of some number of waves,
// and the fewest good s is the first good one in the first number of waves that has one: a
// handful of wave counts to look at instead of every s (`most` reaches thousands for one long
// strided row).
inline int64_t segments_per_row(int64_t outer, int64_t most, int64_t wave) {
  if (most <= 1 || outer <= 0 || wave <= 0) return 1;
  const auto fill = [&](int64_t s) {
    return double(outer * s) / double(ceil_div(outer * s, wave) * wave);
  };
  const int64_t waves = ceil_div(outer * most, wave);
  const auto last_of = [&](int64_t w) { return std::min(most, w * wave / outer); };
  const auto first_of = [&](int64_t w) { return std::max<int64_t>(1, (w - 1) * wave / outer + 1); };
  double best = 0;
  for (int64_t w = 1; w <= waves; ++w)
    if (first_of(w) <= last_of(w)) best = std::max(best, fill(last_of(w)));
  const double good = best - 0.05;
  for (int64_t w = 1; w <= waves; ++w) {
    int64_t lo = first_of(w), hi = last_of(w);
    if (lo > hi || fill(hi) < good) continue;
    while (lo < hi) {  // the first s in [lo, hi] with fill(s) >= good; fill rises over the range
      const int64_t mid = lo + (hi - lo) / 2;
      if (fill(mid) >= good) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
  return 1;  // not reached: the best count is good
}

}  // namespace treduce::cuda
