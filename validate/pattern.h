// Exactly predictable data for the correctness passes: every element's
// value is a hash of where it belongs (its global coordinates), so a
// misplaced element is caught with probability 1 - 2^-16 and a flipped one
// always. Host-side only; the values are uploaded before a run.
#pragma once

#include <cstdint>

namespace foldplan::validate {

// SplitMix64's finalizer: a bijective mix of a 64-bit index.
inline uint64_t Mix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The 16-bit word element `index` of a moved (never reduced) tensor holds.
inline uint16_t PatternWord(uint64_t index) { return static_cast<uint16_t>(Mix64(index)); }

// A uniform double in [0, 1) from a hash, for seeded routing.
inline double UnitInterval(uint64_t hash) {
  return static_cast<double>(hash >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

}  // namespace foldplan::validate
