// The median of a sample (the mean of the middle two for an even count; 0
// for none): one definition for the fit's robust scale, calibrate's and
// compare's error figures.
#pragma once

#include <algorithm>
#include <vector>

namespace foldplan {

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  const double upper = v[mid];
  if (v.size() % 2) return upper;
  return (upper + *std::max_element(v.begin(), v.begin() + mid)) / 2;
}

}  // namespace foldplan
