// The trainer rules (planner/trainer_rules.h): what each trainer refuses,
// with the rule it breaks, and the order rule held to the rank maps it
// stands for.
#include <doctest/doctest.h>

#include <random>
#include <set>

#include "fixtures.h"
#include "planner/rank_map.h"
#include "planner/trainer_rules.h"
#include "planner_random_layout.h"
#include "shipped_model.h"

namespace foldplan {
namespace {

using testing::MakeLayout;

// The first trainer rule `t` finds, or "" when it runs the layout.
std::string TrRuleOf(Trainer t, const Layout& l, const ModelSpec* model = nullptr, const ClusterSpec* cluster = nullptr) {
  JobSpec job = testing::MakeJob();
  job.trainer = t;
  const std::vector<Violation> v = CheckTrainer(t, l, {cluster, model, &job});
  return v.empty() ? "" : Name(v.front().rule);
}

// The rank map's groups of each kind as sets, to compare numberings.
std::set<std::vector<int>> TrGroups(const RankMap& map, GroupKind kind) {
  std::set<std::vector<int>> out;
  for (std::vector<int> g : map.groups(kind)) {
    std::sort(g.begin(), g.end());
    out.insert(g);
  }
  return out;
}

}  // namespace

TEST_CASE("torchtitan: ring CP only, experts never tensor-parallel with EP, FSDP2, its own numbering") {
  const ModelSpec moe = testing::MakeMixtral();
  Layout l = MakeLayout(32, 2, 2, 2, 4, 1);  // dp 4, edp 4
  l.cp_style = CpStyle::kRing;
  l.fsdp = true;
  CHECK(TrRuleOf(Trainer::kTorchtitan, l, &moe) == "");
  l.cp_style = CpStyle::kUlysses;
  CHECK(TrRuleOf(Trainer::kTorchtitan, l, &moe) == "trainer_cp_style");
  l.cp_style = CpStyle::kRing;
  Layout etp = MakeLayout(32, 2, 2, 2, 4, 2);
  etp.cp_style = CpStyle::kRing;
  etp.fsdp = true;
  CHECK(TrRuleOf(Trainer::kTorchtitan, etp, &moe) == "trainer_expert_tp");
  l.fsdp = false;  // a ZeRO-1 distributed optimizer: torchtitan shards with FSDP2
  CHECK(TrRuleOf(Trainer::kTorchtitan, l, &moe) == "trainer_data_parallel");
  l.fsdp = true;
  l.order = kPpDpOrder;  // pp inside dp: torchtitan numbers pp outermost
  CHECK(TrRuleOf(Trainer::kTorchtitan, l, &moe) == "trainer_order");
  l.a2a_overlap = true;
  l.order = kDefaultOrder;
  CHECK(TrRuleOf(Trainer::kTorchtitan, l, &moe) == "trainer_recipe");
}

TEST_CASE("an order whose differing axes are all of size 1 numbers ranks as the default order") {
  // tp-cp-ep-pp-dp with dp 1 and edp 1: pp's stride is tp x cp in both
  // views either way, so torchtitan's mesh gives the same groups.
  const ModelSpec moe = testing::MakeMixtral();
  Layout l = MakeLayout(16, 2, 2, 4, 4, 1, kPpDpOrder);  // dp 1, edp 1
  l.cp_style = CpStyle::kRing;
  l.fsdp = true;
  REQUIRE(l.dp == 1);
  REQUIRE(l.edp == 1);
  CHECK(TrRuleOf(Trainer::kTorchtitan, l, &moe) == "");
}

TEST_CASE("OLMo-core: EP is HSDP's shard dimension, without TP or CP; dense models may use TP") {
  const ModelSpec moe = testing::MakeMixtral();
  const ModelSpec dense = testing::MakeDense();
  Layout l = MakeLayout(32, 1, 1, 2, 4, 1);  // dp 16, ep 4 | 16
  l.fsdp = true;
  CHECK(TrRuleOf(Trainer::kOlmoCore, l, &moe) == "");
  Layout tp = MakeLayout(32, 2, 1, 2, 4, 1);
  tp.fsdp = true;
  CHECK(TrRuleOf(Trainer::kOlmoCore, tp, &moe) == "trainer_expert_tp");
  Layout cp = MakeLayout(32, 1, 2, 2, 4, 1);
  cp.fsdp = true;
  CHECK(TrRuleOf(Trainer::kOlmoCore, cp, &moe) == "trainer_ep_needs_hsdp");
  l.fsdp = false;
  CHECK(TrRuleOf(Trainer::kOlmoCore, l, &moe) == "trainer_data_parallel");
  // A dense model: ep 1, etp = tp 2 is no expert tensor parallelism.
  const Layout d = MakeLayout(32, 2, 1, 2, 1, 2);
  CHECK(TrRuleOf(Trainer::kOlmoCore, d, &dense) == "");
}

TEST_CASE("MaxText pipelines one kind of decoder layer, evenly; experts' TP is the tensor axis") {
  const ModelSpec v3 = testing::ShippedModel("deepseek-v3");  // 3 dense layers, then MoE
  Layout l = MakeLayout(64, 1, 1, 8, 8, 1);
  CHECK(TrRuleOf(Trainer::kMaxText, l, &v3) == "trainer_pipeline_split");
  const ModelSpec moe = testing::MakeMixtral();
  Layout even = MakeLayout(32, 1, 1, 2, 4, 1);
  even.stage_layers = {16, 16};
  CHECK(TrRuleOf(Trainer::kMaxText, even, &moe) == "");
  even.stage_layers = {15, 17};
  CHECK(TrRuleOf(Trainer::kMaxText, even, &moe) == "trainer_pipeline_split");
  const Layout etp = MakeLayout(32, 2, 1, 1, 4, 1);
  CHECK(TrRuleOf(Trainer::kMaxText, etp, &moe) == "trainer_expert_tp");
}

TEST_CASE("Megatron's validation: DeepEP refuses capacity padding, fp8-delayed the moe_act and layernorm modules") {
  Layout l = MakeLayout(16, 1, 1, 1, 4, 1);
  l.dispatcher = Dispatcher::kDeepEP;
  JobSpec job = testing::MakeJob();
  CHECK(!MegatronRecipeProblem(l, &job));
  job.capacity_factor = 1.25;
  REQUIRE(MegatronRecipeProblem(l, &job));
  CHECK(MegatronRecipeProblem(l, &job)->rule == Rule::kDeepEpNoPadding);
  l.dispatcher = Dispatcher::kHybridEP;  // HybridEP pads
  CHECK(!MegatronRecipeProblem(l, &job));
  l.precision = Precision::kFP8Delayed;
  l.recompute = Recompute::Modules(1u << int(RecomputeModule::kLayernorm));
  REQUIRE(MegatronRecipeProblem(l, &job));
  CHECK(MegatronRecipeProblem(l, &job)->rule == Rule::kFp8DelayedRecompute);
  l.precision = Precision::kFP8Tensorwise;
  CHECK(!MegatronRecipeProblem(l, &job));
  // Every trainer's export refuses what Megatron refuses.
  l.precision = Precision::kFP8Delayed;
  for (int t = 0; t < kTrainerCount; ++t) {
    const Status s = TrainerRefusal(Trainer(t), l, {nullptr, nullptr, &job});
    CHECK(!s.ok());
    CHECK(s.message().find("fp8_delayed_recompute") != std::string::npos);
  }
}

TEST_CASE("the order rule agrees with the rank maps: torchtitan's groups are the default order's") {
  // For random degrees, orders and placements of 16 ranks, trainer_order
  // passes for torchtitan exactly when the layout's rank map has the same
  // groups of every kind as the same degrees under tp-cp-ep-dp-pp.
  std::mt19937 rng(7);
  const ClusterSpec cluster = testing::MakeCluster(2);
  const std::vector<std::string> orders = {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-pp-cp-ep-dp", "cp-tp-ep-dp-pp",
                                           "tp-cp-dp-ep-pp", "pp-tp-cp-ep-dp"};
  int agreeing = 0, differing = 0;
  for (int i = 0; i < 300; ++i) {
    Layout l = testing::RandomLayout(16, orders, rng);
    l.placement = Placement::kLinear;
    // What torchtitan's other rules ask, so that only the order decides.
    l.cp_style = CpStyle::kRing;
    l.fsdp = true;
    l.etp = l.ep > 1 ? 1 : l.tp;
    const int stage = l.world / l.pp;
    if (stage % (l.ep * l.etp) != 0) continue;
    l.edp = stage / (l.ep * l.etp);
    if (!CheckOrder(l).empty()) continue;
    Layout ref = l;
    ref.order = kDefaultOrder;
    auto a = BuildRankMap(l, cluster);
    auto b = BuildRankMap(ref, cluster);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    bool same = true;
    for (GroupKind k : {GroupKind::kTp, GroupKind::kCp, GroupKind::kDp, GroupKind::kPp, GroupKind::kEp,
                        GroupKind::kEtp, GroupKind::kEdp}) {
      same = same && TrGroups(a.value(), k) == TrGroups(b.value(), k);
    }
    CAPTURE(FormatLayout(l));
    CHECK((TrRuleOf(Trainer::kTorchtitan, l) != "trainer_order") == same);
    (same ? agreeing : differing) += 1;
  }
  CHECK(agreeing > 10);
  CHECK(differing > 10);
}

TEST_CASE("JobForTrainer adds what the trainer runs: torchtitan ring CP and FSDP2, OLMo-core HSDP") {
  JobSpec job = testing::MakeJob();
  job.cp_styles = {CpStyle::kUlysses};
  job.fsdp = {false};
  job.trainer = Trainer::kTorchtitan;
  const JobSpec tt = JobForTrainer(job);
  CHECK(tt.cp_styles == std::vector<CpStyle>{CpStyle::kUlysses, CpStyle::kRing});
  CHECK(tt.fsdp == std::vector<bool>{false, true});
  job.trainer = Trainer::kOlmoCore;
  CHECK(JobForTrainer(job).fsdp == std::vector<bool>{false, true});
  CHECK(JobForTrainer(job).cp_styles == job.cp_styles);
  job.trainer = Trainer::kMegatron;
  CHECK(JobForTrainer(job).fsdp == job.fsdp);
}

}  // namespace foldplan
