// EnumerateLayouts against a brute force: every candidate of the documented
// space is built one by one and checked with CheckLayout; its first violation
// (in rule order) must be where the enumeration counted it, and the legal
// sets must be identical.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "fixtures.h"
#include "planner/enumerate.h"
#include "planner/pipeline_split.h"
#include "planner/rank_map.h"

using namespace foldplan;
using namespace foldplan::testing;

namespace {

struct BruteForce {
  uint64_t candidates = 0;
  std::array<uint64_t, kRuleCount> rejected{};
  std::set<std::string> legal;
};

void Tally(const Layout& l, const LegalityContext& ctx, BruteForce* out) {
  ++out->candidates;
  auto v = CheckLayout(l, ctx);
  if (v.empty()) out->legal.insert(FormatLayout(l));
  else ++out->rejected[static_cast<size_t>(v.front().rule)];
}

BruteForce Brute(const LegalityContext& ctx) {
  BruteForce out;
  const JobSpec& job = *ctx.job;
  const ModelSpec& model = *ctx.model;
  const int world = job.world_size > 0 ? job.world_size : ctx.cluster->total_gpus();
  for (int pp : Divisors(world)) {
    const int g = world / pp;
    for (int vpp : job.vpp) {
      for (int tp : Divisors(g)) {
        for (int cp : Divisors(g)) {
          std::vector<CpStyle> styles = job.cp_styles;
          if (cp == 1) styles.resize(1);
          for (CpStyle style : styles) {
            std::vector<std::pair<int, int>> experts;  // (ep, etp)
            if (model.is_moe()) {
              for (int ep : Divisors(g)) for (int etp : Divisors(g)) experts.push_back({ep, etp});
            } else {
              experts.push_back({1, tp});
            }
            for (auto [ep, etp] : experts) {
              for (int mbs : job.micro_batch_sizes) {
                std::vector<std::string> orders = job.orders;
                if (pp == 1) orders.resize(1);  // the two test orders differ only in pp
                for (const auto& order : orders) {
                  for (Recompute rc : job.recompute) {
                    Layout l;
                    l.world = world, l.pp = pp, l.vpp = vpp, l.tp = tp, l.cp = cp;
                    l.dp = g % (tp * cp) == 0 ? g / (tp * cp) : 0;
                    l.ep = ep, l.etp = etp;
                    l.edp = g % (ep * etp) == 0 ? g / (ep * etp) : 0;
                    l.cp_style = style, l.mbs = mbs, l.order = order, l.recompute = rc;
                    if (l.dp == 0) l.dp = 1;    // any wrong value: dense_product catches it
                    if (l.edp == 0) l.edp = 1;  // likewise expert_product
                    auto split = SplitLayers(model.layers, pp, vpp);
                    if (split.ok()) l.stage_layers = split.value();
                    Tally(l, ctx, &out);
                    // A packed variant exists where it would move ranks.
                    if (CheckLayout(l, ctx).empty()) {
                      const int block = HeavyBlock(l);
                      const int d = ctx.cluster->nvlink_domain_gpus;
                      if (block < d && d % block != 0) {
                        l.placement = Placement::kPacked;
                        Tally(l, ctx, &out);
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

void CompareWithBruteForce(const ClusterSpec& cluster, const ModelSpec& model, const JobSpec& job) {
  const LegalityContext ctx{&cluster, &model, &job};
  const Enumeration e = EnumerateLayouts(ctx);
  const BruteForce b = Brute(ctx);
  CHECK(e.candidates == b.candidates);
  CHECK(e.legal_count == b.legal.size());
  for (int r = 0; r < kRuleCount; ++r) {
    CHECK_MESSAGE(e.rejected[r] == b.rejected[r], Name(Rule(r)));
  }
  std::set<std::string> enumerated;
  for (const auto& l : e.legal) enumerated.insert(FormatLayout(l));
  CHECK(enumerated.size() == e.legal.size());  // no duplicates
  CHECK(enumerated == b.legal);
}

}  // namespace

TEST_CASE("enumeration equals a brute force on a 32-GPU DGX cluster (MoE)") {
  ClusterSpec cluster = MakeCluster(4);
  ModelSpec model = MakeMixtral();
  JobSpec job = MakeJob();
  job.seq_len = 4100;  // makes the sequence rules bite
  job.cp_styles = {CpStyle::kUlysses, CpStyle::kRing};
  CompareWithBruteForce(cluster, model, job);
}

TEST_CASE("enumeration equals a brute force for a dense model with uneven stages") {
  ClusterSpec cluster = MakeCluster(6);  // 48 GPUs: divisors include 3, 6, 12
  ModelSpec model = MakeDense();
  model.layers = 30;
  JobSpec job = MakeJob();
  job.global_batch = 96;
  job.vpp = {1, 2, 3};
  CompareWithBruteForce(cluster, model, job);
}

TEST_CASE("enumeration equals a brute force on NVL72 racks, packed variants included") {
  ClusterSpec cluster = MakeCluster(36, 4, 72);  // two NVL72 racks, 144 GPUs
  ModelSpec model = MakeMixtral();
  model.moe->experts = 16;
  JobSpec job = MakeJob();
  job.world_size = 128;  // leave 16 GPUs idle: 64 + 64 fit the racks only when packed
  job.global_batch = 128;
  job.micro_batch_sizes = {1};
  job.vpp = {1};
  const LegalityContext ctx{&cluster, &model, &job};
  const Enumeration e = EnumerateLayouts(ctx);
  bool any_packed = false;
  for (const auto& l : e.legal) any_packed |= l.placement == Placement::kPacked;
  CHECK(any_packed);
  CompareWithBruteForce(cluster, model, job);
}

TEST_CASE("every enumerated layout builds a rank map") {
  ClusterSpec cluster = MakeCluster(4);
  ModelSpec model = MakeMixtral();
  JobSpec job = MakeJob();
  const Enumeration e = EnumerateLayouts({&cluster, &model, &job});
  REQUIRE(e.legal_count > 0);
  for (const auto& l : e.legal) {
    auto map = BuildRankMap(l, cluster);
    CHECK_MESSAGE(map.ok(), FormatLayout(l) << ": " << map.status().message());
  }
}

TEST_CASE("count-only enumeration gives the same counts") {
  ClusterSpec cluster = MakeCluster(16);
  ModelSpec model = MakeMixtral();
  JobSpec job = MakeJob();
  const Enumeration full = EnumerateLayouts({&cluster, &model, &job});
  const Enumeration counted = EnumerateLayouts({&cluster, &model, &job}, {.collect_layouts = false});
  CHECK(counted.legal.empty());
  CHECK(counted.legal_count == full.legal_count);
  CHECK(counted.candidates == full.candidates);
  CHECK(counted.rejected == full.rejected);
}

TEST_CASE("a world larger than the cluster rejects every candidate under world_fits_cluster") {
  ClusterSpec cluster = MakeCluster(2);
  ModelSpec model = MakeMixtral();
  JobSpec job = MakeJob();
  job.world_size = 32;
  const Enumeration e = EnumerateLayouts({&cluster, &model, &job});
  CHECK(e.legal_count == 0);
  CHECK(e.candidates > 0);
  CHECK(e.rejected[static_cast<size_t>(Rule::kWorldFitsCluster)] == e.candidates);
}

TEST_CASE("Divisors") {
  CHECK(Divisors(1) == std::vector<int>{1});
  CHECK(Divisors(12) == std::vector<int>{1, 2, 3, 4, 6, 12});
  CHECK(Divisors(64).size() == 7);
}
