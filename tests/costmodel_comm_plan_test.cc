// The communication inventory of a layout (costmodel/comm_plan.h): volumes
// computed by hand for a Mixtral-8x7B layout, then the knobs that change them.
#include <cmath>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "topology_fixtures.h"
#include "costmodel_comm_fixtures.h"
#include "costmodel/comm_params.h"
#include "costmodel/comm_plan.h"
#include "costmodel/schedule.h"
#include "planner/group_placement.h"
#include "fixtures.h"
#include "inputs/loader.h"
#include "topology/topology.h"

namespace foldplan {
namespace {

using testing::MakeCluster;
using testing::MakeDense;
using testing::MakeJob;
using testing::MakeMixtral;

using testing::MustBuild;

using testing::FindOp;
using testing::RequireSameOp;

std::vector<std::string> Names(const std::vector<CommOp>& ops) {
  std::vector<std::string> names;
  for (const CommOp& op : ops) names.push_back(op.name);
  return names;
}

// Mixtral-8x7B on 4 DGX nodes: pp4 x (tp2 cp2 dp2) dense, pp4 x (etp1 ep8
// edp1) expert, Ulysses CP, mbs 1, S 4096, the default order (a stage is one
// node), dropless all-to-all dispatch with perfect balance.
struct MixtralSetup : testing::CommSetup {
  MixtralSetup() : CommSetup(MakeCluster(4), MakeMixtral()) {
    job.routing_imbalance = 1.0;
    layout.world = 32;
    layout.pp = 4;
    layout.tp = 2;
    layout.cp = 2;
    layout.dp = 2;
    layout.ep = 8;
    layout.etp = 1;
    layout.edp = 1;
    layout.mbs = 1;
  }
};

TEST_CASE("Mixtral-8x7B: the ops and their volumes, by hand") {
  const MixtralSetup s;
  const std::vector<CommOp> ops = s.Plan();
  // Mixtral has no dense MLP layer and no shared expert: TP traffic is the
  // attention block's only. EDP is 1: no expert data-parallel ops.
  CHECK(Names(ops) == std::vector<std::string>{
                          "tp_attn_allgather", "tp_attn_reducescatter", "tp_attn_regather", "cp_ulysses_q",
                          "cp_ulysses_k", "cp_ulysses_v", "cp_ulysses_out", "moe_token_counts", "moe_dispatch",
                          "moe_dispatch_probs", "moe_combine", "pp_send_recv", "dp_grad_reducescatter",
                          "dp_param_allgather"});

  // TP/SP: [mbs x S/CP, H] = 1 x 2048 x 4096 x 2 bytes = 16 MiB per call, the
  // gathered total. Forward 1 all-gather + 1 reduce-scatter per layer;
  // backward 1 + 1 mirrored, plus the overlapped re-gather.
  const CommOp* ag = FindOp(ops, "tp_attn_allgather");
  REQUIRE(ag);
  CHECK(ag->bytes == 2048.0 * 4096 * 2);
  CHECK(ag->scope == CommOp::kPerLayer);
  CHECK(ag->calls_fwd == 1);
  CHECK(ag->calls_bwd == 1);
  CHECK_FALSE(ag->overlappable);
  CHECK(FindOp(ops, "tp_attn_reducescatter")->collective == Collective::kReduceScatter);
  CHECK(FindOp(ops, "tp_attn_regather")->calls_fwd == 0);
  CHECK(FindOp(ops, "tp_attn_regather")->overlappable);
  // Two GPUs of one node, ring Simple: 8.4 + 3.4 us + 16 MiB / (370.8 x 2/1 GB/s).
  CHECK(ag->seconds_per_call == doctest::Approx(11.8e-6 + 16777216.0 / (370.8 * 2 * 1e9)));
  CHECK(std::string(ag->algorithm) == "ring/Simple");

  // Ulysses: per rank 2048 tokens x heads/TP x 128 x 2 bytes: q and out 16
  // heads (8 MiB), k and v 4 KV heads (2 MiB). Sum = b (mbs S/C) d (2a +
  // 2a_kv)/TP = 2 x 2048 x 128 x (64 + 16)/2 = 20 MiB.
  double ulysses = 0;
  for (const char* name : {"cp_ulysses_q", "cp_ulysses_k", "cp_ulysses_v", "cp_ulysses_out"}) {
    const CommOp* op = FindOp(ops, name);
    REQUIRE(op);
    CHECK(op->collective == Collective::kAllToAll);
    CHECK(op->group == GroupKind::kCp);
    CHECK(op->calls_fwd == 1);
    CHECK(op->calls_bwd == 1);
    ulysses += op->bytes;
  }
  CHECK(FindOp(ops, "cp_ulysses_q")->bytes == 2048.0 * 16 * 128 * 2);
  CHECK(FindOp(ops, "cp_ulysses_k")->bytes == 2048.0 * 4 * 128 * 2);
  CHECK(ulysses == 2.0 * 2048 * 128 * (64 + 16) / 2);

  // MoE all-to-all: T = mbs S/(CP TP) = 1024 tokens, K = 2: 2048 rows x
  // 4096 x 2 bytes = 16 MiB each way, probs 2048 x 4 bytes; counts: 8 ranks
  // of TP x EP x 8 experts x 8 bytes.
  const CommOp* dispatch = FindOp(ops, "moe_dispatch");
  REQUIRE(dispatch);
  CHECK(dispatch->bytes == 2048.0 * 4096 * 2);
  CHECK(dispatch->scope == CommOp::kPerMoeLayer);
  CHECK(dispatch->group == GroupKind::kEp);
  CHECK(FindOp(ops, "moe_combine")->bytes == dispatch->bytes);
  CHECK(FindOp(ops, "moe_dispatch_probs")->bytes == 2048.0 * 4);
  CHECK(FindOp(ops, "moe_token_counts")->bytes == 8.0 * 8 * 8);
  CHECK(FindOp(ops, "moe_token_counts")->group == GroupKind::kTpEp);

  // PP: [mbs x S/(CP TP), H] = 1024 x 4096 x 2 = 8 MiB per boundary and
  // direction. The 4 stages sit on 4 nodes: each boundary crosses a NIC:
  // 8.4 + 14 us + 8 MiB / 50 GB/s.
  const CommOp* pp = FindOp(ops, "pp_send_recv");
  REQUIRE(pp);
  CHECK(pp->bytes == 1024.0 * 4096 * 2);
  CHECK(pp->scope == CommOp::kPerStageBoundary);
  CHECK(pp->seconds_per_call == doctest::Approx(22.4e-6 + 8388608.0 / 50e9));

  // DP over DP x CP (4 ranks), per step. A layer's non-expert parameters:
  // attention 4096 x (4096 + 2 x 1024) + 4096 x 4096 = 41,943,040, split
  // over TP 2; two norms 8,192 and the router 4096 x 8 = 32,768, replicated
  // on both TP ranks: 20,971,520 + 40,960 = 21,012,480 per rank. The
  // largest stage is the last: 8 layers + the output layer 32000 x 4096 / 2
  // + the final norm 4096 = 233,639,936 per rank; fp32 gradients
  // reduce-scattered (x 4 bytes), bf16 parameters all-gathered (x 2).
  const double dense_per_rank = 8.0 * (41943040 / 2 + 8192 + 32768) + 32000.0 * 4096 / 2 + 4096;
  CHECK(dense_per_rank == 233639936.0);
  const CommOp* rs = FindOp(ops, "dp_grad_reducescatter");
  REQUIRE(rs);
  CHECK(rs->bytes == dense_per_rank * 4);
  CHECK(rs->group == GroupKind::kDpCp);
  CHECK(rs->scope == CommOp::kPerStep);
  CHECK(rs->calls_bwd == 1);
  CHECK(rs->overlappable);
  CHECK(FindOp(ops, "dp_param_allgather")->bytes == dense_per_rank * 2);
}

TEST_CASE("every op is timed on its group's worst-case span") {
  const MixtralSetup s;
  Result<LayoutPlacement> placement = PlaceGroups(s.layout, s.topo);
  REQUIRE(placement.ok());
  MixtralSetup flex;
  flex.layout.dispatcher = Dispatcher::kDeepEP;
  std::vector<CommOp> all = s.Plan();
  for (const CommOp& op : flex.Plan()) all.push_back(op);
  for (const CommOp& op : all) {
    CAPTURE(op.name);
    const GroupPlacement& g = placement->of(op.group);
    CHECK(g.size >= 2);
    // Flex dispatch and combine are timed as the forwarded all-to-all of
    // their two tiers; everything else as its collective.
    const bool forwarded = std::string(op.algorithm).rfind("flex/", 0) == 0;
    const CollectiveCost cost =
        forwarded ? ForwardedAllToAllTime(op.bytes - op.network_bytes, op.network_bytes, g.span, s.params,
                                          g.groups_sharing_links)
                  : CollectiveTime(op.collective, op.bytes, g.span, s.params, g.groups_sharing_links);
    CHECK(op.seconds_per_call == cost.seconds);
    CHECK(std::string(op.algorithm) == cost.algorithm);
    CHECK(op.seconds_per_call > 0);
    if (!forwarded) CHECK(op.network_bytes == 0);
  }
  // Without a topology or parameters in the context, the same plan.
  MixtralSetup bare;
  CostContext ctx = bare.ctx();
  ctx.topology = nullptr;
  ctx.comm = nullptr;
  const std::vector<CommOp> rebuilt = BuildCommPlan(bare.layout, ctx);
  const std::vector<CommOp> original = s.Plan();
  REQUIRE(rebuilt.size() == original.size());
  for (size_t i = 0; i < rebuilt.size(); ++i) CHECK(rebuilt[i].seconds_per_call == original[i].seconds_per_call);
}

TEST_CASE("routing imbalance and capacity factor scale the EP bytes") {
  MixtralSetup s;
  const CommOp balanced = *FindOp(s.Plan(), "moe_dispatch");
  // Dropless: the busiest rank receives imbalance x the mean.
  s.job.routing_imbalance = 1.5;
  const std::vector<CommOp> skewed = s.Plan();
  CHECK(FindOp(skewed, "moe_dispatch")->bytes == doctest::Approx(1.5 * balanced.bytes));
  CHECK(FindOp(skewed, "moe_combine")->bytes == doctest::Approx(1.5 * balanced.bytes));
  CHECK(FindOp(skewed, "moe_dispatch_probs")->bytes == doctest::Approx(1.5 * 2048 * 4));
  CHECK(FindOp(skewed, "moe_dispatch")->seconds_per_call > balanced.seconds_per_call);
  CHECK(FindOp(skewed, "moe_token_counts")->bytes == 8.0 * 8 * 8);  // counts do not scale
  // A capacity factor pads every expert to CF x mean, whatever the imbalance.
  s.job.capacity_factor = 1.25;
  CHECK(FindOp(s.Plan(), "moe_dispatch")->bytes == doctest::Approx(1.25 * balanced.bytes));
}

TEST_CASE("ETP adds all-gather-v and reduce-scatter-v over the expert TP group") {
  MixtralSetup s;
  s.layout.ep = 4;
  s.layout.etp = 2;
  const std::vector<CommOp> ops = s.Plan();
  // rows = T K = 2048 received per rank; all-gather over ETP 2: 2 x 2048 x
  // (4096 x 2 + 4) bytes; reduce-scatter in fp32: 2 x 2048 x 4096 x 4.
  const CommOp* ag = FindOp(ops, "moe_etp_allgather");
  REQUIRE(ag);
  CHECK(ag->bytes == 2.0 * 2048 * (4096 * 2 + 4));
  CHECK(ag->calls_fwd == 1);
  CHECK(ag->calls_bwd == 0);
  const CommOp* rs = FindOp(ops, "moe_etp_reducescatter");
  REQUIRE(rs);
  CHECK(rs->bytes == 2.0 * 2048 * 4096 * 4);
  // Backward swaps them.
  CHECK(FindOp(ops, "moe_etp_allgather_grad")->collective == Collective::kReduceScatter);
  CHECK(FindOp(ops, "moe_etp_reducescatter_grad")->collective == Collective::kAllGather);
  CHECK(FindOp(ops, "moe_etp_reducescatter_grad")->calls_bwd == 1);
  CHECK(FindOp(ops, "moe_token_counts")->bytes == 8.0 * 8 * 8);  // TP x EP still 8 ranks
}

TEST_CASE("the other dispatchers") {
  MixtralSetup s;
  // All-gather over TP x EP (8 ranks) of every token: 8 x 1024 x (4096 x 2
  // hidden + 8 routing-map bytes + 8 x 4 probs); reduce-scatter 8 x 1024 x
  // 4096 x 2.
  s.layout.dispatcher = Dispatcher::kAllGather;
  std::vector<CommOp> ops = s.Plan();
  CHECK(FindOp(ops, "moe_dispatch") == nullptr);
  REQUIRE(FindOp(ops, "moe_allgather_tokens"));
  CHECK(FindOp(ops, "moe_allgather_tokens")->bytes == 8.0 * 1024 * (4096 * 2 + 8 + 8 * 4));
  CHECK(FindOp(ops, "moe_reducescatter_tokens")->bytes == 8.0 * 1024 * 4096 * 2);
  CHECK(FindOp(ops, "moe_allgather_tokens")->group == GroupKind::kTpEp);

  // Flex: a token goes once to each distinct rank of its 2 experts; with 8
  // experts on 8 ranks that is exactly 2, and 7/8 of them are another GPU
  // of the node (the EP group is one node): 1.75 NVLink copies, each the
  // token (4096 x 2 bytes) with its top-2 indices and weights (2 x (8 + 4)).
  // Nothing leaves the node. (tests/costmodel_comm_flex_test.cc has more.)
  s.layout.dispatcher = Dispatcher::kDeepEP;
  ops = s.Plan();
  CHECK(FindOp(ops, "moe_dispatch") == nullptr);
  REQUIRE(FindOp(ops, "moe_flex_dispatch"));
  CHECK(FindOp(ops, "moe_flex_dispatch")->bytes == doctest::Approx(1024.0 * 1.75 * (4096 * 2 + 2 * 12)));
  CHECK(FindOp(ops, "moe_flex_dispatch")->network_bytes == 0);
  CHECK(FindOp(ops, "moe_flex_combine")->bytes == doctest::Approx(1024.0 * 1.75 * 4096 * 2));
  CHECK(FindOp(ops, "moe_flex_combine")->collective == Collective::kAllToAll);
  CHECK(std::string(FindOp(ops, "moe_flex_combine")->algorithm) == "flex/nvlink");
}

TEST_CASE("expected distinct destination ranks for uniform top-k routing") {
  // 8 experts on 8 ranks, top 2: two distinct experts are always on 2 ranks.
  CHECK(ExpectedDistinctRanks(8, 2, 8) == doctest::Approx(2));
  // One rank: 1. Top-1: 1.
  CHECK(ExpectedDistinctRanks(256, 8, 1) == 1);
  CHECK(ExpectedDistinctRanks(256, 1, 64) == doctest::Approx(1));
  // DeepSeek-V3 (256 experts, top 8) on EP 64, exact: 64 (1 - prod_{i<8}
  // (252 - i)/(256 - i)) = 7.676; the with-replacement approximation
  // 64 (1 - (63/64)^8) = 7.576 is 1.3% lower (it lets a token pick the same
  // expert twice).
  const double exact = ExpectedDistinctRanks(256, 8, 64);
  double none = 1;
  for (int i = 0; i < 8; ++i) none *= (252.0 - i) / (256.0 - i);
  CHECK(exact == doctest::Approx(64 * (1 - none)));
  CHECK(exact == doctest::Approx(7.676).epsilon(0.0005));
  const double approx = 64 * (1 - std::pow(63.0 / 64, 8));
  CHECK(approx < exact);
  CHECK(exact == doctest::Approx(approx).epsilon(0.015));
  // Never more than min(top_k, ep).
  CHECK(ExpectedDistinctRanks(64, 8, 4) <= 4);
}

TEST_CASE("ring CP exchanges K and V blocks, overlapped") {
  MixtralSetup s;
  s.layout.cp_style = CpStyle::kRing;
  const std::vector<CommOp> ops = s.Plan();
  CHECK(FindOp(ops, "cp_ulysses_q") == nullptr);
  const CommOp* ring = FindOp(ops, "cp_ring_kv");
  REQUIRE(ring);
  // Block: 2048 tokens x 8/2 KV heads x (128 + 128) x 2 bytes; CP-1 = 1 step
  // forward, K/V and their gradients backward: 2.
  CHECK(ring->bytes == 2048.0 * 4 * 256 * 2);
  CHECK(ring->collective == Collective::kSendRecv);
  CHECK(ring->calls_fwd == 1);
  CHECK(ring->calls_bwd == 2);
  CHECK(ring->overlappable);
}

TEST_CASE("recomputation repeats forward communication in the backward pass") {
  // A recomputed module runs its forward once more inside the backward, so
  // every collective inside it gets one more forward-kind call (calls_bwd
  // + 1). What each module holds: core_attn the CP exchange (Transformer
  // Engine's CP lives in core attention); mlp the dense MLP's TP
  // all-gather and reduce-scatter; shared_experts the shared experts' TP
  // pair; moe the whole MoE layer: token counts, dispatch, probs, combine,
  // the ETP collectives and the shared experts; full all of a layer.
  // layernorm, moe_act and mla_up_proj hold no communication.
  MixtralSetup s;
  s.model.moe->shared_experts = 1;  // a shared expert, to see its TP pair
  s.model.moe->shared_ffn_hidden = 14336;
  s.layout.recompute = Recompute::Selective();  // core attention: the CP all-to-alls
  std::vector<CommOp> ops = s.Plan();
  CHECK(FindOp(ops, "cp_ulysses_q")->calls_bwd == 2);
  CHECK(FindOp(ops, "tp_attn_allgather")->calls_bwd == 1);
  CHECK(FindOp(ops, "moe_dispatch")->calls_bwd == 1);

  const auto only = [](RecomputeModule m) { return Recompute::Modules(1u << int(m)); };
  s.layout.recompute = only(RecomputeModule::kMoe);
  ops = s.Plan();
  CHECK(FindOp(ops, "moe_token_counts")->calls_bwd == 1);  // 0 without recompute
  CHECK(FindOp(ops, "moe_dispatch")->calls_bwd == 2);
  CHECK(FindOp(ops, "moe_dispatch_probs")->calls_bwd == 2);
  CHECK(FindOp(ops, "moe_combine")->calls_bwd == 2);
  CHECK(FindOp(ops, "tp_shared_allgather")->calls_bwd == 2);
  CHECK(FindOp(ops, "tp_shared_reducescatter")->calls_bwd == 2);
  CHECK(FindOp(ops, "tp_shared_regather")->calls_bwd == 1);
  CHECK(FindOp(ops, "tp_attn_allgather")->calls_bwd == 1);
  CHECK(FindOp(ops, "cp_ulysses_q")->calls_bwd == 1);
  s.layout.etp = 2;  // the ETP all-gather / reduce-scatter too
  s.layout.ep = 4;
  ops = s.Plan();
  CHECK(FindOp(ops, "moe_etp_allgather")->calls_bwd == 1);
  CHECK(FindOp(ops, "moe_etp_reducescatter")->calls_bwd == 1);
  CHECK(FindOp(ops, "moe_etp_allgather_grad")->calls_bwd == 1);  // the backward's own, once
  s.layout.etp = 1;
  s.layout.ep = 8;

  s.layout.recompute = only(RecomputeModule::kSharedExperts);
  ops = s.Plan();
  CHECK(FindOp(ops, "tp_shared_allgather")->calls_bwd == 2);
  CHECK(FindOp(ops, "moe_dispatch")->calls_bwd == 1);

  s.layout.recompute = Recompute::None();
  const std::vector<CommOp> reference = s.Plan();
  for (RecomputeModule quiet : {RecomputeModule::kLayernorm, RecomputeModule::kMoeAct, RecomputeModule::kMlaUpProj}) {
    CAPTURE(Name(quiet));
    s.layout.recompute = only(quiet);
    ops = s.Plan();
    REQUIRE(ops.size() == reference.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      CAPTURE(ops[i].name);
      CHECK(ops[i].calls_bwd == reference[i].calls_bwd);
    }
  }

  s.layout.recompute = Recompute::Full();  // the whole layer
  ops = s.Plan();
  CHECK(FindOp(ops, "cp_ulysses_q")->calls_bwd == 2);
  CHECK(FindOp(ops, "tp_attn_allgather")->calls_bwd == 2);
  CHECK(FindOp(ops, "tp_attn_regather")->calls_bwd == 1);
  CHECK(FindOp(ops, "moe_dispatch")->calls_bwd == 2);
  CHECK(FindOp(ops, "moe_token_counts")->calls_bwd == 1);
  CHECK(FindOp(ops, "tp_shared_allgather")->calls_bwd == 2);
  CHECK(FindOp(ops, "pp_send_recv")->calls_bwd == 1);

  // A dense model's `mlp` module: the dense MLP's TP pair once more.
  s.model = MakeDense();
  s.layout.ep = 1;
  s.layout.edp = 4;
  s.layout.etp = 2;
  s.layout.recompute = only(RecomputeModule::kMlp);
  ops = s.Plan();
  CHECK(FindOp(ops, "tp_mlp_allgather")->calls_bwd == 2);
  CHECK(FindOp(ops, "tp_mlp_reducescatter")->calls_bwd == 2);
  CHECK(FindOp(ops, "tp_attn_allgather")->calls_bwd == 1);
}

TEST_CASE("a plan without recomputation, given a recompute set's calls, is that recompute set's plan") {
  // AddRecomputeCalls: recomputation only adds forward calls to the
  // backward, so the plan without it, each op's rerun_calls added where the
  // set reruns the op's block, is the set's own plan, every field bit for
  // bit, and holds the same ops. Over every subset of the seven modules and
  // full recomputation, on each dispatcher, CP style, ETP and overlap, on a
  // model with dense and MoE layers and a shared expert. It fails if an
  // op's presence or any field but calls_bwd hangs on the recompute set (the
  // builders add the recompute calls through AddRecomputeCalls too; which
  // blocks rerun what, and a block it misses: the test above). So are each
  // op's seconds per micro-batch with the set's calls counted in
  // (SecondsPerMicrobatch) and the plan's sums the schedule reads (SumPlan),
  // which let a search score every recompute set on one uncopied plan.
  MixtralSetup s;
  s.model.moe->shared_experts = 1;
  s.model.moe->shared_ffn_hidden = 14336;
  s.model.moe->first_k_dense = 1;
  s.model.ffn_hidden = 14336;
  s.layout.a2a_overlap = true;
  std::vector<Recompute> sets = {Recompute::Full()};
  for (uint32_t modules = 0; modules < (1u << kRecomputeModuleCount); ++modules)
    sets.push_back(Recompute::Modules(modules));
  int compared = 0;
  for (const Dispatcher dispatcher :
       {Dispatcher::kAllToAll, Dispatcher::kAllGather, Dispatcher::kDeepEP, Dispatcher::kHybridEP}) {
    for (const CpStyle style : {CpStyle::kUlysses, CpStyle::kRing}) {
      for (const int etp : {1, 2}) {
        CAPTURE(Name(dispatcher));
        CAPTURE(etp);
        s.layout.dispatcher = dispatcher;
        s.layout.cp_style = style;
        s.layout.etp = etp;
        s.layout.ep = 8 / etp;
        s.layout.tp_overlap = etp == 2;
        s.layout.recompute = Recompute::None();
        const std::vector<CommOp> without = s.Plan();
        REQUIRE(!without.empty());
        for (const Recompute& set : sets) {
          s.layout.recompute = set;
          const std::vector<CommOp> own = s.Plan();
          std::vector<CommOp> given = without;
          AddRecomputeCalls(set, &given);
          REQUIRE(given.size() == own.size());
          for (size_t i = 0; i < own.size(); ++i) {
            RequireSameOp(own[i], given[i]);
            ++compared;
            CHECK(SecondsPerMicrobatch(without[i], RerunBlocks(set)) == own[i].seconds_per_microbatch());
          }
          // What the schedule reads of the plan (SumPlan), from the plan
          // without recomputation and the set, is the set's plan's.
          for (const bool mtp_moe : {false, true}) {
            const PlanSums a = SumPlan(without, mtp_moe, set);
            const PlanSums b = SumPlan(own, mtp_moe, Recompute::None());
            for (size_t k = 0; k < kBlockKindCount; ++k) {
              CHECK(a.blocks[k].exposed_s == b.blocks[k].exposed_s);
              CHECK(a.blocks[k].hidden_s == b.blocks[k].hidden_s);
              CHECK(a.blocks[k].paired_s == b.blocks[k].paired_s);
              CHECK(a.blocks[k].dispatch_fwd_s == b.blocks[k].dispatch_fwd_s);
              CHECK(a.blocks[k].combine_fwd_s == b.blocks[k].combine_fwd_s);
              CHECK(a.blocks[k].dispatch_bwd_s == b.blocks[k].dispatch_bwd_s);
              CHECK(a.blocks[k].combine_bwd_s == b.blocks[k].combine_bwd_s);
              CHECK(a.blocks[k].paired_sms == b.blocks[k].paired_sms);
            }
            CHECK(a.crossing_s == b.crossing_s);
            CHECK(a.dp_reduce_s == b.dp_reduce_s);
            CHECK(a.dp_gather_s == b.dp_gather_s);
          }
        }
      }
    }
  }
  CHECK(compared > 10000);
}

TEST_CASE("the per-layer ops and the rest, in turn, are the plan; layouts differing only in their pipeline share the first") {
  // BuildLayerCommOps, AddStepCommOps and AddRecomputeCalls give
  // BuildCommPlan's ops, every field bit for bit, and the first step reads
  // no pipeline: layouts that differ only in vpp, stages, schedule and
  // recompute set (equal LayerCommKeyOf) get the same per-layer ops on one
  // placement, while their data-parallel ops (the largest pipeline rank's
  // parameters) and recompute calls differ. What lets a search build a
  // placement's per-layer ops once for every pipeline of a run
  // (CostModel::CommPlanOf).
  MixtralSetup s;
  s.model.moe->first_k_dense = 1;
  s.model.ffn_hidden = 14336;
  struct Pipe {
    int vpp;
    std::vector<int> stage_layers;
    Recompute recompute;
    std::optional<PipelineSchedule> schedule;
  };
  const std::vector<Pipe> pipes = {
      {1, {8, 8, 8, 8}, Recompute::None(), std::nullopt},
      {1, {5, 9, 9, 9}, Recompute::Selective(), std::nullopt},
      {2, {4, 4, 4, 4, 4, 4, 4, 4}, Recompute::Full(), std::nullopt},
      {2, {2, 5, 5, 5, 5, 5, 5, 0}, Recompute::None(), PipelineSchedule::kInterleaved1F1B},
  };
  int compared = 0;
  for (const Dispatcher dispatcher : {Dispatcher::kAllToAll, Dispatcher::kDeepEP}) {
    for (const CpStyle style : {CpStyle::kUlysses, CpStyle::kRing}) {
      for (const bool fsdp : {false, true}) {
        CAPTURE(Name(dispatcher));
        CAPTURE(fsdp);
        s.layout.dispatcher = dispatcher;
        s.layout.cp_style = style;
        s.layout.fsdp = fsdp;
        const LayoutPlacement placement = PlaceGroups(s.layout, s.topo).value();
        std::vector<CommOp> first_layer_ops;
        std::vector<double> dp_bytes;  // of each pipeline's plan, its per-step ops' bytes summed
        for (const Pipe& p : pipes) {
          Layout l = s.layout;
          l.vpp = p.vpp;
          l.stage_layers = p.stage_layers;
          l.recompute = p.recompute;
          l.schedule = p.schedule;
          REQUIRE(LayerCommKeyOf(l) == LayerCommKeyOf(s.layout));
          const PipelineDescription pipeline = DescribePipeline(l, s.model);
          const std::vector<CommOp> whole = BuildCommPlan(l, s.ctx(), placement, pipeline);
          std::vector<CommOp> ops;
          BuildLayerCommOps(l, s.ctx(), placement, nullptr, &ops);
          if (first_layer_ops.empty()) first_layer_ops = ops;
          REQUIRE(ops.size() == first_layer_ops.size());
          for (size_t i = 0; i < ops.size(); ++i) {
            RequireSameOp(first_layer_ops[i], ops[i]);
            ++compared;
          }
          AddStepCommOps(l, s.ctx(), placement, pipeline, nullptr, &ops);
          AddRecomputeCalls(l.recompute, &ops);
          REQUIRE(ops.size() == whole.size());
          double dp = 0;
          for (size_t i = 0; i < ops.size(); ++i) {
            RequireSameOp(whole[i], ops[i]);
            ++compared;
            if (ops[i].scope == CommOp::kPerStep) dp += ops[i].bytes;
          }
          dp_bytes.push_back(dp);
        }
        // Without FSDP the pipelines' data-parallel volumes differ (so the
        // second step reads the pipeline); FSDP's are per layer, none per step.
        if (!fsdp) CHECK(dp_bytes[0] != dp_bytes[1]);
        if (fsdp) CHECK(dp_bytes[0] == 0);
      }
    }
  }
  CHECK(compared > 500);
}

TEST_CASE("TP communication overlap makes the TP all-gathers and reduce-scatters overlappable") {
  // --tp-comm-overlap (Transformer Engine userbuffers) pipelines each TP
  // all-gather with the column-parallel GEMM it feeds and each
  // reduce-scatter with the row-parallel GEMM that produces it, forward and
  // backward: the same bytes and seconds, now hidden behind the block.
  MixtralSetup s;
  const std::vector<CommOp> plain = s.Plan();
  s.layout.tp_overlap = true;
  const std::vector<CommOp> overlapped = s.Plan();
  REQUIRE(plain.size() == overlapped.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    CAPTURE(plain[i].name);
    CHECK(overlapped[i].bytes == plain[i].bytes);
    CHECK(overlapped[i].seconds_per_call == plain[i].seconds_per_call);
    const bool tp = plain[i].kind == CommKind::kTensorParallel;
    CHECK(overlapped[i].overlappable == (tp || plain[i].overlappable));
  }
  CHECK_FALSE(FindOp(plain, "tp_attn_allgather")->overlappable);
  CHECK(FindOp(overlapped, "tp_attn_allgather")->overlappable);
  CHECK(FindOp(overlapped, "tp_attn_reducescatter")->overlappable);
  CHECK_FALSE(FindOp(overlapped, "cp_ulysses_q")->overlappable);  // CP is not TP
}

TEST_CASE("an interleaved pipeline keeps one op for one boundary crossing") {
  // One crossing moves a micro-batch's [mbs x S/(CP TP), H] activation one
  // way and its gradient the other: 1 x 4096/(2 x 2) x 4096 x 2 bytes =
  // 8 MiB. With vpp 2 the micro-batch crosses pp x vpp - 1 = 7 boundaries
  // instead of 3, each the same message: the op stays one crossing (the
  // schedule counts the crossings), so its bytes and calls do not change.
  MixtralSetup s;
  const CommOp one = *FindOp(s.Plan(), "pp_send_recv");
  s.layout.vpp = 2;
  const std::vector<CommOp> ops = s.Plan();
  int count = 0;
  for (const CommOp& op : ops) count += op.scope == CommOp::kPerStageBoundary;
  CHECK(count == 1);
  const CommOp* pp = FindOp(ops, "pp_send_recv");
  REQUIRE(pp);
  CHECK(pp->bytes == 1024.0 * 4096 * 2);
  CHECK(pp->bytes == one.bytes);
  CHECK(pp->calls_fwd == 1);
  CHECK(pp->calls_bwd == 1);
  CHECK(pp->seconds_per_call == one.seconds_per_call);
  // mbs 2 doubles the message.
  s.layout.mbs = 2;
  CHECK(FindOp(s.Plan(), "pp_send_recv")->bytes == 2 * one.bytes);
}

TEST_CASE("dense model: MLP TP traffic, no MoE ops; no distributed optimizer: all-reduce") {
  MixtralSetup s;
  s.model = MakeDense();
  s.layout.ep = 1;
  s.layout.etp = 2;
  s.layout.edp = 4;
  s.job.distributed_optimizer = false;
  const std::vector<CommOp> ops = s.Plan();
  CHECK(FindOp(ops, "tp_mlp_allgather") != nullptr);
  CHECK(FindOp(ops, "tp_mlp_allgather")->scope == CommOp::kPerDenseLayer);
  for (const CommOp& op : ops) CHECK(op.kind != CommKind::kExpertParallel);
  CHECK(FindOp(ops, "dp_grad_reducescatter") == nullptr);
  REQUIRE(FindOp(ops, "dp_grad_allreduce"));
  CHECK(FindOp(ops, "dp_grad_allreduce")->collective == Collective::kAllReduce);
  CHECK(FindOp(ops, "edp_grad_allreduce") == nullptr);  // no expert parameters
}

TEST_CASE("data-parallel volumes agree with the model's parameter count") {
  // pp 1, tp 1: the only stage holds everything, so dense + expert parameters
  // per rank x EP = ModelSpec::total_params(). DeepSeek-V3 (MLA, shared
  // experts, 3 dense layers) on 8 DGX nodes: dp 64, ep 64, edp 1... use ep 32
  // so that EDP = 2 reduces the experts too.
  Result<ModelSpec> model = LoadModel(std::string(FOLDPLAN_SOURCE_DIR) + "/data/models/deepseek-v3.json");
  REQUIRE_MESSAGE(model.ok(), model.status().message());
  MixtralSetup s;
  s.cluster = MakeCluster(8);
  s.topo = MustBuild(s.cluster);
  s.params = DefaultCommParams(s.cluster);
  s.model = *model;
  s.layout = Layout{};
  s.layout.world = 64;
  s.layout.dp = 64;
  s.layout.ep = 32;
  s.layout.edp = 2;
  const std::vector<CommOp> ops = s.Plan();
  const CommOp* dense = FindOp(ops, "dp_grad_reducescatter");
  const CommOp* expert = FindOp(ops, "edp_grad_reducescatter");
  REQUIRE(dense);
  REQUIRE(expert);
  // total_params() leaves out DeepSeek-V3's MTP module, whose parameters
  // are trained and reduced too: one MoE decoder layer plus eh_proj
  // (2H -> H) and three norms (enorm, hnorm, its final norm).
  REQUIRE(model->mtp_layers == 1);
  const double mtp = double(model->layer_params(true).total()) + 2.0 * 7168 * 7168 + 3 * 7168;
  CHECK(dense->bytes / 4 + expert->bytes / 4 * 32 == doctest::Approx(double(model->total_params()) + mtp));
  // The shared experts and 3 dense layers are dense parameters: routed
  // experts alone are (58 + 1 MTP) MoE layers x 256 x 3 x 7168 x 2048.
  CHECK(expert->bytes / 4 * 32 == doctest::Approx(59.0 * 256 * 3 * 7168 * 2048));

  // MLA under Ulysses: q and k heads of 192 (128 nope + 64 rope), v of 128.
  s.layout.cp = 2;
  s.layout.dp = 32;
  const std::vector<CommOp> cp_ops = s.Plan();
  const double tokens = 4096.0 / 2;
  CHECK(FindOp(cp_ops, "cp_ulysses_q")->bytes == tokens * 128 * 192 * 2);
  CHECK(FindOp(cp_ops, "cp_ulysses_k")->bytes == tokens * 128 * 192 * 2);
  CHECK(FindOp(cp_ops, "cp_ulysses_v")->bytes == tokens * 128 * 128 * 2);
  CHECK(FindOp(cp_ops, "cp_ulysses_out")->bytes == tokens * 128 * 128 * 2);
}

TEST_CASE("a layout the placement refuses gives an empty plan") {
  MixtralSetup s;
  s.layout.world = 64;  // degrees no longer multiply out
  CHECK(s.Plan().empty());
}

}  // namespace
}  // namespace foldplan
