// The flex dispatcher (DeepEP, HybridEP) in the communication plan
// (costmodel/comm_plan.h): how many copies of a token cross each tier, the
// bytes and seconds of dispatch and combine, fp8 dispatch, the SMs the
// kernels hold, and the EP overlap marks. Each test states the arithmetic,
// then checks the number it implies. Derivations: doc/cost-model-comm.md
// section 6 ("Flex dispatcher").
#include <cmath>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "costmodel_comm_fixtures.h"
#include "costmodel/comm_params.h"
#include "costmodel/comm_plan.h"
#include "fixtures.h"
#include "inputs/loader.h"
#include "planner/group_placement.h"
#include "topology/topology.h"
#include "topology_fixtures.h"
#include "shipped_model.h"

namespace foldplan {
namespace {

using testing::MustBuild;

using testing::FindOp;
using Setup = testing::CommSetup;

// P(a set of `held` of E experts receives a token's K distinct experts),
// written out: 1 - prod_{i<K} (E - held - i) / (E - i).
double Hit(double experts, int top_k, double held) {
  double none = 1;
  for (int i = 0; i < top_k; ++i) none *= (experts - held - i) / (experts - i);
  return 1 - none;
}

using foldplan::testing::ShippedModel;

// One plan on its own cluster: the context the plan builder reads.

// DeepSeek-V3 (H 7168, 256 experts, top 8) with EP 64 over 8 DGX H100 nodes
// (tp 1, dp 64, pp 1; S 4096, mbs 1: T = 4096 tokens per rank).
Setup DeepSeekEp64() {
  Setup s(testing::DgxH100(8), ShippedModel("deepseek-v3"));
  s.layout.world = 64;
  s.layout.dp = 64;
  s.layout.ep = 64;
  s.layout.edp = 1;
  s.layout.dispatcher = Dispatcher::kDeepEP;
  return s;
}

TEST_CASE("distinct destination GPUs and NVLink domains for uniform top-k routing") {
  // DeepSeek-V3 on EP 64 over 8 domains of 8: a GPU holds 4 experts, a
  // domain 32. A token reaches
  //   gpus    = 64 x (1 - C(252, 8) / C(256, 8)) = 7.676 distinct GPUs,
  //   network = 7 x (1 - C(224, 8) / C(256, 8)) = 4.633 remote domains (one
  //             RDMA copy each, instead of the 7.676 x 56/64 = 6.72 copies
  //             of the GPUs off its node),
  //   nvlink  = 7.676 x 7/8 = 6.717 NVLink copies per token a forwarder
  //             sends (every destination GPU but the entry GPU of its
  //             domain, which the RDMA copy, or the source itself, reaches).
  GroupSpan span;
  span.gpus = 64;
  span.domains = 8;
  span.min_per_domain = span.max_per_domain = 8;
  const FlexTokenCopies c = ExpectedFlexCopies(256, 8, 64, 1, span);
  CHECK(c.gpus == doctest::Approx(64 * Hit(256, 8, 4)));
  CHECK(c.gpus == doctest::Approx(ExpectedDistinctRanks(256, 8, 64)));
  CHECK(c.gpus == doctest::Approx(7.676).epsilon(0.0005));
  CHECK(c.network == doctest::Approx(7 * Hit(256, 8, 32)));
  CHECK(c.network == doctest::Approx(4.633).epsilon(0.0005));
  CHECK(c.domains == doctest::Approx(8 * Hit(256, 8, 32)));
  CHECK(c.nvlink == doctest::Approx(c.gpus * 7 / 8));

  // One domain (HybridEP, or EP inside a node): nothing crosses the
  // network; a copy for the token's own GPU stays there: nvlink = gpus x
  // (n-1)/n. Mixtral's 8 experts top 2 on 8 GPUs: exactly 2 GPUs, 1.75 copies.
  GroupSpan node;
  node.gpus = 8;
  node.domains = 1;
  node.min_per_domain = node.max_per_domain = 8;
  const FlexTokenCopies one = ExpectedFlexCopies(8, 2, 8, 1, node);
  CHECK(one.gpus == doctest::Approx(2));
  CHECK(one.network == 0);
  CHECK(one.domains == 1);
  CHECK(one.nvlink == doctest::Approx(1.75));

  // ETP 2 x EP 8 over 2 domains of 8: each chosen expert's 2 shards receive
  // the token, a GPU holds E/8 experts' shards, a domain 8/2 = 4 EP ranks'
  // experts (E/2). 64 experts top 4:
  //   gpus = 16 x (1 - C(56, 4)/C(64, 4)), network = 1 x (1 - C(32, 4)/C(64, 4)).
  GroupSpan etp = node;
  etp.gpus = 16;
  etp.domains = 2;
  const FlexTokenCopies sharded = ExpectedFlexCopies(64, 4, 8, 2, etp);
  CHECK(sharded.gpus == doctest::Approx(16 * Hit(64, 4, 8)));
  CHECK(sharded.gpus == doctest::Approx(2 * ExpectedDistinctRanks(64, 4, 8)));
  CHECK(sharded.network == doctest::Approx(Hit(64, 4, 32)));
  CHECK(sharded.nvlink == doctest::Approx(sharded.gpus * 7 / 8));

  // One rank per domain: every copy goes over RDMA straight to its GPU,
  // nothing is forwarded.
  GroupSpan spread;
  spread.gpus = 8;
  spread.domains = 8;
  spread.min_per_domain = spread.max_per_domain = 1;
  const FlexTokenCopies direct = ExpectedFlexCopies(64, 8, 8, 1, spread);
  CHECK(direct.nvlink == 0);
  CHECK(direct.network == doctest::Approx(7 * Hit(64, 8, 8)));

  // Uneven domains: a rank of the emptiest (2 of 10 ranks, 4 domains) sends
  // to the other 3, holding 8/3 ranks each on average; forwarders of the
  // fullest (3) domain send (3-1)/3 of the destination GPUs. 40 experts top 6.
  GroupSpan uneven;
  uneven.gpus = 10;
  uneven.domains = 4;
  uneven.min_per_domain = 2;
  uneven.max_per_domain = 3;
  const FlexTokenCopies u = ExpectedFlexCopies(40, 6, 10, 1, uneven);
  CHECK(u.network == doctest::Approx(3 * Hit(40, 6, 4.0 * 8 / 3)));
  CHECK(u.nvlink == doctest::Approx(10 * Hit(40, 6, 4) * 2 / 3));
}

TEST_CASE("DeepEP on DeepSeek-V3 EP64: one RDMA copy per remote node, the slower tier sets the time") {
  const Setup s = DeepSeekEp64();
  const std::vector<CommOp> ops = s.Plan();
  // Per token copy of the forward dispatch: the bf16 token 7168 x 2 bytes
  // + its top-8 indices (int64) and weights (fp32): 8 x 12 = 96 bytes.
  // Per rank: T = 4096 tokens, network = 7 Hit(256, 8, 32) copies, nvlink
  // = 64 Hit(256, 8, 4) x 7/8 copies.
  const double copy = 7168 * 2 + 96;
  const double network = 4096 * 7 * Hit(256, 8, 32) * copy;
  const double nvlink = 4096 * 64 * Hit(256, 8, 4) * 7 / 8 * copy;
  const CommOp* dispatch = FindOp(ops, "moe_flex_dispatch");
  REQUIRE(dispatch);
  CHECK(dispatch->group == GroupKind::kTpEp);
  CHECK(dispatch->scope == CommOp::kPerMoeLayer);
  CHECK(dispatch->network_bytes == doctest::Approx(network));  // 273.9 MB
  CHECK(dispatch->bytes == doctest::Approx(network + nvlink));  // + 397.1 MB
  CHECK(dispatch->network_bytes == doctest::Approx(273.9e6).epsilon(0.001));
  // Concurrent tiers: 273.9 MB / 47.5 GB/s (a 400 Gbit/s NIC at 0.95 of
  // its line, CommParams::network_efficiency) = 5.77 ms through the NIC
  // against 397.1 MB / 370.8 GB/s = 1.07 ms over NVLink; latency 8.4 +
  // 3.4 + 14 us (a p2p Simple transfer's, one hop per tier, in series).
  CHECK(dispatch->seconds_per_call == doctest::Approx(25.8e-6 + network / 47.5e9));
  CHECK(std::string(dispatch->algorithm) == "flex/rdma+nvlink");
  // Forward dispatch and combine once each; the backward runs the mirror
  // images: the combine's backward dispatches the output gradient (bf16,
  // no top-k), the dispatch's backward combines the input gradient with the
  // probabilities' gradient (K x 4 bytes).
  CHECK(dispatch->calls_fwd == 1);
  CHECK(dispatch->calls_bwd == 0);
  const CommOp* combine = FindOp(ops, "moe_flex_combine");
  REQUIRE(combine);
  CHECK(combine->network_bytes == doctest::Approx(network / copy * 7168 * 2));
  CHECK(combine->calls_fwd == 1);
  const CommOp* dispatch_grad = FindOp(ops, "moe_flex_dispatch_grad");
  REQUIRE(dispatch_grad);
  CHECK(dispatch_grad->bytes == doctest::Approx(combine->bytes));
  CHECK(dispatch_grad->calls_fwd == 0);
  CHECK(dispatch_grad->calls_bwd == 1);
  const CommOp* combine_grad = FindOp(ops, "moe_flex_combine_grad");
  REQUIRE(combine_grad);
  CHECK(combine_grad->network_bytes == doctest::Approx(network / copy * (7168 * 2 + 8 * 4)));
  CHECK(combine_grad->calls_bwd == 1);
  // Before the dispatch, the counts per rank and per expert (int32) go to
  // every peer: (64 + 256) x 4 bytes, latency-bound.
  const CommOp* notify = FindOp(ops, "moe_flex_notify");
  REQUIRE(notify);
  CHECK(notify->bytes == (64 + 256) * 4);
  CHECK(notify->collective == Collective::kAllToAll);
  CHECK(notify->calls_fwd == 1);
  CHECK(notify->calls_bwd == 0);
  CHECK(notify->seconds_per_call < 20e-6);
  // No NCCL all-to-all dispatcher ops.
  CHECK(FindOp(ops, "moe_dispatch") == nullptr);
  CHECK(FindOp(ops, "moe_token_counts") == nullptr);

  // The all-to-all dispatcher sends every (token, expert) pair: T K H b =
  // 4096 x 8 x 14336 = 469.8 MB, of which 56/64 leave the node: 411 MB /
  // 47.5 GB/s = 8.66 ms. DeepEP's node deduplication moves 4.633 / 7 = 0.662
  // of the network copies; 0.67x the time.
  Setup a2a = DeepSeekEp64();
  a2a.layout.dispatcher = Dispatcher::kAllToAll;
  const std::vector<CommOp> a2a_ops = a2a.Plan();
  const CommOp* nccl = FindOp(a2a_ops, "moe_dispatch");
  REQUIRE(nccl);
  CHECK(nccl->bytes == 4096.0 * 8 * 7168 * 2);
  CHECK(nccl->seconds_per_call == doctest::Approx(22.4e-6 + nccl->bytes * 56 / 64 / 47.5e9));
  CHECK(dispatch->seconds_per_call / nccl->seconds_per_call == doctest::Approx(0.668).epsilon(0.005));
}

TEST_CASE("routing imbalance and capacity factor scale both tiers of the flex dispatch") {
  Setup s = DeepSeekEp64();
  const CommOp balanced = *FindOp(s.Plan(), "moe_flex_dispatch");
  s.job.routing_imbalance = 1.3;  // the busiest rank sends and receives 1.3 x the mean
  const CommOp skewed = *FindOp(s.Plan(), "moe_flex_dispatch");
  CHECK(skewed.bytes == doctest::Approx(1.3 * balanced.bytes));
  CHECK(skewed.network_bytes == doctest::Approx(1.3 * balanced.network_bytes));
  CHECK(FindOp(s.Plan(), "moe_flex_notify")->bytes == (64 + 256) * 4);  // counts do not scale
  s.job.capacity_factor = 1.1;  // padded to capacity: 1.1 x the mean, whatever the imbalance
  CHECK(FindOp(s.Plan(), "moe_flex_combine")->network_bytes ==
        doctest::Approx(1.1 * FindOp(DeepSeekEp64().Plan(), "moe_flex_combine")->network_bytes));
}

TEST_CASE("fp8 dispatch: 1 byte per element plus its scales; combine stays bf16") {
  // DeepEP's fp8 dispatch sends e4m3 values with one fp32 scale per 1x128
  // channel block: 7168 x 1 + 7168 / 128 x 4 = 7392 bytes per token, + 96
  // of top-k = 7488 against bf16's 14432. MXFP8's E8M0 byte per 32
  // elements is the same 1/32 byte per element. Combine and both backward
  // ops move bf16 gradients: unchanged.
  Setup bf16 = DeepSeekEp64();
  const std::vector<CommOp> plain = bf16.Plan();
  for (Precision p : {Precision::kFP8Blockwise, Precision::kFP8Tensorwise, Precision::kFP8Delayed, Precision::kMXFP8}) {
    CAPTURE(Name(p));
    Setup s = DeepSeekEp64();
    s.layout.precision = p;
    const std::vector<CommOp> ops = s.Plan();
    CHECK(FindOp(ops, "moe_flex_dispatch")->bytes ==
          doctest::Approx(FindOp(plain, "moe_flex_dispatch")->bytes * 7488 / 14432));
    for (const char* name : {"moe_flex_combine", "moe_flex_dispatch_grad", "moe_flex_combine_grad"})
      CHECK(FindOp(ops, name)->bytes == FindOp(plain, name)->bytes);
  }
  // The all-to-all dispatcher casts inside the GEMM, after the all-to-all:
  // bf16 on the wire under every recipe.
  Setup a2a = DeepSeekEp64();
  a2a.layout.dispatcher = Dispatcher::kAllToAll;
  const double bytes = FindOp(a2a.Plan(), "moe_dispatch")->bytes;
  a2a.layout.precision = Precision::kFP8Blockwise;
  CHECK(FindOp(a2a.Plan(), "moe_dispatch")->bytes == bytes);
}

TEST_CASE("HybridEP inside an NVL72 rack: NVLink only") {
  // Qwen3-235B (H 4096, 128 experts, top 8) with EP 64 on 64 GPUs of one
  // GB200 NVL72 rack (one NVLink domain), tp 1: T = 4096. A GPU holds 2
  // experts: gpus = 64 x Hit(128, 8, 2) = 7.59, nvlink = gpus x 63/64.
  // 4096 x 7.47 x (8192 + 96) bytes = 253.5 MB at 721.8 GB/s (NVLink 5 as
  // NCCL models it), latency 8.4 + 3.4 us.
  Setup s(testing::Nvl72(1), ShippedModel("qwen3-235b-a22b"));
  s.layout.world = 64;
  s.layout.dp = 64;
  s.layout.ep = 64;
  s.layout.edp = 1;
  s.layout.dispatcher = Dispatcher::kHybridEP;
  const std::vector<CommOp> ops = s.Plan();
  const CommOp* dispatch = FindOp(ops, "moe_flex_dispatch");
  REQUIRE(dispatch);
  const double gpus = 64 * Hit(128, 8, 2);
  const double bytes = 4096 * gpus * 63 / 64 * (4096 * 2 + 96);
  CHECK(dispatch->bytes == doctest::Approx(bytes));
  CHECK(dispatch->network_bytes == 0);
  CHECK(dispatch->seconds_per_call == doctest::Approx(11.8e-6 + bytes / 721.8e9));
  CHECK(std::string(dispatch->algorithm) == "flex/nvlink");
  // Inside one domain the deduplication saves only the copies for a
  // token's own GPU: 7.59 x 63/64 = 7.47 copies against the all-to-all
  // dispatcher's 8 x 63/64, so about the same time.
  Setup a2a(testing::Nvl72(1), ShippedModel("qwen3-235b-a22b"));
  a2a.layout = s.layout;
  a2a.layout.dispatcher = Dispatcher::kAllToAll;
  const std::vector<CommOp> a2a_ops = a2a.Plan();
  const CommOp* nccl = FindOp(a2a_ops, "moe_dispatch");
  REQUIRE(nccl);
  CHECK(dispatch->seconds_per_call < nccl->seconds_per_call);
  CHECK(dispatch->seconds_per_call > 0.9 * nccl->seconds_per_call);
}

TEST_CASE("flex ops hold the job's DeepEP or HybridEP SMs, the alltoall dispatcher's NCCL all-to-alls 16") {
  // --moe-deepep-num-sms / --moe-hybridep-num-sms: every flex kernel,
  // the count exchange included, runs on that many SMs; no other op holds SMs.
  Setup s = DeepSeekEp64();
  s.job.deepep_sms = 24;
  s.job.hybridep_sms = 12;
  for (Dispatcher d : {Dispatcher::kDeepEP, Dispatcher::kHybridEP}) {
    CAPTURE(Name(d));
    s.layout.dispatcher = d;
    const int expected = d == Dispatcher::kDeepEP ? 24 : 12;
    int flex = 0;
    for (const CommOp& op : s.Plan()) {
      CAPTURE(op.name);
      const bool is_flex = std::string(op.name).rfind("moe_flex_", 0) == 0;
      flex += is_flex;
      CHECK(op.sms == (is_flex ? expected : 0));
    }
    CHECK(flex == 5);
  }
  // The alltoall dispatcher's all-to-alls: NCCL's p2p channels, one SM
  // each, 16 on a DGX H100 node (comm_plan.cc kNcclAllToAllSms); its
  // token-count all-gather and every other op hold none here.
  s.layout.dispatcher = Dispatcher::kAllToAll;
  int all_to_all = 0;
  for (const CommOp& op : s.Plan()) {
    CAPTURE(op.name);
    const std::string name = op.name;
    const bool a2a = name == "moe_dispatch" || name == "moe_dispatch_probs" || name == "moe_combine";
    all_to_all += a2a;
    CHECK(op.sms == (a2a ? 16 : 0));
  }
  CHECK(all_to_all == 3);
}

TEST_CASE("EP overlap hides dispatch and combine behind the other micro-batch, not the token counts") {
  // --overlap-moe-expert-parallel-comm: the all-to-alls (and the flex
  // dispatch/combine, forward and backward) run on a communication stream
  // beside another micro-batch's compute. The count exchange ends in a
  // device-to-host sync the host waits for: exposed. ETP collectives run
  // with the experts on the compute stream: exposed.
  Setup s = DeepSeekEp64();
  s.layout.a2a_overlap = true;
  for (const CommOp& op : s.Plan()) {
    CAPTURE(op.name);
    const std::string name = op.name;
    const bool hides = name.rfind("moe_flex_", 0) == 0 && name != "moe_flex_notify";
    CHECK(op.hides_behind_other_microbatch == hides);
    if (hides) CHECK_FALSE(op.overlappable);  // the schedule owns how much hides
    // The phase each call runs in (schedule.h): the combine and the
    // combine's backward (moe_flex_dispatch_grad) are the combine's; the
    // dispatch and its backward (moe_flex_combine_grad) the dispatch's.
    CHECK(op.combine == (name == "moe_flex_combine" || name == "moe_flex_dispatch_grad"));
  }
  s.layout.dispatcher = Dispatcher::kAllToAll;
  s.layout.ep = 32;  // ETP 2 x EP 32 = the 64 GPUs of TP x EP
  s.layout.etp = 2;
  s.layout.edp = 1;
  const std::vector<CommOp> ops = s.Plan();
  for (const char* name : {"moe_dispatch", "moe_dispatch_probs", "moe_combine"}) {
    CAPTURE(name);
    REQUIRE(FindOp(ops, name));
    CHECK(FindOp(ops, name)->hides_behind_other_microbatch);
    CHECK(FindOp(ops, name)->combine == (std::string(name) == "moe_combine"));
  }
  for (const char* name : {"moe_token_counts", "moe_etp_allgather", "moe_etp_reducescatter"}) {
    CAPTURE(name);
    REQUIRE(FindOp(ops, name));
    CHECK_FALSE(FindOp(ops, name)->hides_behind_other_microbatch);
  }
  // Without the flag nothing is marked.
  s.layout.a2a_overlap = false;
  for (const CommOp& op : s.Plan()) CHECK_FALSE(op.hides_behind_other_microbatch);
}

TEST_CASE("moe recompute repeats the forward dispatch, combine and count exchange") {
  // The `moe` module checkpoints the whole MoE layer: its backward reruns
  // the forward dispatch and combine (and their count exchange) before the
  // gradient ones. Full recomputation does the same.
  Setup s = DeepSeekEp64();
  for (Recompute r : {Recompute::Modules(1u << int(RecomputeModule::kMoe)), Recompute::Full()}) {
    CAPTURE(Name(r));
    s.layout.recompute = r;
    const std::vector<CommOp> ops = s.Plan();
    CHECK(FindOp(ops, "moe_flex_notify")->calls_bwd == 1);
    CHECK(FindOp(ops, "moe_flex_dispatch")->calls_bwd == 1);
    CHECK(FindOp(ops, "moe_flex_combine")->calls_bwd == 1);
    CHECK(FindOp(ops, "moe_flex_dispatch_grad")->calls_bwd == 1);
    CHECK(FindOp(ops, "moe_flex_combine_grad")->calls_bwd == 1);
  }
}

}  // namespace
}  // namespace foldplan
