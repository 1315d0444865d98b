// Each legality rule of doc/folding.md section 2 with a passing and a failing case.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "fixtures.h"
#include "planner/legality.h"
#include "planner_random_layout.h"

using namespace foldplan;
using namespace foldplan::testing;

namespace {

struct Case {
  ClusterSpec cluster = MakeCluster(16);  // 128 GPUs, 8 per NVLink domain
  ModelSpec model = MakeMixtral();
  JobSpec job = MakeJob();

  std::vector<Violation> Check(const std::string& text) {
    auto layout = ParseLayout(text, cluster.total_gpus());
    REQUIRE_MESSAGE(layout.ok(), layout.status().message());
    return CheckLayout(layout.value(), LegalityContext{&cluster, &model, &job});
  }
  bool Breaks(const std::string& text, Rule rule) {
    auto v = Check(text);
    return std::any_of(v.begin(), v.end(), [&](const Violation& x) { return x.rule == rule; });
  }
};

}  // namespace

TEST_CASE("a typical folded layout is legal") {
  Case c;
  // 128 = pp 4 x (tp 2 cp 2 dp 8) = pp 4 x (etp 1 ep 8 edp 4); 64 / (8 x 1) = 8 micro-batches >= 4.
  auto v = c.Check("tp=2,cp=2,pp=4,ep=8,etp=1");
  CHECK_MESSAGE(v.empty(), (v.empty() ? "" : v.front().detail));
}

TEST_CASE("world_fits_cluster") {
  Case c;
  CHECK_FALSE(c.Breaks("tp=2,pp=4,ep=8,etp=1,world=128", Rule::kWorldFitsCluster));
  CHECK(c.Breaks("tp=2,pp=4,ep=8,etp=1,world=256", Rule::kWorldFitsCluster));
}

TEST_CASE("vpp_needs_pp") {
  Case c;
  CHECK_FALSE(c.Breaks("pp=2,vpp=2,ep=8,etp=1", Rule::kVppNeedsPp));
  CHECK(c.Breaks("pp=1,vpp=2,ep=8,etp=1", Rule::kVppNeedsPp));
}

TEST_CASE("pipeline_split") {
  Case c;
  c.model.layers = 30;  // 30 over 4 x 2: Megatron's 8/8/8/6 exists
  CHECK_FALSE(c.Breaks("pp=4,vpp=2,ep=8,etp=1", Rule::kPipelineSplit));
  c.model.layers = 31;  // pp 8 vpp 2: no Megatron split, but a chosen layout
  CHECK_FALSE(c.Breaks("pp=8,vpp=2,ep=8,etp=1", Rule::kPipelineSplit));
  // 13 layers cannot fill 16 stages (each but the first and last needs one).
  c.model.layers = 13;
  CHECK(c.Breaks("pp=8,vpp=2,ep=8,etp=1", Rule::kPipelineSplit));
  c.model.layers = 32;
  CHECK(c.Breaks("pp=4,ep=8,etp=1,stages=8/8/8/9", Rule::kPipelineSplit));
  CHECK_FALSE(c.Breaks("pp=4,ep=8,etp=1,pp_layout=Et*7|t*9|t*8|t*8L", Rule::kPipelineSplit));
  CHECK(c.Breaks("pp=4,ep=8,etp=1,pp_layout=Et*7|t*9|t*8|t*8mL", Rule::kPipelineSplit));  // no MTP layer
  c.model.mtp_layers = 1;
  CHECK_FALSE(c.Breaks("pp=4,ep=8,etp=1,pp_layout=Et*7|t*9|t*8|t*8mL", Rule::kPipelineSplit));
}

TEST_CASE("tp_divides_heads and tp_divides_kv_heads") {
  Case c;
  c.model.heads = 48;  // 48 % 16 = 0, 48 % 32 = 16
  c.model.kv_heads = 8;
  CHECK_FALSE(c.Breaks("tp=16,ep=8,etp=1", Rule::kTpDividesHeads));
  CHECK(c.Breaks("tp=32,ep=4,etp=1", Rule::kTpDividesHeads));
  CHECK_FALSE(c.Breaks("tp=8,ep=8,etp=1", Rule::kTpDividesKvHeads));
  CHECK(c.Breaks("tp=16,ep=8,etp=1", Rule::kTpDividesKvHeads));
}

