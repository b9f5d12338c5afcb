// Calls treduce::sum through the dispatcher, as a LibTorch program would, on
// CPU tensors and, where a GPU is present, on CUDA tensors. Every variant,
// a few dtypes and sizes, against a plain loop over the same data; and the launch arithmetic
// of cuda/plan.h against its definition.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/Context.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/plan.h"
#include "treduce.h"

namespace {

int passed = 0, failed = 0;

void expect(bool ok, const std::string& what) {
  (ok ? passed : failed) += 1;
  if (!ok) std::printf("FAILED: %s\n", what.c_str());
}

std::vector<std::string> variant_names(const std::string& device) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("treduce::variants", "")
                             .typed<std::vector<std::string>(c10::string_view)>();
  std::vector<std::string> names;
  for (const std::string& row : op.call(device)) names.push_back(row.substr(0, row.find('\t')));
  return names;
}

// The exact sum of x (small integers in any dtype), by a loop on the host.
int64_t host_sum(const at::Tensor& x) {
  const at::Tensor values = x.to(at::kCPU).to(at::kLong).contiguous();
  const int64_t* p = values.const_data_ptr<int64_t>();
  int64_t total = 0;
  for (int64_t i = 0; i < values.numel(); ++i) total += p[i];
  return total;
}

void check_device(const at::Device device) {
  const std::string dev = device.is_cuda() ? "cuda" : "cpu";
  const std::vector<at::ScalarType> dtypes = {at::kByte, at::kInt, at::kFloat, at::kBFloat16};
  for (const std::string& variant : variant_names(dev)) {
    for (const int64_t n : {int64_t(0), int64_t(1), int64_t(257), int64_t(1000003)}) {
      for (const at::ScalarType dtype : dtypes) {
        const at::Tensor x = at::randint(-3, 4, {n}, at::TensorOptions(device).dtype(at::kLong))
                                 .abs()  // uint8 needs non-negative values
                                 .to(dtype);
        const at::Tensor out = treduce::sum(x, variant);
        const at::ScalarType want_dtype = at::isIntegralType(dtype, true) ? at::kLong : dtype;
        const std::string what = dev + " " + variant + " " + c10::toString(dtype) + " n=" + std::to_string(n);
        expect(out.scalar_type() == want_dtype && out.device() == device && out.dim() == 0,
               what + ": result dtype, device or shape");
        // Exact in the accumulator; the result dtype then rounds it once (bfloat16 here).
        const double want = at::scalar_tensor(double(host_sum(x)), at::kDouble).to(want_dtype).item<double>();
        expect(out.to(at::kCPU).to(at::kDouble).item<double>() == want, what + ": value");
      }
    }
  }
  bool threw = false;
  try {
    treduce::sum(at::ones({4}, at::TensorOptions(device)), "no_such_variant");
  } catch (const c10::Error& e) {
    threw = std::string(e.what()).find("unknown variant 'no_such_variant'") != std::string::npos;
  }
  expect(threw, dev + ": an unknown variant is refused by name");
  const at::Tensor as_double =
      treduce::sum(at::ones({10}, at::TensorOptions(device).dtype(at::kInt)), "auto", std::nullopt, false, at::kDouble);
  expect(as_double.scalar_type() == at::kDouble && as_double.item<double>() == 10.0, dev + ": dtype=");

  // Dims: rows of 0, 1, ..., 4 (as float) over a (5, 3) tensor.
  const at::Tensor rows = at::arange(5, at::TensorOptions(device).dtype(at::kFloat)).unsqueeze(1).expand({5, 3});
  const at::Tensor by_row = treduce::sum(rows, "auto", std::vector<int64_t>{1}).cpu();
  expect(by_row.sizes() == at::IntArrayRef{5} && by_row[4].item<float>() == 12.f, dev + ": sum over dim 1");
  const at::Tensor col_mean = treduce::mean(rows, std::vector<int64_t>{0}, true).cpu();
  expect(col_mean.sizes() == at::IntArrayRef({1, 3}) && col_mean[0][2].item<float>() == 2.f, dev + ": mean over dim 0");
  expect(treduce::amax(rows).item<float>() == 4.f && treduce::amin(rows).item<float>() == 0.f, dev + ": amax, amin");
  // Statistics: each column is 0, 1, ..., 4 (variance 2.5 with correction 1, 2 with 0).
  const auto [col_var, col_mean2] = treduce::var_mean(rows, std::vector<int64_t>{0});
  expect(col_var.cpu()[1].item<float>() == 2.5f && col_mean2.cpu()[1].item<float>() == 2.f, dev + ": var_mean");
  expect(treduce::std(rows, std::vector<int64_t>{0}, at::Scalar(0), true).sizes() == at::IntArrayRef({1, 3}) &&
             std::abs(treduce::std(rows, std::vector<int64_t>{0}, at::Scalar(0)).cpu()[0].item<float>() - std::sqrt(2.f)) < 1e-6f,
         dev + ": std, correction 0");
  // Rows 1..5 of (5, 3): products over dim 0 are 5! = 120; norms of a column of 0..4: sqrt(30), 10, 4.
  const at::Tensor ones_up = rows + 1;
  expect(treduce::prod(ones_up, 0).cpu()[2].item<float>() == 120.f && treduce::prod(ones_up).item<float>() == 1728000.f,
         dev + ": prod");
  expect(std::abs(treduce::vector_norm(rows, 2, std::vector<int64_t>{0}).cpu()[0].item<float>() - std::sqrt(30.f)) < 1e-5f &&
             treduce::vector_norm(rows, 1, std::vector<int64_t>{0}).cpu()[1].item<float>() == 10.f &&
             treduce::vector_norm(rows, INFINITY).item<float>() == 4.f,
         dev + ": vector_norm");
  // The extrema with positions, truth values and counts: rows holds 0..4 down each column.
  const auto [col_max, col_argmax] = treduce::max(rows, 0);
  expect(col_max.cpu()[1].item<float>() == 4.f && col_argmax.cpu()[1].item<int64_t>() == 4 &&
             treduce::argmin(rows).item<int64_t>() == 0 && treduce::argmax(rows).item<int64_t>() == 12,
         dev + ": max over a dim, argmin, argmax");
  const auto [lo, hi] = treduce::aminmax(rows);
  expect(lo.item<float>() == 0.f && hi.item<float>() == 4.f && treduce::count_nonzero(rows).item<int64_t>() == 12 &&
             treduce::any(rows).item<bool>() && !treduce::all(rows).item<bool>() &&
             treduce::all(ones_up, std::vector<int64_t>{1}).cpu().all().item<bool>(),
         dev + ": aminmax, count_nonzero, any, all");
}

