// Property tests over many random layouts (seeded): the rank map's
// invariants, checked here independently of CheckRankMapInvariants, and the
// mixed-radix formula for the two Megatron orders written out by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "planner/rank_export.h"
#include "planner/enumerate.h"  // Divisors
#include "planner/rank_map.h"

namespace foldplan {
namespace {

ClusterSpec DgxGpus(int gpus) {
  ClusterSpec c;
  c.name = "test-dgx";
  c.gpus_per_node = 8;
  c.nodes = (gpus + 7) / 8;
  c.nvlink_domain_gpus = 8;
  c.nics_per_node = 8;
  return c;
}

// Megatron's stride of `axis` for an order and the sizes of one view.
int StrideOf(const std::string& order, const std::string& axis, int tp, int cp, int ep, int dp, int pp) {
  auto size_of = [&](const std::string& a) {
    return a == "tp" ? tp : a == "cp" ? cp : a == "ep" ? ep : a == "dp" ? dp : pp;
  };
  int stride = 1;
  size_t start = 0;
  while (start <= order.size()) {
    size_t dash = order.find('-', start);
    const std::string token =
        order.substr(start, dash == std::string::npos ? std::string::npos : dash - start);
    if (token == axis) return stride;
    stride *= size_of(token);
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  return stride;  // absent axes have size 1 and sit after every named one
}

std::set<int> AsSet(const std::vector<int>& v) { return std::set<int>(v.begin(), v.end()); }

void CheckEachRankOnce(const RankMap& m, GroupKind kind) {
  std::vector<int> count(m.world(), 0);
  for (const auto& group : m.groups(kind))
    for (int r : group) ++count[r];
  for (int r = 0; r < m.world(); ++r) REQUIRE_MESSAGE(count[r] == 1, Name(kind) << " rank " << r);
}

void CheckMap(const RankMap& m) {
  const Layout& l = m.layout();
  const int w = m.world();
  // Views are permutations of 0..W-1.
  for (const std::vector<int>* view : {&m.dense_view(), &m.expert_view()}) {
    std::vector<int> sorted = *view;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < w; ++i) REQUIRE(sorted[i] == i);
  }
  // Every rank in exactly one group of every kind but the embedding ones.
  for (int k = 0; k < kGroupKindCount; ++k) {
    const auto kind = static_cast<GroupKind>(k);
    if (kind != GroupKind::kEmbedding && kind != GroupKind::kPositionEmbedding) CheckEachRankOnce(m, kind);
  }
  // Mixed-radix numbering: a rank is the sum of its coordinates times the
  // order's strides, in both views.
  for (int r = 0; r < w; ++r) {
    const RankCoords& c = m.coords(r);
    const int dense = c.tp * StrideOf(l.order, "tp", l.tp, l.cp, 1, l.dp, l.pp) +
                      c.cp * StrideOf(l.order, "cp", l.tp, l.cp, 1, l.dp, l.pp) +
                      c.dp * StrideOf(l.order, "dp", l.tp, l.cp, 1, l.dp, l.pp) +
                      c.pp * StrideOf(l.order, "pp", l.tp, l.cp, 1, l.dp, l.pp);
    const int expert = c.etp * StrideOf(l.order, "tp", l.etp, 1, l.ep, l.edp, l.pp) +
                       c.ep * StrideOf(l.order, "ep", l.etp, 1, l.ep, l.edp, l.pp) +
                       c.edp * StrideOf(l.order, "dp", l.etp, 1, l.ep, l.edp, l.pp) +
                       c.pp * StrideOf(l.order, "pp", l.etp, 1, l.ep, l.edp, l.pp);
    REQUIRE(dense == r);
    REQUIRE(expert == r);
    REQUIRE(m.dense_view()[((c.pp * l.dp + c.dp) * l.cp + c.cp) * l.tp + c.tp] == r);
    REQUIRE(m.expert_view()[((c.pp * l.edp + c.edp) * l.ep + c.ep) * l.etp + c.etp] == r);
  }
  // pp groups are the same in both views: members agree on all non-pp coordinates.
  for (const auto& group : m.groups(GroupKind::kPp)) {
    REQUIRE(static_cast<int>(group.size()) == l.pp);
    for (size_t i = 0; i < group.size(); ++i) {
      const RankCoords& a = m.coords(group[0]);
      const RankCoords& b = m.coords(group[i]);
      REQUIRE(b.pp == static_cast<int>(i));
      REQUIRE((a.dp == b.dp && a.cp == b.cp && a.tp == b.tp));
      REQUIRE((a.edp == b.edp && a.ep == b.ep && a.etp == b.etp));
    }
  }
  // ep groups partition each stage.
  std::vector<int> ep_ranks_per_stage(l.pp, 0);
  for (const auto& group : m.groups(GroupKind::kEp)) {
    REQUIRE(static_cast<int>(group.size()) == l.ep);
    for (int r : group) REQUIRE(m.coords(r).pp == m.coords(group[0]).pp);
    ep_ranks_per_stage[m.coords(group[0]).pp] += l.ep;
  }
  for (int count : ep_ranks_per_stage) REQUIRE(count == w / l.pp);
  // dp_cp = dp x cp: each dp_cp group is the union of its ranks' dp groups and of their cp groups.
  std::vector<const std::vector<int>*> dp_of(w), cp_of(w);
  for (const auto& g : m.groups(GroupKind::kDp))
    for (int r : g) dp_of[r] = &g;
  for (const auto& g : m.groups(GroupKind::kCp))
    for (int r : g) cp_of[r] = &g;
  for (const auto& group : m.groups(GroupKind::kDpCp)) {
    REQUIRE(static_cast<int>(group.size()) == l.dp * l.cp);
    std::set<int> from_dp, from_cp;
    for (int r : group) {
      from_dp.insert(dp_of[r]->begin(), dp_of[r]->end());
      from_cp.insert(cp_of[r]->begin(), cp_of[r]->end());
    }
    REQUIRE(from_dp == AsSet(group));
    REQUIRE(from_cp == AsSet(group));
  }
  // And the library's own invariant check agrees.
  const Status invariants = CheckRankMapInvariants(m);
  REQUIRE_MESSAGE(invariants.ok(), invariants.message());
}

std::string RandomOrder(std::mt19937& rng) {
  std::vector<std::string> tokens = {"tp", "cp", "ep", "dp", "pp"};
  std::shuffle(tokens.begin(), tokens.end(), rng);
  std::string out;
  for (const auto& t : tokens) out += (out.empty() ? "" : "-") + t;
  return out;
}

TEST_CASE("rankmap property: random layouts, both Megatron orders and random orders") {
  std::mt19937 rng(20250414);
  const std::vector<int> choices = {1, 1, 2, 2, 3, 4, 4, 6, 8, 12, 16};
  auto pick = [&](const std::vector<int>& v) {
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
  };
  int built = 0, refused = 0;
  for (int trial = 0; trial < 600; ++trial) {
    Layout l;
    l.tp = pick(choices);
    l.cp = pick(choices);
    l.dp = pick(choices);
    l.pp = pick(choices);
    l.world = l.tp * l.cp * l.dp * l.pp;
    if (l.world > 4096) continue;
    const int stage = l.world / l.pp;
    l.etp = pick(Divisors(stage));
    l.ep = pick(Divisors(stage / l.etp));
    l.edp = stage / (l.etp * l.ep);
    l.order = trial % 3 == 0 ? kDefaultOrder : trial % 3 == 1 ? kPpDpOrder : RandomOrder(rng);
    CAPTURE(l.order);
    CAPTURE(l.world);
    CAPTURE(l.tp);
    CAPTURE(l.cp);
    CAPTURE(l.dp);
    CAPTURE(l.pp);
    CAPTURE(l.ep);
    CAPTURE(l.etp);

    // Megatron refuses exactly when the views' pp strides differ (and pp > 1).
    const bool pp_groups_differ = l.pp > 1 && StrideOf(l.order, "pp", l.tp, l.cp, 1, l.dp, l.pp) !=
                                                  StrideOf(l.order, "pp", l.etp, 1, l.ep, l.edp, l.pp);
    Result<RankMap> m = BuildRankMap(l, DgxGpus(l.world));
    if (pp_groups_differ) {
      REQUIRE_FALSE(m.ok());
      CHECK(m.status().message().find("different pipeline groups") != std::string::npos);
      ++refused;
      continue;
    }
    REQUIRE_MESSAGE(m.ok(), m.status().message());
    CheckMap(*m);
    ++built;
  }
  CHECK(built > 200);
  CHECK(refused > 10);
}

TEST_CASE("rankmap: hand-computed coordinates for the default order") {
  // tp2 cp3 dp2 pp2 (W = 24), ep3 etp2 edp2: rank of dense (p,d,c,t) is
  // t + TP*(c + CP*(d + DP*p)); of expert (p,e,x,y) is y + ETP*(x + EP*(e + EDP*p)).
  Layout l;
  l.world = 24;
  l.tp = 2;
  l.cp = 3;
  l.dp = 2;
  l.pp = 2;
  l.ep = 3;
  l.etp = 2;
  l.edp = 2;
  Result<RankMap> m = BuildRankMap(l, DgxGpus(24));
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  for (int p = 0; p < 2; ++p)
    for (int d = 0; d < 2; ++d)
      for (int c = 0; c < 3; ++c)
        for (int t = 0; t < 2; ++t) {
          const int rank = t + 2 * (c + 3 * (d + 2 * p));
          CHECK(m->coords(rank).pp == p);
          CHECK(m->coords(rank).dp == d);
          CHECK(m->coords(rank).cp == c);
          CHECK(m->coords(rank).tp == t);
        }
  for (int p = 0; p < 2; ++p)
    for (int e = 0; e < 2; ++e)
      for (int x = 0; x < 3; ++x)
        for (int y = 0; y < 2; ++y) {
          const int rank = y + 2 * (x + 3 * (e + 2 * p));
          CHECK(m->coords(rank).edp == e);
          CHECK(m->coords(rank).ep == x);
          CHECK(m->coords(rank).etp == y);
        }
  // Rank 17 = t1 + 2*(c2 + 3*(d0 + 2*p1)): its cp group, number t + 2*(d + 2*p) = 5, is {13, 15, 17}.
  CHECK(m->groups(GroupKind::kCp)[5] == std::vector<int>{13, 15, 17});
}

TEST_CASE("rankmap: 16,384 ranks build in milliseconds") {
  Layout l;
  l.world = 16384;
  l.tp = 8;
  l.cp = 2;
  l.pp = 16;
  l.dp = 64;
  l.ep = 64;
  l.etp = 1;
  l.edp = 16;
  const ClusterSpec cluster = DgxGpus(16384);
  const auto start = std::chrono::steady_clock::now();
  Result<RankMap> m = BuildRankMap(l, cluster);
  const auto built = std::chrono::steady_clock::now();
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  const Status invariants = CheckRankMapInvariants(*m);
  const auto checked = std::chrono::steady_clock::now();
  CHECK_MESSAGE(invariants.ok(), invariants.message());
  using ms = std::chrono::duration<double, std::milli>;
  MESSAGE("BuildRankMap(16384 ranks): " << ms(built - start).count()
                                        << " ms; invariant check: " << ms(checked - built).count() << " ms");
  CHECK(ms(built - start).count() < 2000.0);  // generous for debug builds and slow CI
}

}  // namespace
}  // namespace foldplan