TEST_CASE("tp_divides_ffn covers the dense MLP and shared experts") {
  Case c;
  c.model.ffn_hidden = 18432;  // DeepSeek-V3's dense layers: 18432 = 2^11 * 9
  CHECK_FALSE(c.Breaks("tp=8,ep=8,etp=1", Rule::kTpDividesFfn));
  c.model.ffn_hidden = 0;
  c.model.moe->shared_experts = 1;
  c.model.moe->shared_ffn_hidden = 20;  // 20 % 8 = 4
  CHECK(c.Breaks("tp=8,ep=8,etp=1", Rule::kTpDividesFfn));
}

TEST_CASE("dense_product and expert_product") {
  Case c;
  Layout l = ParseLayout("tp=2,pp=4,ep=8,etp=1", 128).value();
  LegalityContext ctx{&c.cluster, &c.model, &c.job};
  CHECK(CheckLayout(l, ctx).empty());
  l.dp = 4;  // 2 * 1 * 4 = 8 != 128 / 4
  l.edp = 2;
  auto v = CheckLayout(l, ctx);
  REQUIRE(v.size() >= 2);
  CHECK(v[0].rule == Rule::kDenseProduct);
  CHECK(v[0].detail == "tp*cp*dp = 8 != world/pp = 32");
  CHECK(std::any_of(v.begin(), v.end(), [](auto& x) { return x.rule == Rule::kExpertProduct; }));
}

TEST_CASE("ulysses_heads and ulysses_kv_heads; ring CP has neither rule") {
  Case c;  // 32 heads, 8 kv heads
  // tp 2: 16 q heads, 4 kv heads per rank. cp 4 divides both; cp 8 divides q only.
  CHECK_FALSE(c.Breaks("tp=2,cp=4,ep=8,etp=1", Rule::kUlyssesKvHeads));
  CHECK(c.Breaks("tp=2,cp=8,ep=8,etp=1", Rule::kUlyssesKvHeads));
  CHECK_FALSE(c.Breaks("tp=2,cp=8,ep=8,etp=1", Rule::kUlyssesHeads));
  CHECK(c.Breaks("tp=4,cp=16,ep=8,etp=1", Rule::kUlyssesHeads));  // 8 q heads per rank, cp 16
  CHECK_FALSE(c.Breaks("tp=2,cp=8,ep=8,etp=1,cp_style=ring", Rule::kUlyssesKvHeads));
  // KV replication, when the job allows it, lifts the kv rule for cp a multiple of kv/tp.
  c.job.ulysses_kv_replication = true;
  CHECK_FALSE(c.Breaks("tp=2,cp=8,ep=8,etp=1", Rule::kUlyssesKvHeads));
}

TEST_CASE("seq_divides_cp: Ulysses needs S % cp, load-balanced ring S % 2cp") {
  Case c;
  c.job.seq_len = 4100;  // 4100 = 4 * 1025
  CHECK_FALSE(c.Breaks("cp=4,ep=8,etp=1", Rule::kSeqDividesCp));
  CHECK(c.Breaks("cp=4,ep=8,etp=1,cp_style=ring", Rule::kSeqDividesCp));
  CHECK(c.Breaks("cp=8,ep=8,etp=1", Rule::kSeqDividesCp));
}

TEST_CASE("seq_divides_tp: sequence parallel needs (S / cp) % tp") {
  Case c;
  c.job.seq_len = 4100;  // 4100 / 2 = 2050 = 2 * 1025
  CHECK_FALSE(c.Breaks("tp=2,cp=2,ep=8,etp=1", Rule::kSeqDividesTp));
  CHECK(c.Breaks("tp=4,cp=2,ep=8,etp=1", Rule::kSeqDividesTp));
}

TEST_CASE("dense_model_experts") {
  Case c;
  c.model = MakeDense();
  CHECK_FALSE(c.Breaks("tp=4,pp=4", Rule::kDenseModelExperts));  // etp defaults to tp
  CHECK(c.Breaks("tp=4,pp=4,ep=2", Rule::kDenseModelExperts));
  CHECK(c.Breaks("tp=4,pp=4,etp=1", Rule::kDenseModelExperts));
}

