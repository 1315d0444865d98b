// CheckedProduct: products of counts are refused above the limit instead of
// overflowing (nodes x gpus_per_node, pp x tp x cp).
#include <doctest/doctest.h>

#include <climits>

#include "core/formats.h"
#include "inputs/checked_product.h"

using foldplan::CheckedProduct;
using foldplan::kMaxWorldSize;

TEST_CASE("a product within the largest world is computed") {
  CHECK(CheckedProduct({16, 8}) == 128);
  CHECK(CheckedProduct({}) == 1);
  CHECK(CheckedProduct({1 << 10, 1 << 10}) == kMaxWorldSize);
  CHECK(CheckedProduct({0, INT64_MAX}) == 0);
}

TEST_CASE("a product beyond the limit is refused, not wrapped") {
  CHECK_FALSE(CheckedProduct({1 << 10, (1 << 10) + 1}));
  CHECK_FALSE(CheckedProduct({INT_MAX, 8}));          // --nodes 2147483647 on 8-GPU nodes: "world -8"
  CHECK_FALSE(CheckedProduct({65536, 65536}));        // pp x tp = 2^32, 0 in 32 bits
  CHECK_FALSE(CheckedProduct({46341, 46341}));        // tp x cp just above INT_MAX
  CHECK_FALSE(CheckedProduct({INT64_MAX, INT64_MAX, 2}));  // even where int64 would wrap
  CHECK_FALSE(CheckedProduct({2, 3}, 5));
  CHECK(CheckedProduct({2, 3}, 6) == 6);
}

TEST_CASE("a negative factor is refused") {
  CHECK_FALSE(CheckedProduct({-1, 8}));
  CHECK_FALSE(CheckedProduct({1}, 0));
}
