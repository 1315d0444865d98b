// EnumerateLayouts against a brute force: every candidate of the documented
// space is built one by one and checked with CheckLayout; its first violation
// (in rule order) must be where the enumeration counted it, and the legal
// sets must be identical.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "fixtures.h"
#include "planner/enumerate.h"
#include "planner/pipeline.h"
#include "planner/rank_map.h"

using namespace foldplan;
using namespace foldplan::testing;

namespace {

struct BruteForce {
  uint64_t candidates = 0;
  std::array<uint64_t, kRuleCount> rejected{};
  std::set<std::string> legal;
};

// Counts one candidate; returns its violations (CheckLayout is most of the
// brute force's time, under the sanitizers above all: called once).
std::vector<Violation> Tally(const Layout& l, const LegalityContext& ctx, BruteForce* out) {
  ++out->candidates;
  auto v = CheckLayout(l, ctx);
  if (v.empty()) out->legal.insert(FormatLayout(l));
  else ++out->rejected[static_cast<size_t>(v.front().rule)];
  return v;
}

// Every candidate of the documented space, built one by one; `pins` keeps
// only those that agree with it (placement aside: see enumerate.h).
BruteForce Brute(const LegalityContext& ctx, const LayoutPins& pins = {}) {
  BruteForce out;
  const JobSpec& job = *ctx.job;
  const ModelSpec& model = *ctx.model;
  const int world = job.world_size > 0 ? job.world_size : ctx.cluster->total_gpus();
  auto agrees = [](const std::optional<int>& pin, int v) { return !pin || *pin == v; };
  std::vector<Dispatcher> dispatchers = job.dispatchers;
  std::vector<bool> a2a = job.a2a_overlap;
  if (!model.is_moe()) {
    // One of each (enumerate.h): no EP overlap, a dispatcher other than
    // HybridEP, when the job lists one.
    for (Dispatcher d : job.dispatchers) {
      if (d != Dispatcher::kHybridEP) {
        dispatchers = {d};
        break;
      }
    }
    dispatchers.resize(1);
    for (bool overlap : job.a2a_overlap) {
      if (!overlap) a2a = {false};
    }
    a2a.resize(1);
  }
  for (int pp : Divisors(world)) {
    if (!agrees(pins.pp, pp)) continue;
    const int g = world / pp;
    std::vector<std::optional<PipelineSchedule>> schedules(job.pipeline_schedules.begin(),
                                                           job.pipeline_schedules.end());
    if (schedules.empty()) schedules.push_back(std::nullopt);  // the implied one (enumerate.h)
    for (int vpp : job.vpp)
    for (const std::optional<PipelineSchedule>& schedule : schedules) {
      // Pinned stages agree only with their own pp x vpp.
      if (pins.stages && static_cast<int>(pins.stages->size()) != pp * vpp) continue;
      // The split depends on (pp, vpp, schedule) only.
      std::vector<int> chosen_split;
      if (!pins.stages) {
        if (auto split = ChooseStageLayers(model, pp, vpp, BlockWeights{}, schedule); split.ok()) {
          chosen_split = split.value();
        }
      }
      for (int tp : Divisors(g)) {
        if (!agrees(pins.tp, tp)) continue;
        for (int cp : Divisors(g)) {
          if (!agrees(pins.cp, cp)) continue;
          if (pins.dp && (g % (tp * cp) != 0 || g / (tp * cp) != *pins.dp)) continue;
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
              if (!agrees(pins.ep, ep) || !agrees(pins.etp, etp)) continue;
              if (pins.edp && (g % (ep * etp) != 0 || g / (ep * etp) != *pins.edp)) continue;
              for (int mbs : job.micro_batch_sizes) {
                std::vector<std::string> orders = job.orders;
                if (pp == 1) orders.resize(1);  // the two test orders differ only in pp
                for (const auto& order : orders) {
                  for (Recompute rc : job.recompute)
                  for (Dispatcher d : dispatchers)
                  for (bool overlap : a2a)
                  for (Precision precision : job.precisions)
                  for (bool fsdp : job.fsdp)
                  for (bool tp_overlap : job.tp_overlap)
                  for (const CudaGraphs& graphs : job.cuda_graphs) {
                    Layout l;
                    l.world = world, l.pp = pp, l.vpp = vpp, l.tp = tp, l.cp = cp;
                    l.dp = g % (tp * cp) == 0 ? g / (tp * cp) : 0;
                    l.ep = ep, l.etp = etp;
                    l.edp = g % (ep * etp) == 0 ? g / (ep * etp) : 0;
                    l.cp_style = style, l.mbs = mbs, l.order = order, l.recompute = rc;
                    l.dispatcher = d, l.a2a_overlap = overlap, l.precision = precision;
                    l.fsdp = fsdp, l.tp_overlap = tp_overlap, l.cuda_graphs = graphs, l.schedule = schedule;
                    if (l.dp == 0) l.dp = 1;    // any wrong value: dense_product catches it
                    if (l.edp == 0) l.edp = 1;  // likewise expert_product
                    if (pins.stages) {
                      l.stage_layers = *pins.stages;
                      l.stage_mtp = pins.stage_mtp.value_or(std::vector<int>{});
                      l.explicit_stages = true;
                      l.pp_layout_given = pins.pp_layout;
                    } else {
                      l.stage_layers = chosen_split;
                    }
                    const auto v = Tally(l, ctx, &out);
                    // A packed variant exists where it would move ranks and the
                    // linear version passes every rule before placement.
                    if (v.empty() || v.front().rule >= Rule::kPlacementFits) {
                      const int block = HeavyBlock(l);
                      const int dom = ctx.cluster->nvlink_domain_gpus;
                      if (block < dom && dom % block != 0) {
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

void CompareWithBruteForce(const ClusterSpec& cluster, const ModelSpec& model, const JobSpec& job,
                           const LayoutPins& pins = {}) {
  const LegalityContext ctx{&cluster, &model, &job};
  const Enumeration e = EnumerateLayouts(ctx, {.pins = &pins});
  const BruteForce b = Brute(ctx, pins);
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

TEST_CASE("enumeration equals a brute force with every recipe option a candidate") {
  // Two NVL72-like racks of 72 GPUs (18 nodes of 4), 128 ranks used; the
  // recipe rules bite: mxfp8 needs Blackwell (this GPU is Hopper-class with
  // FP8), HybridEP needs the TP x EP groups inside a rack, EP overlap needs
  // ep > 1 and vpp > 1 with pp > 1, TP overlap needs tp > 1, a CUDA graph
  // of the whole MoE block a dispatch that does not sync.
  ClusterSpec cluster = MakeCluster(36, 4, 72);
  cluster.gpu.peak_fp8_flops = 1979e12;
  ModelSpec model = MakeMixtral();
  model.moe->experts = 16;
  JobSpec job = MakeJob();
  job.world_size = 128;
  job.global_batch = 128;
  job.micro_batch_sizes = {1};
  job.dispatchers = {Dispatcher::kAllToAll, Dispatcher::kHybridEP};
  job.a2a_overlap = {false, true};
  job.precisions = {Precision::kBF16, Precision::kMXFP8};
  job.fsdp = {false, true};
  job.tp_overlap = {false, true};
  // A whole MoE block captured: refused with the dropless dispatch.
  job.cuda_graphs = {CudaGraphs::None(), CudaGraphs::Modules(1u << int(CudaGraphModule::kMoe))};
  job.recompute = {Recompute::None(), Recompute::Full()};
  CompareWithBruteForce(cluster, model, job);
  const Enumeration e = EnumerateLayouts({&cluster, &model, &job});
  for (Rule r : {Rule::kPrecisionSupported, Rule::kHybridEpInDomain, Rule::kA2aOverlapNeeds, Rule::kTpOverlapNeedsTp,
                 Rule::kCudaGraphsMoeSync}) {
    CHECK_MESSAGE(e.rejected[static_cast<size_t>(r)] > 0, Name(r));
  }
  // The moe recompute module refuses EP overlap (Megatron's rule): adding
  // it as a third candidate adds legal layouts without the overlap and
  // rejections under a2a_overlap_needs with it, one for one.
  const Recompute moe = Recompute::Modules(1u << int(RecomputeModule::kMoe));
  job.recompute = {Recompute::None(), Recompute::Full(), moe};
  CompareWithBruteForce(cluster, model, job);
  const Enumeration with_moe = EnumerateLayouts({&cluster, &model, &job});
  const auto a2a = static_cast<size_t>(Rule::kA2aOverlapNeeds);
  CHECK(with_moe.rejected[a2a] > e.rejected[a2a]);
  job.recompute = {moe};
  job.a2a_overlap = {false};
  const uint64_t moe_without_overlap = EnumerateLayouts({&cluster, &model, &job}).legal_count;
  job.a2a_overlap = {true};
  const Enumeration moe_overlap = EnumerateLayouts({&cluster, &model, &job});
  CHECK(moe_without_overlap > 0);
  CHECK(moe_overlap.legal_count == 0);
  CHECK(with_moe.legal_count == e.legal_count + moe_without_overlap);
}

TEST_CASE("enumeration equals a brute force with every pipeline schedule a candidate") {
  // 30 layers do not divide over pp 4 x vpp 2: DualPipeV's chosen stages
  // differ from interleaved 1F1B's. 48 GPUs, global batch 96: some pp and
  // dp leave fewer than 2 pp micro-batches, which DualPipeV refuses.
  ClusterSpec cluster = MakeCluster(6);
  ModelSpec model = MakeDense();
  model.layers = 30;
  JobSpec job = MakeJob();
  job.global_batch = 96;
  job.vpp = {1, 2, 3};
  job.pipeline_schedules.assign(kAllPipelineSchedules.begin(), kAllPipelineSchedules.end());
  CompareWithBruteForce(cluster, model, job);
  const Enumeration e = EnumerateLayouts({&cluster, &model, &job});
  CHECK(e.rejected[static_cast<size_t>(Rule::kScheduleNeeds)] > 0);
  std::set<PipelineSchedule> legal;
  for (const Layout& l : e.legal) {
    REQUIRE(l.schedule);
    legal.insert(*l.schedule);
  }
  CHECK(legal.size() == kAllPipelineSchedules.size());
}

TEST_CASE("a job's schedule candidates multiply the candidates; none listed keeps the implied schedule unnamed") {
  ClusterSpec cluster = MakeCluster(4);
  ModelSpec model = MakeMixtral();
  JobSpec job = MakeJob();  // vpp 1 and 2
  const Enumeration implied = EnumerateLayouts({&cluster, &model, &job});
  for (const Layout& l : implied.legal) CHECK_FALSE(l.schedule);
  CHECK(implied.rejected[static_cast<size_t>(Rule::kScheduleNeeds)] == 0);

  // Listing the implied schedules of vpp 1 and 2 keeps the same legal
  // layouts (now naming their schedule) and rejects the pairs that do not
  // fit: 1f1b with vpp 2, interleaved-1f1b with vpp 1.
  job.pipeline_schedules = {PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B};
  const Enumeration both = EnumerateLayouts({&cluster, &model, &job});
  CHECK(both.candidates == 2 * implied.candidates);
  CHECK(both.legal_count == implied.legal_count);
  CHECK(both.rejected[static_cast<size_t>(Rule::kScheduleNeeds)] > 0);
  std::set<std::string> texts, implied_texts;
  for (const Layout& l : both.legal) {
    REQUIRE(l.schedule);
    CHECK(*l.schedule == DefaultSchedule(l.vpp));
    texts.insert(FormatLayout(l));
  }
  for (const Layout& l : implied.legal) implied_texts.insert(FormatLayout(l));
  CHECK(texts == implied_texts);  // an implied schedule named prints as before

  // A pin narrows the list like the other options.
  LayoutPins pins;
  pins.schedule = PipelineSchedule::kDualPipeV;
  CHECK(PinnedJob(job, pins).pipeline_schedules == std::vector<PipelineSchedule>{PipelineSchedule::kDualPipeV});
}

TEST_CASE("a dense model enumerates alike whatever order the job lists EP overlap and dispatchers in") {
  // 4-GPU domains: tp 8 puts HybridEP's (1 x tp) groups across two domains.
  ClusterSpec cluster = MakeCluster(8, 4, 4);
  ModelSpec model = MakeDense();
  JobSpec job = MakeJob();
  job.a2a_overlap = {false, true};
  job.dispatchers = {Dispatcher::kAllToAll, Dispatcher::kHybridEP};
  const Enumeration plain = EnumerateLayouts({&cluster, &model, &job});
  REQUIRE(plain.legal_count > 0);
  CompareWithBruteForce(cluster, model, job);
  job.a2a_overlap = {true, false};
  job.dispatchers = {Dispatcher::kHybridEP, Dispatcher::kAllToAll};
  const Enumeration reversed = EnumerateLayouts({&cluster, &model, &job});
  CHECK(reversed.legal_count == plain.legal_count);
  CHECK(reversed.candidates == plain.candidates);
  CHECK(reversed.rejected == plain.rejected);
  CompareWithBruteForce(cluster, model, job);
}

TEST_CASE("pinned degrees: the enumeration of the agreeing layouts equals the filtered brute force") {
  ClusterSpec cluster = MakeCluster(4);
  ModelSpec model = MakeMixtral();
  JobSpec job = MakeJob();
  LayoutPins pins;
  pins.tp = 2;
  pins.dp = 2;   // with tp 2 on a stage of 32 / pp: fixes cp per pp
  pins.ep = 8;
  CompareWithBruteForce(cluster, model, job, pins);
  const Enumeration e = EnumerateLayouts({&cluster, &model, &job}, {.pins = &pins});
  REQUIRE(e.legal_count > 0);
  for (const Layout& l : e.legal) {
    CHECK(l.tp == 2);
    CHECK(l.dp == 2);
    CHECK(l.ep == 8);
  }
}

TEST_CASE("pinned options narrow the job's candidate lists") {
  const JobSpec job = MakeJob();
  LayoutPins pins;
  pins.recompute = Recompute::Full();
  pins.dispatcher = Dispatcher::kDeepEP;
  pins.mbs = 2;
  const JobSpec pinned = PinnedJob(job, pins);
  CHECK(pinned.recompute == std::vector<Recompute>{Recompute::Full()});
  CHECK(pinned.dispatchers == std::vector<Dispatcher>{Dispatcher::kDeepEP});
  CHECK(pinned.micro_batch_sizes == std::vector<int>{2});
  CHECK(pinned.vpp == job.vpp);
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

TEST_CASE("pinned stages: counts equal the brute force's, the world fitting the cluster or not") {
  ModelSpec model = MakeMixtral();  // 32 layers
  JobSpec job = MakeJob();          // vpp 1 or 2
  LayoutPins pins;
  pins.stages = std::vector<int>{6, 10, 10, 6};  // pp 4 x vpp 1 or pp 2 x vpp 2
  CompareWithBruteForce(MakeCluster(4), model, job, pins);
  job.world_size = 32;  // on 16 GPUs: every candidate breaks world_fits_cluster
  const ClusterSpec small = MakeCluster(2);
  CompareWithBruteForce(small, model, job, pins);
  const Enumeration e = EnumerateLayouts({&small, &model, &job}, {.pins = &pins});
  CHECK(e.rejected[static_cast<size_t>(Rule::kWorldFitsCluster)] == e.candidates);
  const ClusterSpec big = MakeCluster(4);
  CHECK(e.candidates == EnumerateLayouts({&big, &model, &job}, {.pins = &pins}).candidates);
}

TEST_CASE("Divisors") {
  CHECK(Divisors(1) == std::vector<int>{1});
  CHECK(Divisors(12) == std::vector<int>{1, 2, 3, 4, 6, 12});
  CHECK(Divisors(64).size() == 7);
}

TEST_CASE("enumeration equals a brute force under each trainer's rules, Megatron's validation included") {
  // 32 GPUs, a MoE model and a mix of recipe candidates: each trainer's
  // arrangement rules (schedule, CP style, expert TP, EP ranks, order) are
  // counted per arrangement and its recipe rules per variant, in rule
  // order, as CheckLayout finds them; Megatron's deepep_no_padding and
  // fp8_delayed_recompute bite for every trainer.
  ClusterSpec cluster = MakeCluster(4);
  cluster.gpu.peak_fp8_flops = 1979e12;
  ModelSpec model = MakeMixtral();
  JobSpec job = MakeJob();
  job.global_batch = 64;
  job.micro_batch_sizes = {1};
  job.vpp = {1, 2};
  job.cp_styles = {CpStyle::kUlysses, CpStyle::kRing};
  job.dispatchers = {Dispatcher::kAllToAll, Dispatcher::kDeepEP};
  job.precisions = {Precision::kBF16, Precision::kFP8Delayed};
  job.recompute = {Recompute::None(), Recompute::Modules(1u << int(RecomputeModule::kMoeAct))};
  job.fsdp = {false, true};
  job.capacity_factor = 1.0;
  for (int t = 0; t < kTrainerCount; ++t) {
    const std::string trainer = Name(Trainer(t));
    CAPTURE(trainer);
    job.trainer = Trainer(t);
    CompareWithBruteForce(cluster, model, job);
    const Enumeration e = EnumerateLayouts({&cluster, &model, &job});
    CHECK(e.rejected[static_cast<size_t>(Rule::kDeepEpNoPadding)] > 0);
    CHECK(e.rejected[static_cast<size_t>(Rule::kFp8DelayedRecompute)] > 0);
    CHECK(e.legal_count > 0);
    if (job.trainer == Trainer::kTorchtitan) {
      for (Rule r : {Rule::kTrainerCpStyle, Rule::kTrainerExpertTp, Rule::kTrainerOrder, Rule::kTrainerDataParallel,
                     Rule::kTrainerRecipe}) {
        CHECK_MESSAGE(e.rejected[static_cast<size_t>(r)] > 0, Name(r));
      }
    }
  }
}