TEST_CASE("ep_divides_experts and etp_divides_expert_ffn") {
  Case c;  // 8 experts, expert FFN 14336 = 2^11 * 7
  CHECK_FALSE(c.Breaks("ep=8,etp=1", Rule::kEpDividesExperts));
  CHECK(c.Breaks("ep=16,etp=1", Rule::kEpDividesExperts));
  CHECK_FALSE(c.Breaks("ep=8,etp=2", Rule::kEtpDividesExpertFfn));
  c.model.moe->ffn_hidden = 1000;  // 1000 % 16 = 8
  CHECK(c.Breaks("ep=8,etp=16", Rule::kEtpDividesExpertFfn));
}

TEST_CASE("batch_divides, microbatches_cover_pp, interleaved_microbatches") {
  Case c;  // global batch 64
  // pp 1: dp = 128 / (tp 2) = 64, mbs 1 -> 1 micro-batch; mbs 2 -> 64 % 128 != 0.
  CHECK_FALSE(c.Breaks("tp=2,ep=8,etp=1,mbs=1", Rule::kBatchDivides));
  CHECK(c.Breaks("tp=2,ep=8,etp=1,mbs=2", Rule::kBatchDivides));
  // pp 8: dp = 128 / 8 = 16 -> 4 micro-batches < 8.
  CHECK(c.Breaks("pp=8,ep=8,etp=1", Rule::kMicrobatchesCoverPp));
  // pp 4, tp 4: dp = 8 -> 8 micro-batches >= 4.
  CHECK_FALSE(c.Breaks("pp=4,tp=4,ep=8,etp=1", Rule::kMicrobatchesCoverPp));
}

TEST_CASE("interleaved 1F1B wants micro-batches % pp == 0") {
  Case c;
  c.job.global_batch = 96;
  // pp 4, tp 2: dp = 16; 96 / 16 = 6 micro-batches >= 4 but 6 % 4 != 0.
  CHECK_FALSE(c.Breaks("tp=2,pp=4,ep=8,etp=1", Rule::kInterleavedMicrobatches));
  CHECK(c.Breaks("tp=2,pp=4,vpp=2,ep=8,etp=1", Rule::kInterleavedMicrobatches));
  c.job.global_batch = 128;  // 8 micro-batches
  CHECK_FALSE(c.Breaks("tp=2,pp=4,vpp=2,ep=8,etp=1", Rule::kInterleavedMicrobatches));
}

TEST_CASE("schedule_needs: each schedule's model chunks per rank, pp and micro-batches") {
  Case c;  // global batch 64; tp 4, pp 4: dp 8, 8 micro-batches
  auto detail = [&](const std::string& text) {
    for (const Violation& v : c.Check(text)) {
      if (v.rule == Rule::kScheduleNeeds) return v.detail;
    }
    return std::string();
  };
  for (const char* legal :
       {"tp=4,pp=4,ep=8,etp=1", "tp=4,pp=4,vpp=2,ep=8,etp=1", "tp=4,pp=4,ep=8,etp=1,schedule=1f1b",
        "tp=4,pp=4,ep=8,etp=1,schedule=gpipe", "tp=4,ep=8,etp=1,schedule=gpipe", "tp=4,pp=4,ep=8,etp=1,schedule=zb-h1",
        "tp=4,pp=4,vpp=2,ep=8,etp=1,schedule=interleaved-1f1b", "tp=4,pp=4,vpp=2,ep=8,etp=1,schedule=dualpipev"}) {
    CAPTURE(legal);
    CHECK(c.Check(legal).empty());
  }
  CHECK(detail("tp=4,pp=4,vpp=2,ep=8,etp=1,schedule=1f1b") ==
        "1f1b runs one model chunk per rank: it needs vpp 1, this layout has vpp 2");
  CHECK(detail("tp=4,pp=4,vpp=2,ep=8,etp=1,schedule=gpipe") ==
        "gpipe runs one model chunk per rank: it needs vpp 1, this layout has vpp 2");
  CHECK(detail("tp=4,ep=8,etp=1,schedule=zb-h1") == "zb-h1 needs pp > 1, this layout has pp 1");
  CHECK(detail("tp=4,pp=4,vpp=2,ep=8,etp=1,schedule=zb-h1") ==
        "zb-h1 runs one model chunk per rank: it needs vpp 1, this layout has vpp 2");
  CHECK(detail("tp=4,pp=4,ep=8,etp=1,schedule=interleaved") ==
        "interleaved-1f1b interleaves model chunks: it needs vpp > 1, this layout has vpp 1");
  CHECK(detail("tp=4,pp=4,vpp=4,ep=8,etp=1,schedule=dualpipev") ==
        "dualpipev runs exactly two model chunks per rank (the V): it needs vpp 2, this layout has vpp 4");
  CHECK(detail("tp=4,vpp=2,ep=8,etp=1,schedule=dualpipev") == "dualpipev needs pp > 1, this layout has pp 1");
  // tp 2, pp 4: dp 16, 4 micro-batches >= pp, but DualPipeV's steady phase needs 8.
  CHECK(detail("tp=2,pp=4,vpp=2,ep=8,etp=1,schedule=dualpipev") ==
        "dualpipev needs at least 2 pp = 8 micro-batches for its steady phase, this layout has 4");
  CHECK(detail("tp=2,pp=4,vpp=2,ep=8,etp=1").empty());  // the implied interleaved 1F1B needs no more
}

