// bf16 vectors for the kernel tests: written as floats, read back as floats.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "validate/kernels.h"

namespace foldplan::validate {

inline std::vector<uint16_t> Bf16s(std::initializer_list<float> values) {
  std::vector<uint16_t> out;
  for (float v : values) out.push_back(FloatToBf16(v));
  return out;
}

inline std::vector<float> Floats(const std::vector<uint16_t>& bf16) {
  std::vector<float> out;
  for (uint16_t b : bf16) out.push_back(Bf16ToFloat(b));
  return out;
}

}  // namespace foldplan::validate
