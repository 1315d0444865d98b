// Topology::Span: what a set of GPUs spans and which tiers its traffic uses.
// Each test states the expected arithmetic, then asserts the number.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "topology/topology.h"
#include "topology_fixtures.h"

namespace foldplan {
namespace {

using testing::DgxH100;
using testing::MustBuild;
using testing::Nvl72;

std::vector<int> Range(int first, int count, int stride = 1) {
  std::vector<int> gpus(count);
  for (int i = 0; i < count; ++i) gpus[i] = first + i * stride;
  return gpus;
}

std::vector<LinkTier> TierKinds(const GroupSpan& span) {
  std::vector<LinkTier> kinds;
  for (const TierInfo& t : span.tiers) kinds.push_back(t.tier);
  return kinds;
}

void CheckSameSpan(const GroupSpan& a, const GroupSpan& b) {
  CHECK(a.gpus == b.gpus);
  CHECK(a.nodes == b.nodes);
  CHECK(a.domains == b.domains);
  CHECK(a.rails == b.rails);
  CHECK(a.scalable_units == b.scalable_units);
  CHECK(a.min_per_domain == b.min_per_domain);
  CHECK(a.max_per_domain == b.max_per_domain);
  CHECK(a.inside_one_domain == b.inside_one_domain);
  CHECK(a.crosses_spine == b.crosses_spine);
  REQUIRE(a.tiers.size() == b.tiers.size());
  for (std::size_t i = 0; i < a.tiers.size(); ++i) {
    CHECK(a.tiers[i].tier == b.tiers[i].tier);
    CHECK(a.tiers[i].gb_per_s == b.tiers[i].gb_per_s);
    CHECK(a.tiers[i].latency_us == b.tiers[i].latency_us);
    CHECK(a.tiers[i].hops == b.tiers[i].hops);
  }
}

TEST_CASE("one DGX node") {
  const Topology topo = MustBuild(DgxH100(16));
  const GroupSpan span = topo.Span(Range(0, 8));
  // GPUs 0..7: node 0 = domain 0, all 8 rails, SU 0; 8 GPUs in the domain.
  CHECK(span.gpus == 8);
  CHECK(span.nodes == 1);
  CHECK(span.domains == 1);
  CHECK(span.rails == 8);
  CHECK(span.scalable_units == 1);
  CHECK(span.min_per_domain == 8);
  CHECK(span.max_per_domain == 8);
  CHECK(span.inside_one_domain);
  CHECK_FALSE(span.crosses_spine);
  // Only NVLink: 450 GB/s, 0.6 us, one NVSwitch hop.
  REQUIRE(span.tiers.size() == 1);
  CHECK(span.tiers[0].tier == LinkTier::kNvlink);
  CHECK(span.tiers[0].gb_per_s == doctest::Approx(450));
  CHECK(span.tiers[0].latency_us == doctest::Approx(0.6));
  CHECK(span.tiers[0].hops == 1);
}

TEST_CASE("two DGX nodes of one scalable unit") {
  const Topology topo = MustBuild(DgxH100(16));
  const GroupSpan span = topo.Span(Range(0, 16));
  // GPUs 0..15: nodes 0 and 1 = 2 domains of 8, 8 rails, SU 0.
  CHECK(span.gpus == 16);
  CHECK(span.nodes == 2);
  CHECK(span.domains == 2);
  CHECK(span.rails == 8);
  CHECK(span.scalable_units == 1);
  CHECK(span.min_per_domain == 8);
  CHECK(span.max_per_domain == 8);
  CHECK_FALSE(span.inside_one_domain);
  CHECK_FALSE(span.crosses_spine);
  REQUIRE(TierKinds(span) == std::vector{LinkTier::kNvlink, LinkTier::kNetwork});
  // Network representative: GPUs 7 and 8, the first consecutive pair across
  // domains; rails 7 and 0 differ, so PXN: 50 GB/s, 0.6 + 3.0 = 3.6 us,
  // NVSwitch + leaf = 2 hops.
  CHECK(span.tiers[1].gb_per_s == doctest::Approx(50));
  CHECK(span.tiers[1].latency_us == doctest::Approx(3.6));
  CHECK(span.tiers[1].hops == 2);
}

TEST_CASE("a data-parallel group on one rail") {
  const Topology topo = MustBuild(DgxH100(16));
  // Local GPU 0 of each of the 16 nodes: 16 domains of one GPU each, rail 0
  // only; no two share a domain, so no NVLink tier; the representative pair
  // (0, 8) shares rail 0: 3.0 us, one leaf.
  const GroupSpan span = topo.Span(Range(0, 16, 8));
  CHECK(span.gpus == 16);
  CHECK(span.nodes == 16);
  CHECK(span.domains == 16);
  CHECK(span.rails == 1);
  CHECK(span.min_per_domain == 1);
  CHECK(span.max_per_domain == 1);
  REQUIRE(TierKinds(span) == std::vector{LinkTier::kNetwork});
  CHECK(span.tiers[0].gb_per_s == doctest::Approx(50));
  CHECK(span.tiers[0].latency_us == doctest::Approx(3.0));
  CHECK(span.tiers[0].hops == 1);
}

TEST_CASE("two scalable units: the spine tier") {
  // 16 nodes in SUs of 8, oversubscription 2.
  const Topology topo = MustBuild(DgxH100(16, /*su_nodes=*/8, /*spine_oversubscription=*/2));

  SUBCASE("whole cluster") {
    const GroupSpan span = topo.Span(Range(0, 128));
    CHECK(span.nodes == 16);
    CHECK(span.domains == 16);
    CHECK(span.scalable_units == 2);
    CHECK(span.crosses_spine);
    REQUIRE(TierKinds(span) ==
            std::vector{LinkTier::kNvlink, LinkTier::kNetwork, LinkTier::kSpine});
    CHECK(span.tiers[0].gb_per_s == doctest::Approx(450));
    // Network: GPUs 7 and 8 (same SU, PXN): 50 GB/s, 3.6 us.
    CHECK(span.tiers[1].gb_per_s == doctest::Approx(50));
    CHECK(span.tiers[1].latency_us == doctest::Approx(3.6));
    // Spine: GPUs 0 and 127 (rails 0 and 7, PXN): 50 / 2 = 25 GB/s;
    // 0.6 + 3.0 + 1.0 = 4.6 us; NVSwitch, leaf, spine, leaf = 4 hops.
    CHECK(span.tiers[2].gb_per_s == doctest::Approx(25));
    CHECK(span.tiers[2].latency_us == doctest::Approx(4.6));
    CHECK(span.tiers[2].hops == 4);
  }
  SUBCASE("one GPU in each SU") {
    // GPUs 0 (SU 0) and 64 (node 8, SU 1), both rail 0: no same-SU pair, so
    // the network tier is represented by the same spine path as the spine
    // tier: 25 GB/s, 3.0 + 1.0 = 4.0 us, leaf-spine-leaf = 3 hops.
    const GroupSpan span = topo.Span(std::vector{0, 64});
    CHECK(span.scalable_units == 2);
    CHECK(span.crosses_spine);
    REQUIRE(TierKinds(span) == std::vector{LinkTier::kNetwork, LinkTier::kSpine});
    for (const TierInfo& t : span.tiers) {
      CHECK(t.gb_per_s == doctest::Approx(25));
      CHECK(t.latency_us == doctest::Approx(4.0));
      CHECK(t.hops == 3);
    }
  }
  SUBCASE("the first SU only") {
    const GroupSpan span = topo.Span(Range(0, 64));
    CHECK(span.scalable_units == 1);
    CHECK_FALSE(span.crosses_spine);
    CHECK(TierKinds(span) == std::vector{LinkTier::kNvlink, LinkTier::kNetwork});
  }
}

TEST_CASE("NVL72: a 64-rank group starting at rank 64 straddles two racks") {
  const Topology topo = MustBuild(Nvl72(4, /*su_nodes=*/72));
  // Ranks 64..127: rack 0 holds 64..71 (8 GPUs), rack 1 holds 72..127 (56).
  const GroupSpan span = topo.Span(Range(64, 64));
  CHECK(span.gpus == 64);
  CHECK(span.domains == 2);
  CHECK(span.min_per_domain == 8);
  CHECK(span.max_per_domain == 56);
  // Nodes 64 / 4 = 16 .. 127 / 4 = 31: 16 nodes; all 4 rails; one SU.
  CHECK(span.nodes == 16);
  CHECK(span.rails == 4);
  CHECK(span.scalable_units == 1);
  CHECK_FALSE(span.inside_one_domain);
  CHECK_FALSE(span.crosses_spine);
  REQUIRE(TierKinds(span) == std::vector{LinkTier::kNvlink, LinkTier::kNetwork});
  CHECK(span.tiers[0].gb_per_s == doctest::Approx(900));
  // Representative GPUs 71 (rail 3) and 72 (rail 0): PXN, 50 GB/s, 3.6 us.
  CHECK(span.tiers[1].gb_per_s == doctest::Approx(50));
  CHECK(span.tiers[1].latency_us == doctest::Approx(3.6));

  // Starting at 0 or 72 the group fits one rack.
  CHECK(topo.Span(Range(0, 64)).inside_one_domain);
  CHECK(topo.Span(Range(72, 64)).inside_one_domain);
}

TEST_CASE("a domain straddling scalable units stays on NVLink") {
  // NVL72 racks of 18 nodes with SUs of 8 nodes: GPU 0 (node 0, SU 0) and
  // GPU 40 (node 10, SU 1) share rack 0, so they talk over NVLink only.
  const Topology topo = MustBuild(Nvl72(2, /*su_nodes=*/8));
  const GroupSpan span = topo.Span(std::vector{0, 40});
  CHECK(span.scalable_units == 2);
  CHECK(span.domains == 1);
  CHECK(span.inside_one_domain);
  CHECK_FALSE(span.crosses_spine);
  CHECK(TierKinds(span) == std::vector{LinkTier::kNvlink});
}

TEST_CASE("TierBetween: the tier Span reports for the pair") {
  // Every class of pair on two SUs of 8 DGX nodes (same domain; same or
  // other SU, same or other rail), and one NVL72 rack straddling SUs.
  for (const ClusterSpec& cluster : {DgxH100(16, /*su_nodes=*/8, /*spine_oversubscription=*/2), Nvl72(2, 8)}) {
    const Topology topo = MustBuild(cluster);
    for (int a : {0, 3, 7, 40}) {
      for (int b : {1, 8, 9, 40, 64, 65, 127}) {
        if (a == b) continue;
        const GroupSpan span = topo.Span(std::vector{a, b});
        REQUIRE(!span.tiers.empty());
        for (const TierInfo& t : span.tiers) {
          const TierInfo between = topo.TierBetween(a, b, t.tier);
          CHECK(between.tier == t.tier);
          CHECK(between.gb_per_s == t.gb_per_s);
          CHECK(between.latency_us == t.latency_us);
          CHECK(between.hops == t.hops);
        }
      }
    }
  }
}

TEST_CASE("rails touched") {
  const Topology topo = MustBuild(DgxH100(16));
  // GPUs 0, 2, 10, 18: local 0, 2, 2, 2 -> rails {0, 2}.
  CHECK(topo.Span(std::vector{0, 2, 10, 18}).rails == 2);
  // 4 NICs per node: local 0..7 -> rails 0..3.
  ClusterSpec four_nics = DgxH100(4);
  four_nics.nics_per_node = 4;
  CHECK(MustBuild(four_nics).Span(Range(0, 8)).rails == 4);
}

TEST_CASE("uneven domains: ranks per domain") {
  const Topology topo = MustBuild(DgxH100(16));
  // GPUs 5..18: node 0 holds 5..7 (3), node 1 holds 8..15 (8), node 2 holds
  // 16..18 (3).
  const GroupSpan span = topo.Span(Range(5, 14));
  CHECK(span.domains == 3);
  CHECK(span.min_per_domain == 3);
  CHECK(span.max_per_domain == 8);
}

TEST_CASE("unsorted input and duplicates") {
  const Topology topo = MustBuild(DgxH100(16));
  // {9, 3, 9, 8, 3}: distinct GPUs 3, 8, 9 on nodes 0 and 1.
  const GroupSpan span = topo.Span(std::vector{9, 3, 9, 8, 3});
  CHECK(span.gpus == 3);
  CHECK(span.nodes == 2);
  CHECK(span.min_per_domain == 1);
  CHECK(span.max_per_domain == 2);
  CheckSameSpan(span, topo.Span(std::vector{3, 8, 9}));

  // A large unsorted set (deduplicated through a bitmap) spans what the
  // sorted one does.
  std::vector<int> reversed = Range(0, 128);
  std::reverse(reversed.begin(), reversed.end());
  reversed.insert(reversed.end(), reversed.begin(), reversed.end());  // all twice
  CheckSameSpan(topo.Span(reversed), topo.Span(Range(0, 128)));
}

TEST_CASE("out-of-range GPUs are ignored") {
  const Topology topo = MustBuild(DgxH100(16));
  // 128 and -3 are not GPUs of a 128-GPU cluster: the span is {0, 1}.
  const GroupSpan span = topo.Span(std::vector{0, 1, 128, -3});
  CHECK(span.gpus == 2);
  CHECK(span.nodes == 1);
  CHECK(span.inside_one_domain);
  CheckSameSpan(span, topo.Span(std::vector{0, 1}));
  // Nothing valid: an empty span.
  const GroupSpan none = topo.Span(std::vector{500, 1000});
  CHECK(none.gpus == 0);
  CHECK(none.domains == 0);
  CHECK(none.tiers.empty());
}

TEST_CASE("empty and single-GPU sets") {
  const Topology topo = MustBuild(DgxH100(16));
  const GroupSpan empty = topo.Span({});
  CHECK(empty.gpus == 0);
  CHECK_FALSE(empty.inside_one_domain);
  CHECK(empty.tiers.empty());
  // One GPU: one of everything, inside its domain, no traffic tiers.
  const GroupSpan one = topo.Span(std::vector{42});
  CHECK(one.gpus == 1);
  CHECK(one.nodes == 1);
  CHECK(one.rails == 1);
  CHECK(one.min_per_domain == 1);
  CHECK(one.inside_one_domain);
  CHECK(one.tiers.empty());
}

TEST_CASE("spans of big sets, in any member order") {
  // 16,384 GPUs = 2048 DGX nodes in 64 SUs of 32.
  const Topology topo = MustBuild(DgxH100(2048));
  const std::vector<int> all = Range(0, 16384);
  std::vector<int> shuffled = all;
  std::reverse(shuffled.begin(), shuffled.end());

  // Span time is measured in bench/topology_bench.cc, not here.
  const GroupSpan span = topo.Span(all);
  const GroupSpan shuffled_span = topo.Span(shuffled);

  CHECK(span.gpus == 16384);
  CHECK(span.nodes == 2048);
  CHECK(span.domains == 2048);
  CHECK(span.scalable_units == 64);
  CHECK(span.crosses_spine);
  CheckSameSpan(span, shuffled_span);
}

TEST_CASE("a span's tiers, held in place, compare by the tiers held only") {
  // A span crossing the spine has all three tiers, the most there are.
  const Topology topo = MustBuild(DgxH100(64));
  const GroupSpan span = topo.Span(Range(0, 512));
  REQUIRE(span.tiers.size() == SpanTiers::kCapacity);
  CHECK(TierKinds(span) == std::vector{LinkTier::kNvlink, LinkTier::kNetwork, LinkTier::kSpine});
  CHECK(span.tiers.back().tier == LinkTier::kSpine);

  // Slots past the tiers held (left by a longer list) do not count.
  SpanTiers shorter = span.tiers;
  shorter.clear();
  shorter.push_back(span.tiers[0]);
  SpanTiers one;
  one.push_back(span.tiers[0]);
  CHECK(shorter == one);
  CHECK(!(shorter == span.tiers));
  CHECK(std::vector<TierInfo>(shorter.begin(), shorter.end()) == std::vector{span.tiers[0]});
}

}  // namespace
}  // namespace foldplan
