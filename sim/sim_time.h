// Simulated time: integer nanoseconds, so that the same inputs give the same
// timeline bit for bit on any machine (no floating-point sums decide an
// order). Durations come from the cost model in seconds and are rounded once,
// to the nearest nanosecond, where a task is made.
#pragma once

#include <cmath>
#include <cstdint>

namespace foldplan {

using SimNs = std::int64_t;

// The longest simulated span: 2^62 ns is about 146 years; a duration past it
// is clamped there so that sums of a few such never overflow.
inline constexpr SimNs kMaxSimNs = SimNs{1} << 62;

inline SimNs ToSimNs(double seconds) {
  if (!(seconds > 0)) return 0;  // negatives and NaN: nothing to wait for
  const double ns = std::nearbyint(seconds * 1e9);
  return ns >= double(kMaxSimNs) ? kMaxSimNs : static_cast<SimNs>(ns);
}
inline double ToSeconds(SimNs ns) { return double(ns) * 1e-9; }

}  // namespace foldplan