TEST_CASE("interleaved_microbatches binds interleaved 1F1B only, not DualPipeV's two chunks") {
  Case c;
  c.job.global_batch = 80;  // tp 4, pp 4: dp 8, 10 micro-batches: >= 2 pp, but 10 % 4 != 0
  CHECK(c.Breaks("tp=4,pp=4,vpp=2,ep=8,etp=1", Rule::kInterleavedMicrobatches));
  CHECK(c.Check("tp=4,pp=4,vpp=2,ep=8,etp=1,schedule=dualpipev").empty());
}

TEST_CASE("order_valid") {
  Case c;
  CHECK_FALSE(c.Breaks("tp=2,pp=4,ep=8,etp=1,order=tp-cp-ep-dp-pp", Rule::kOrderValid));
  CHECK(c.Breaks("tp=2,pp=4,ep=8,etp=1,order=tp-xx-ep-dp-pp", Rule::kOrderValid));
  CHECK(c.Breaks("tp=2,pp=4,ep=8,etp=1,order=tp-tp-ep-dp-pp", Rule::kOrderValid));
  // cp = 1 may be missing from the order; tp = 2 may not.
  CHECK_FALSE(c.Breaks("tp=2,pp=4,ep=8,etp=1,order=tp-ep-dp-pp", Rule::kOrderValid));
  CHECK(c.Breaks("tp=2,pp=4,ep=8,etp=1,order=cp-ep-dp-pp", Rule::kOrderValid));
}

TEST_CASE("order_pp_stride: pp not last needs edp == dp") {
  Case c;
  c.job.global_batch = 256;
  // tp 2, pp 4: dp = 16; ep 8 etp 1: edp = 4 != 16 -> pp stride 2 vs 8.
  CHECK(c.Breaks("tp=2,pp=4,ep=8,etp=1,order=tp-cp-ep-pp-dp", Rule::kOrderPpStride));
  CHECK_FALSE(c.Breaks("tp=2,pp=4,ep=8,etp=1,order=tp-cp-ep-dp-pp", Rule::kOrderPpStride));
  // ep 2 etp 1: edp = 16 == dp -> equal strides.
  CHECK_FALSE(c.Breaks("tp=2,pp=4,ep=2,etp=1,order=tp-cp-ep-pp-dp", Rule::kOrderPpStride));
  // pp inside dp with edp != dp where the strides agree: tp = etp = 2, so pp's
  // stride is 2 in both views and the pp groups are equal, but Megatron-Core's
  // pipeline-group assert still trips (doc/trainers.md): refused too.
  CHECK(c.Breaks("tp=2,pp=4,ep=2,etp=2,order=tp-pp-cp-ep-dp", Rule::kOrderPpStride));
  CHECK_FALSE(c.Breaks("tp=2,pp=4,ep=2,etp=2,order=tp-cp-ep-dp-pp", Rule::kOrderPpStride));
}

