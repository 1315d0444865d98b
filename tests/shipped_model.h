// A shipped model (data/models/<name>.json) loaded by name; the test case
// fails at once when it does not load.
#pragma once

#include <doctest/doctest.h>

#include "inputs/loader.h"

namespace foldplan::testing {

inline ModelSpec ShippedModel(const char* name) {
  auto m = LoadModel(name);
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  return m.value();
}

}  // namespace foldplan::testing
