// What a variant is, as listed by torch_reduce.variants() and the README:
// one row per technique, per device. Torch-free.
#pragma once

#include <string_view>

namespace treduce {

struct VariantDoc {
  const char* name;       // what callers pass as `variant`
  const char* kernel;     // where the code is: function or kernel template
  const char* technique;  // one line: what it does
  const char* seed;       // the seed document (and its kernel) it comes from
  const char* fixes;      // what it improves over the rung before it
  bool float_atomics;     // combines floats with atomics: run-to-run differences
};

struct VariantTable {
  const VariantDoc* docs;
  int count;

  // Index of `name`, or -1.
  int find(std::string_view name) const {
    for (int i = 0; i < count; ++i)
      if (name == docs[i].name) return i;
    return -1;
  }
};

VariantTable cpu_variants();
VariantTable cuda_variants();  // empty in a build without CUDA

}  // namespace treduce