TEST_CASE("JudgeOrder is CheckOrder's first rule and BlocksOf, without words") {
  // Orders that pass and orders that break each way: unknown, repeated and
  // empty tokens, upper case, an axis missing, pp not last.
  const std::vector<std::string> orders = {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-ep-cp-dp-pp", "pp-dp-ep-cp-tp",
                                           "tp-dp-cp-ep-pp", "tp-cp-dp-pp",    "tp-ep-dp-pp",    "dp-pp",
                                           "tp-cp-xx-dp-pp", "tp-tp-ep-dp-pp", "tp--ep-dp-pp",   "TP-CP-EP-DP-PP",
                                           ""};
  std::mt19937 rng(2024);
  int broken = 0;
  for (int world : {1, 8, 96, 144, 1024}) {
    for (int trial = 0; trial < 500; ++trial) {
      const Layout l = RandomLayout(world, orders, rng);
      INFO("layout: " << FormatLayout(l));
      const std::vector<Violation> v = CheckOrder(l);
      const OrderVerdict verdict = JudgeOrder(l, ParseOrderString(l.order));
      REQUIRE(verdict.broken.has_value() == !v.empty());
      if (!v.empty()) REQUIRE(*verdict.broken == v.front().rule);
      broken += !v.empty();
      const OrderBlocks blocks = BlocksOf(l);
      CHECK(verdict.blocks.heavy == blocks.heavy);
      CHECK(verdict.blocks.expert == blocks.expert);
    }
  }
  CHECK(broken > 100);
}

TEST_CASE("placement_fits: packed heavy blocks per NVLink domain") {
  Case c;
  c.cluster = MakeCluster(72, 4, 72);  // 4 NVL72 racks = 288 GPUs
  c.job.global_batch = 1024;
  // ep 64: 64-rank heavy blocks, one per 72-GPU rack: 256 ranks need 4 racks (288 GPUs).
  CHECK_FALSE(c.Breaks("ep=8,etp=1,tp=8,world=256,placement=packed", Rule::kPlacementFits));
  c.model.moe->experts = 64;
  CHECK_FALSE(c.Breaks("ep=64,etp=1,world=256,placement=packed", Rule::kPlacementFits));
  // 288 ranks cannot all sit in 64-rank blocks inside 4 racks.
  // ep 16 x etp 2 = 32-rank blocks, two per rack: 288 ranks need 5 racks.
  c.job.global_batch = 288;
  CHECK(c.Breaks("ep=16,etp=2,world=288,placement=packed", Rule::kPlacementFits));
}

TEST_CASE("HeavyBlock is the aligned block holding every TP/CP/EP/ETP group") {
  // Default order: dense heavy block tp*cp = 4, expert etp*ep = 8 -> lcm 8.
  CHECK(HeavyBlock(ParseLayout("tp=2,cp=2,ep=8,etp=1", 64).value()) == 8);
  // tp-dp-cp order: a cp group strides over dp (8), so the dense block is
  // tp*dp*cp = 32; the expert ep group strides over edp: etp*edp*ep = 32.
  CHECK(HeavyBlock(ParseLayout("tp=2,cp=2,ep=2,etp=1,order=tp-dp-cp-ep-pp", 32).value()) == 32);
}

TEST_CASE("CheckLayout reports every rule a layout breaks, in rule order") {
  Case c;
  c.model.heads = 48;
  c.model.layers = 9;  // 9 layers cannot fill 4 x 3 stages (10 needed: all but the first and last)
  auto v = c.Check("tp=32,cp=1,pp=4,ep=16,etp=1,vpp=3");
  std::vector<Rule> rules;
  for (auto& x : v) rules.push_back(x.rule);
  CHECK(std::is_sorted(rules.begin(), rules.end()));
  CHECK(std::count(rules.begin(), rules.end(), Rule::kTpDividesHeads) == 1);
  CHECK(std::count(rules.begin(), rules.end(), Rule::kEpDividesExperts) == 1);
  CHECK(std::count(rules.begin(), rules.end(), Rule::kPipelineSplit) == 1);
}

