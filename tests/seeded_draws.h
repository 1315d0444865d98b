// What the randomised cost-model tests share: a seeded stream of draws
// (core/mix64.h, so every platform draws the same cases) and a double's bit
// pattern, for comparisons that must hold bit for bit.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/mix64.h"

namespace foldplan::testing {

inline uint64_t Bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

struct Draws {
  uint64_t state;
  uint64_t Next() { return Mix64(state += kSplitMix64Increment); }
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }
  bool Coin() { return Next() & 1; }
  // A nonempty subset, in the given order.
  template <class T>
  std::vector<T> Subset(const std::vector<T>& all) {
    std::vector<T> out;
    for (const T& x : all) {
      if (Coin()) out.push_back(x);
    }
    if (out.empty()) out.push_back(all[Below(all.size())]);
    return out;
  }
};

}  // namespace foldplan::testing
