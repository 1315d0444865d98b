// Enumeration of every legal layout of (cluster, model, job).
//
// The candidate space: world W = job.world_size (or every GPU); for each pp
// dividing W, each vpp in job.vpp, tp and cp dividing G = W/pp, each CP
// style in job.cp_styles (one when cp == 1), ep and etp dividing G (a dense
// model: ep 1, etp = tp), each micro-batch size, each order in job.orders
// (one per distinct rank map when pp == 1), each recompute option. A
// linear-placement layout whose heavy groups straddle NVLink domains also
// gets a packed-placement variant as a further candidate.
//
// Each rejected candidate is counted once, under the first rule it breaks in
// Rule order (planner/legality.h); whole subtrees are counted at once, so
// the count is exact without visiting every candidate.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "planner/layout.h"
#include "planner/legality.h"

namespace foldplan {

struct EnumerateOptions {
  bool collect_layouts = true;  // false: only count (for --why and benchmarks)
};

struct Enumeration {
  int world = 0;
  uint64_t candidates = 0;
  uint64_t legal_count = 0;
  std::array<uint64_t, kRuleCount> rejected{};  // indexed by Rule
  std::vector<Layout> legal;  // in search order, when collected
};

// ctx.cluster, ctx.model and ctx.job must be set.
Enumeration EnumerateLayouts(const LegalityContext& ctx, const EnumerateOptions& options = {});

// Positive divisors of n, ascending.
std::vector<int> Divisors(int n);

}  // namespace foldplan