TEST_CASE("precision_supported: FP8 needs Hopper, mxfp8 Blackwell") {
  Case c;
  c.cluster.gpu.peak_fp8_flops = 1979e12;  // Hopper-class
  CHECK_FALSE(c.Breaks("tp=2,pp=4,ep=8,etp=1,precision=fp8-blockwise", Rule::kPrecisionSupported));
  auto v = c.Check("tp=2,pp=4,ep=8,etp=1,precision=mxfp8");
  REQUIRE(std::any_of(v.begin(), v.end(), [](const Violation& x) { return x.rule == Rule::kPrecisionSupported; }));
  c.cluster.gpu.architecture = GpuArchitecture::kBlackwell;
  CHECK_FALSE(c.Breaks("tp=2,pp=4,ep=8,etp=1,precision=mxfp8", Rule::kPrecisionSupported));
  c.cluster.gpu.architecture = GpuArchitecture::kAmpere;
  CHECK(c.Breaks("tp=2,pp=4,ep=8,etp=1,precision=fp8", Rule::kPrecisionSupported));
  CHECK(rules::PrecisionProblem(c.cluster.gpu, Precision::kFP8Tensorwise) ==
        "fp8-tensorwise needs FP8 tensor cores (Hopper or later) (H100 SXM5 is ampere)");
}

TEST_CASE("hybridep_in_domain: HybridEP's TP x EP groups stay inside an NVLink domain") {
  Case c;  // 8-GPU domains
  CHECK_FALSE(c.Breaks("tp=1,pp=4,ep=8,etp=1,dispatcher=hybridep", Rule::kHybridEpInDomain));
  CHECK(c.Breaks("tp=1,pp=2,ep=16,etp=1,dispatcher=hybridep", Rule::kHybridEpInDomain));
  CHECK_FALSE(c.Breaks("tp=1,pp=2,ep=16,etp=1,dispatcher=deepep", Rule::kHybridEpInDomain));
  // NVL72: 64-rank EP groups in 72-GPU racks straddle linearly, not packed.
  c.cluster = MakeCluster(72, 4, 72);
  c.job.global_batch = 256;
  CHECK(c.Breaks("tp=1,pp=1,ep=64,etp=1,world=256,dispatcher=hybridep", Rule::kHybridEpInDomain));
  CHECK_FALSE(c.Breaks("tp=1,pp=1,ep=64,etp=1,world=256,dispatcher=hybridep,placement=packed",
                       Rule::kHybridEpInDomain));
}

TEST_CASE("hybridep_in_domain: a packed layout whose blocks cannot pack is judged as placed, linearly") {
  // 120 ranks with ep 48 (edp 2: expert_product broken): heavy blocks of 48
  // do not divide the world, so PackBlocks, and PlaceRanks with it, keep
  // rank r on GPU r, where ranks 48..95 straddle the first two 72-GPU racks.
  Layout l;
  l.world = 120;
  l.dp = 120;
  l.ep = 48;
  l.edp = 2;
  l.dispatcher = Dispatcher::kHybridEP;
  l.placement = Placement::kPacked;
  REQUIRE(HeavyBlock(l) == 48);
  CHECK_FALSE(ExpertGroupInDomain(l, 72));
  const ClusterSpec cluster = MakeCluster(36, 4, 72);
  const ModelSpec model = MakeMixtral();
  const JobSpec job = MakeJob();
  const std::vector<Violation> v = CheckLayout(l, {&cluster, &model, &job});
  CHECK(std::any_of(v.begin(), v.end(), [](const Violation& x) { return x.rule == Rule::kHybridEpInDomain; }));
  // Heavy blocks that divide the world pack: one 48-rank block per rack.
  l.world = 96;
  l.dp = 96;
  CHECK(ExpertGroupInDomain(l, 72));
}

