// Calls treduce::sum through the dispatcher, as a LibTorch program would, on
// CPU tensors and, where a GPU is present, on CUDA tensors. Every variant,
// a few dtypes and sizes, against a plain loop over the same data.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/Context.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

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
}

}  // namespace

int main() {
  at::manual_seed(0x5eed);
  check_device(at::Device(at::kCPU));
  if (at::hasCUDA()) check_device(at::Device(at::kCUDA, 0));
  else std::printf("no CUDA device: CUDA cases not run\n");
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
