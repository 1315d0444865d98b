// SplitMix64 (Steele, Lea, Flood 2014): Mix64 is its output function, a
// bijective mix of a 64-bit value; a stream is Mix64(state) with state
// advanced by kSplitMix64Increment each draw. Portable, so a seeded draw
// (calibrate's hold-out, foldbench's data) is the same on every machine.
#pragma once

#include <cstdint>

namespace foldplan {

inline constexpr uint64_t kSplitMix64Increment = 0x9E3779B97F4A7C15ULL;

inline uint64_t Mix64(uint64_t x) {
  uint64_t z = x + kSplitMix64Increment;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace foldplan