// segments_per_row against its definition, every count tried: the fewest segments whose fill
// of the device's waves is within 0.05 of the best fill of any count up to `most`.
void check_segments_per_row() {
  const auto fill = [](int64_t outer, int64_t s, int64_t wave) {
    return double(outer * s) / double((outer * s + wave - 1) / wave * wave);
  };
  int wrong = 0;
  for (const int64_t wave : {1, 7, 132, 528, 2112})
    for (int64_t outer = 1; outer <= 3000; outer += outer < 600 ? 1 : 37)
      for (const int64_t most : {1, 2, 3, 5, 16, 100, 2112}) {
        double best = 0;
        for (int64_t s = 1; s <= most; ++s) best = std::max(best, fill(outer, s, wave));
        int64_t want = 1;
        while (fill(outer, want, wave) < best - 0.05) ++want;
        const int64_t got = treduce::cuda::segments_per_row(outer, most, wave);
        if (got != want && ++wrong <= 5)
          std::printf("segments_per_row(%lld, %lld, %lld) = %lld, want %lld\n", (long long)outer,
                      (long long)most, (long long)wave, (long long)got, (long long)want);
      }
  expect(wrong == 0, "segments_per_row matches its definition");
  // (128, 65536): 4 segments, 512 blocks of a 528-block wave, not 5 (640: 1.2 waves).
  expect(treduce::cuda::segments_per_row(128, 17, 528) == 4, "segments_per_row(128 rows)");
}

}  // namespace

int main() {
  check_segments_per_row();
  at::manual_seed(0x5eed);
  check_device(at::Device(at::kCPU));
  if (at::hasCUDA()) check_device(at::Device(at::kCUDA, 0));
  else std::printf("no CUDA device: CUDA cases not run\n");
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