TEST_CASE("a2a_overlap_needs: Megatron's checks for --overlap-moe-expert-parallel-comm") {
  Case c;
  CHECK_FALSE(c.Breaks("tp=1,pp=4,vpp=2,ep=8,etp=1,a2a_overlap=1", Rule::kA2aOverlapNeeds));
  CHECK(c.Breaks("tp=1,pp=4,ep=8,etp=1,a2a_overlap=1", Rule::kA2aOverlapNeeds));            // pp > 1 needs vpp
  CHECK(c.Breaks("tp=1,pp=1,ep=1,etp=1,a2a_overlap=1", Rule::kA2aOverlapNeeds));            // no EP
  CHECK(c.Breaks("tp=1,pp=1,ep=8,etp=1,a2a_overlap=1,dispatcher=allgather", Rule::kA2aOverlapNeeds));
  CHECK(c.Breaks("tp=1,pp=1,ep=8,etp=1,a2a_overlap=1,recompute=full", Rule::kA2aOverlapNeeds));
  // transformer_config.py (~3030): not with `moe` among the recompute
  // modules, alone or with others; the other selective modules are fine.
  CHECK(c.Breaks("tp=1,pp=1,ep=8,etp=1,a2a_overlap=1,recompute=moe", Rule::kA2aOverlapNeeds));
  CHECK(c.Breaks("tp=1,pp=1,ep=8,etp=1,a2a_overlap=1,recompute=layernorm+moe", Rule::kA2aOverlapNeeds));
  CHECK_FALSE(c.Breaks("tp=1,pp=1,ep=8,etp=1,a2a_overlap=1,recompute=layernorm+moe_act", Rule::kA2aOverlapNeeds));
  CHECK_FALSE(c.Breaks("tp=1,pp=1,ep=8,etp=1,a2a_overlap=0,recompute=moe", Rule::kA2aOverlapNeeds));
  CHECK_FALSE(c.Breaks("tp=1,pp=1,ep=8,etp=1,a2a_overlap=1,dispatcher=deepep", Rule::kA2aOverlapNeeds));
  // DualPipeV overlaps one micro-batch's forward with another's backward on
  // its two chunks: vpp 2, so EP overlap is allowed; ZB-H1's one chunk is not.
  CHECK_FALSE(c.Breaks("tp=1,pp=4,vpp=2,ep=8,etp=1,a2a_overlap=1,schedule=dualpipev", Rule::kA2aOverlapNeeds));
  CHECK(c.Breaks("tp=1,pp=4,ep=8,etp=1,a2a_overlap=1,schedule=zb-h1", Rule::kA2aOverlapNeeds));
}

TEST_CASE("cuda_graphs_moe_sync: a graph holding a dropless MoE dispatch is refused, the router and preprocessing are not") {
  Case c;
  CHECK(c.Breaks("tp=1,pp=4,ep=8,etp=1,cuda_graphs=moe", Rule::kCudaGraphsMoeSync));
  CHECK(c.Breaks("tp=1,pp=4,ep=8,etp=1,cuda_graphs=layer", Rule::kCudaGraphsMoeSync));
  CHECK(c.Breaks("tp=1,pp=4,ep=8,etp=1,cuda_graphs=full_iteration", Rule::kCudaGraphsMoeSync));
  CHECK_FALSE(c.Breaks("tp=1,pp=4,ep=8,etp=1,cuda_graphs=attn+moe_router+moe_preprocess", Rule::kCudaGraphsMoeSync));
  CHECK_FALSE(c.Breaks("tp=1,pp=4,ep=8,etp=1", Rule::kCudaGraphsMoeSync));
}

TEST_CASE("tp_overlap_needs_tp") {
  Case c;
  CHECK(c.Breaks("tp=1,pp=4,ep=8,etp=1,tp_overlap=1", Rule::kTpOverlapNeedsTp));
  CHECK_FALSE(c.Breaks("tp=2,pp=4,ep=8,etp=1,tp_overlap=1", Rule::kTpOverlapNeedsTp));
}

TEST_CASE("CheckLayout with a model and no job checks the model's rules against the job defaults") {
  // Regression: the model's rules dereferenced the missing job (UBSan).
  const ModelSpec model = MakeMixtral();
  const ClusterSpec cluster = MakeCluster(2);
  const Layout l = MakeLayout(16, 2, 1, 2, 4, 1);
  CHECK(CheckLayout(l, {&cluster, &model, nullptr}).empty());
  const Layout bad = MakeLayout(16, 16, 1, 1, 1, 16);  // heads 32 % tp 16 = 0, kv_heads 8 % 16 != 0
  CHECK(!CheckLayout(bad, {&cluster, &model, nullptr}).empty());
}
