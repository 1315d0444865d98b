// Exactly predictable data for the correctness passes: every element's
// value is a hash of where it belongs (its global coordinates), so a
// misplaced element is caught with probability 1 - 2^-16 and a flipped one
// always. Host-side only; the values are uploaded before a run.
#pragma once

#include <cstdint>

#include "core/mix64.h"

namespace foldplan::validate {

using foldplan::Mix64;  // core/mix64.h

// The 16-bit word element `index` of a moved (never reduced) tensor holds.
inline uint16_t PatternWord(uint64_t index) { return static_cast<uint16_t>(Mix64(index)); }

// A uniform double in [0, 1) from a hash, for seeded routing.
inline double UnitInterval(uint64_t hash) {
  return static_cast<double>(hash >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

}  // namespace foldplan::validate
