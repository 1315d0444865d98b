// Products of counts (the degrees of a layout, nodes x GPUs per node) that
// must stay within a limit, by default the largest world (core/formats.h).
// Every such product is formed here, so that none can overflow: one that
// exceeds the limit is refused (and reported by the caller), never wrapped.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

#include "core/formats.h"

namespace foldplan {

// The product of `factors` when every factor is >= 0 and the product is at
// most `limit` (>= 0); nullopt otherwise. Each step is checked before it
// multiplies, so any int64 factors are safe.
constexpr std::optional<int64_t> CheckedProduct(std::initializer_list<int64_t> factors,
                                                int64_t limit = kMaxWorldSize) {
  int64_t product = 1;
  for (int64_t f : factors) {
    if (f < 0) return std::nullopt;
    if (f != 0 && product > limit / f) return std::nullopt;
    product *= f;
  }
  if (product > limit) return std::nullopt;  // the empty product 1 against a limit of 0
  return product;
}

}  // namespace foldplan
