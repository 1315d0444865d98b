// What the rank-map export tests share: a map built on a DGX-like cluster
// of `nodes` 8-GPU nodes, an export that must succeed, and one that must be
// refused (its message returned).
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "fixtures.h"
#include "planner/rank_export.h"
#include "planner/rank_map.h"

namespace foldplan::testing {

inline RankMap BuildMap(const Layout& l, int nodes = 2, const RankMapOptions& options = {}) {
  Result<RankMap> map = BuildRankMap(l, MakeCluster(nodes), options);
  REQUIRE_MESSAGE(map.ok(), map.status().message());
  return std::move(map).value();
}

inline std::string ExportText(const RankMap& m, ExportFormat f, const ExportContext& ctx = {}) {
  Result<std::string> out = ExportRankMap(m, f, ctx);
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  return *out;
}

inline std::string ExportRefusal(const RankMap& m, ExportFormat f, const ExportContext& ctx = {}) {
  Result<std::string> out = ExportRankMap(m, f, ctx);
  REQUIRE_FALSE(out.ok());
  return out.status().message();
}

}  // namespace foldplan::testing
