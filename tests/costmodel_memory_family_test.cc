// FamilyPeakMemo (costmodel/memory.h) is MemoryModel::PeakBytes bit for bit:
// over seeded random families of legal layouts (DeepSeek-V3 with MTP, a
// dense and a MoE model, shipped clusters, every pipeline schedule), every
// memory variant of each (recompute sets, precisions, dispatchers,
// a2a_overlap, fsdp) gives the same peak and worst stage, in shuffled
// orders, repeated, and after a Reset to another family and back; so do
// families of several models through one memo, which keeps the layers'
// bytes across families; and so does a model whose terms may fall with the
// micro-batches in flight (every stage scored). And the fields a family may
// differ in without a variant (order, placement, tp_overlap) change no
// memory figure.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "costmodel/memory.h"
#include "costmodel/memory_memo.h"
#include "inputs/loader.h"
#include "planner/enumerate.h"
#include "planner/legality.h"
#include "planner/pipeline.h"
#include "seeded_draws.h"

namespace foldplan {
namespace {

using testing::Bits;
using testing::Draws;

uint32_t Bit(RecomputeModule m) { return 1u << int(m); }

// Every recompute the job format names, and sets of several modules.
const std::vector<Recompute>& AllRecomputes() {
  static const std::vector<Recompute> kAll = {
      Recompute::None(),
      Recompute::Selective(),
      Recompute::Full(),
      Recompute::Modules(Bit(RecomputeModule::kLayernorm) | Bit(RecomputeModule::kMoeAct)),
      Recompute::Modules(Bit(RecomputeModule::kMoe)),
      Recompute::Modules(Bit(RecomputeModule::kCoreAttn) | Bit(RecomputeModule::kMlaUpProj) |
                         Bit(RecomputeModule::kSharedExperts)),
      Recompute::Modules(Bit(RecomputeModule::kMlp) | Bit(RecomputeModule::kLayernorm)),
  };
  return kAll;
}
constexpr Precision kPrecisions[] = {Precision::kBF16, Precision::kFP8Delayed, Precision::kFP8Tensorwise,
                                     Precision::kFP8Blockwise, Precision::kMXFP8};
constexpr Dispatcher kDispatchers[] = {Dispatcher::kAllToAll, Dispatcher::kAllGather, Dispatcher::kDeepEP,
                                       Dispatcher::kHybridEP};

// Every memory variant of `base`: recompute x precision x dispatcher x
// a2a_overlap x fsdp.
std::vector<Layout> Variants(const Layout& base) {
  std::vector<Layout> out;
  for (const Recompute& r : AllRecomputes()) {
    for (Precision p : kPrecisions) {
      for (Dispatcher d : kDispatchers) {
        for (bool a2a : {false, true}) {
          for (bool fsdp : {false, true}) {
            Layout l = base;
            l.recompute = r;
            l.precision = p;
            l.dispatcher = d;
            l.a2a_overlap = a2a;
            l.fsdp = fsdp;
            out.push_back(l);
          }
        }
      }
    }
  }
  return out;
}

struct FamilySetup {
  ClusterSpec cluster;
  ModelSpec model;
  JobSpec job;
};

// A small job (one recipe option each: the variants vary them) over every
// schedule, so that the enumeration stays short and covers pp up to 16+.
FamilySetup MakeSetup(const std::string& cluster, const std::string& model, int gpus, Draws& d) {
  FamilySetup s{LoadCluster(cluster).value(), LoadModel(model).value(), LoadJob("default").value()};
  s.cluster.nodes = std::max(1, gpus / s.cluster.gpus_per_node);
  JobSpec& j = s.job;
  j.micro_batch_sizes = {1, 2};
  j.vpp = {1, 2};
  j.recompute = {Recompute::None()};
  j.precisions = {Precision::kBF16};
  j.dispatchers = {Dispatcher::kAllToAll};
  j.orders = {"tp-cp-ep-dp-pp"};
  j.cp_styles = {CpStyle::kUlysses, CpStyle::kRing};
  j.pipeline_schedules = {PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B, PipelineSchedule::kGPipe,
                          PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipeV};
  j.global_batch = std::vector<int>{64, 512, 4096}[d.Below(3)];
  j.routing_imbalance = d.Coin() ? 1.0 : 1.3;
  return s;
}

// Legal layouts of the setup, at most `n`, spread over its enumeration.
std::vector<Layout> SampleLegal(const FamilySetup& s, size_t n, Draws& d) {
  const LegalityContext ctx{&s.cluster, &s.model, &s.job, nullptr};
  std::vector<Layout> legal = EnumerateLayouts(ctx).legal;
  std::vector<Layout> out;
  if (legal.empty()) return out;
  for (size_t i = 0; i < n; ++i) out.push_back(legal[d.Below(legal.size())]);
  return out;
}

void RequireSamePeak(FamilyPeakMemo& memo, const MemoryModel& model, const Layout& l,
                     const PipelineDescription& pipeline) {
  INFO("layout: " << FormatLayout(l));
  int want_stage = -1, got_stage = -2;
  const double want = model.PeakBytes(l, pipeline, &want_stage);
  const double got = memo.PeakBytes(l, &got_stage);
  REQUIRE(Bits(got) == Bits(want));
  REQUIRE(got_stage == want_stage);
  REQUIRE(Bits(memo.PeakBytes(l)) == Bits(want));  // no worst stage asked
}

struct Family {
  Layout base;
  PipelineDescription pipeline;
};

TEST_CASE("FamilyPeakMemo gives MemoryModel::PeakBytes' peak and worst stage for every memory variant") {
  Draws d{20260801};
  struct Case {
    const char* cluster;
    const char* model;
    int gpus;
  };
  const Case cases[] = {
      {"h100-dgx-128n", "deepseek-v3", 1024}, {"gb200-nvl72-4r", "deepseek-v3", 288},
      {"h800-256n", "deepseek-v3", 2048},     {"b200-dgx-32n", "mixtral-8x7b", 256},
      {"h100-dgx-16n", "llama3-70b", 128},    {"h100-dgx-128n", "qwen3-30b-a3b", 512},
  };
  size_t compared = 0, families = 0, pruned_families = 0;
  std::vector<int> schedules_seen(kPipelineScheduleCount, 0);
  int largest_pp = 0;
  for (const Case& c : cases) {
    const FamilySetup s = MakeSetup(c.cluster, c.model, c.gpus, d);
    const MemoryModel model(s.model, s.job, s.cluster);
    const std::vector<Layout> bases = SampleLegal(s, 10, d);
    REQUIRE(!bases.empty());
    std::vector<Family> fams;
    for (const Layout& b : bases) fams.push_back({b, DescribePipeline(b, s.model)});
    FamilyPeakMemo memo;
    for (size_t f = 0; f < fams.size(); ++f) {
      const Family& fam = fams[f];
      ++schedules_seen[static_cast<size_t>(ScheduleOf(fam.base))];
      largest_pp = std::max(largest_pp, fam.base.pp);
      memo.Reset(model, fam.base, fam.pipeline);
      ++families;
      if (memo.StagesScored() < fam.pipeline.ranks.size()) ++pruned_families;
      std::vector<Layout> variants = Variants(fam.base);
      // The search's order (a variant's two fsdp ways one after the other,
      // the second's peak computed beside the first's), then a shuffled
      // one: the option terms are met cached and uncached in any order.
      for (int pass = 0; pass < 2; ++pass) {
        if (pass > 0) {
          for (size_t i = variants.size(); i > 1; --i) std::swap(variants[i - 1], variants[d.Below(i)]);
        }
        for (const Layout& l : variants) {
          RequireSamePeak(memo, model, l, fam.pipeline);
          ++compared;
        }
      }
      // Another family in between, then this one again from a fresh Reset.
      if (f > 0) {
        const Family& other = fams[d.Below(f)];
        const std::vector<Layout> others = Variants(other.base);
        memo.Reset(model, other.base, other.pipeline);
        for (int i = 0; i < 20; ++i) RequireSamePeak(memo, model, others[d.Below(others.size())], other.pipeline);
        memo.Reset(model, fam.base, fam.pipeline);
        for (int i = 0; i < 40; ++i) RequireSamePeak(memo, model, variants[d.Below(variants.size())], fam.pipeline);
      }
    }
  }
  MESSAGE(families << " families, " << pruned_families << " with stages left out, " << compared
                   << " variants compared, largest pp " << largest_pp);
  CHECK(compared > 30000);
  CHECK(pruned_families * 2 > families);  // the dominance is exercised, not only the full scan
  CHECK(largest_pp >= 16);
  for (int k = 0; k < kPipelineScheduleCount; ++k) {
    CAPTURE(std::string(Name(kAllPipelineSchedules[static_cast<size_t>(k)])));
    CHECK(schedules_seen[static_cast<size_t>(kAllPipelineSchedules[static_cast<size_t>(k)])] > 0);
  }
}

// Stages alike but for their micro-batches in flight: pp 32 under GPipe
// (every stage holds m), ZB-H1 (pp each) and 1F1B (stage p holds
// min(pp - p, m)), so most stages are left out; the worst stage is still the first that
// PeakBytes finds, ties included.
TEST_CASE("FamilyPeakMemo leaves out dominated stages yet keeps PeakBytes' worst stage on ties") {
  FamilySetup s{LoadCluster("h100-dgx-128n").value(), LoadModel("deepseek-v3").value(), LoadJob("default").value()};
  FamilyPeakMemo memo;
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B, PipelineSchedule::kZeroBubbleH1}) {
    for (int global_batch : {256, 512, 4096}) {  // m = 32 = pp, 64, 512
      s.job.global_batch = global_batch;
      const MemoryModel m(s.model, s.job, s.cluster);
      Layout base;
      base.world = 256;
      base.pp = 32;
      base.dp = 8;
      base.ep = 8;
      base.edp = 1;
      base.schedule = schedule;
      const PipelineDescription pipeline = DescribePipeline(base, s.model);
      memo.Reset(m, base, pipeline);
      CAPTURE(std::string(Name(schedule)));
      CAPTURE(global_batch);
      CHECK(memo.StagesScored() < pipeline.ranks.size() / 2);
      const std::vector<Violation> broken = CheckLayout(base, LegalityContext{&s.cluster, &s.model, &s.job, nullptr});
      for (const Violation& v : broken) MESSAGE(v.detail);
      REQUIRE(broken.empty());
      for (const Layout& l : Variants(base)) RequireSamePeak(memo, m, l, pipeline);
    }
  }
}

// With a negative fragmentation share the terms may fall as inflight grows:
// no stage is left out, and the peak and worst stage are PeakBytes' still.
TEST_CASE("FamilyPeakMemo scores every stage when a factor of inflight is negative") {
  Draws d{20260803};
  const FamilySetup s = MakeSetup("h100-dgx-128n", "deepseek-v3", 1024, d);
  MemoryAssumptions falling;
  falling.fragmentation = -0.5;
  const MemoryModel model(s.model, s.job, s.cluster, falling);
  FamilyPeakMemo memo;
  size_t compared = 0;
  int largest_pp = 0;
  for (const Layout& base : SampleLegal(s, 8, d)) {
    const PipelineDescription pipeline = DescribePipeline(base, s.model);
    largest_pp = std::max(largest_pp, base.pp);
    memo.Reset(model, base, pipeline);
    CHECK(memo.StagesScored() == pipeline.ranks.size());
    for (const Layout& l : Variants(base)) {
      RequireSamePeak(memo, model, l, pipeline);
      ++compared;
    }
  }
  CHECK(compared > 1000);
  CHECK(largest_pp >= 4);
}

// The layers' bytes are kept across families, by model: families that share
// what Layer reads of a layout (tp, cp, mbs, etp, the expert load) but
// differ in the rest, under three models (a job of twice the sequence
// length, one of a larger routing imbalance) through one memo, interleaved,
// and models built anew in one place, all give PeakBytes' peak and worst
// stage.
TEST_CASE("FamilyPeakMemo keeps a family's stage shapes for the next only where they read nothing that differs") {
  // Reset keeps the last family's stage shapes when the next has the same
  // model, pp, tp, cp, dp, ep, etp, edp and pipeline ranks (a work item's
  // micro-batch sizes, met one after the other). Each sampled family is
  // followed by itself with one field changed: mbs, cp_style and the
  // schedule (the shapes kept: what they hold is unchanged, only their
  // places), dp, edp, tp, ep and etp (the shapes made anew: each changes a
  // shape's parameters, gradient shards or communicators). Every memory
  // variant checked, FSDP's met in one family and not the next, must give
  // PeakBytes' peak and worst stage.
  Draws d{20261205};
  FamilySetup s = MakeSetup("h100-dgx-128n", "deepseek-v3", 1024, d);
  const MemoryModel model(s.model, s.job, s.cluster);
  const std::vector<Layout> bases = SampleLegal(s, 12, d);
  REQUIRE(!bases.empty());
  FamilyPeakMemo memo;
  size_t compared = 0, families = 0;
  for (const Layout& b : bases) {
    std::vector<Layout> next(9, b);
    next[1].mbs = b.mbs == 1 ? 2 : 1;
    next[2].cp_style = b.cp_style == CpStyle::kUlysses ? CpStyle::kRing : CpStyle::kUlysses;
    next[3].schedule = ScheduleOf(b) == PipelineSchedule::kGPipe ? PipelineSchedule::k1F1B : PipelineSchedule::kGPipe;
    next[4].dp *= 2;
    next[4].edp *= 2;
    next[4].world *= 2;
    next[5].edp *= 2;
    next[5].ep = std::max(1, b.ep / 2);
    next[6].tp *= 2;
    next[6].world *= 2;
    next[6].edp *= 2;
    next[7].ep *= 2;
    next[7].world *= 2;
    next[8].etp *= 2;
    next[8].world *= 2;
    for (const Layout& l : next) {
      const PipelineDescription pipeline = DescribePipeline(l, s.model);
      memo.Reset(model, l, pipeline);
      ++families;
      // Half the families meet FSDP (so the next Reset has it to keep or
      // add), in a random order of their variants.
      std::vector<Layout> variants = Variants(l);
      for (size_t i = variants.size(); i > 1; --i) std::swap(variants[i - 1], variants[d.Below(i)]);
      const bool with_fsdp = d.Coin();
      for (size_t i = 0; i < variants.size(); i += 3) {
        if (variants[i].fsdp && !with_fsdp) continue;
        RequireSamePeak(memo, model, variants[i], pipeline);
        ++compared;
      }
    }
  }
  MESSAGE(families << " families, " << compared << " variants compared");
  CHECK(compared > 5000);
}

TEST_CASE("FamilyPeakMemo shares the layers across families and keeps models apart") {
  Draws d{20260804};
  const FamilySetup base = MakeSetup("h100-dgx-128n", "deepseek-v3", 512, d);
  FamilySetup setups[3] = {base, base, base};
  setups[1].job.seq_len *= 2;
  setups[2].job.routing_imbalance += 0.25;
  // Groups of legal layouts that share (tp, cp, mbs): those of one (etp,
  // ep > 1) share their layers, the others must not. Each group: random
  // layouts, each with others of its etp, of its expert load and not; the
  // same (tp, cp, mbs) under each setup.
  std::vector<std::vector<Layout>> legal(3);
  for (int m = 0; m < 3; ++m) {
    legal[static_cast<size_t>(m)] =
        EnumerateLayouts(LegalityContext{&setups[m].cluster, &setups[m].model, &setups[m].job, nullptr}).legal;
    REQUIRE(!legal[static_cast<size_t>(m)].empty());
  }
  auto matching = [](const std::vector<Layout>& all, auto&& same) {
    std::vector<const Layout*> out;
    for (const Layout& l : all) {
      if (same(l)) out.push_back(&l);
    }
    return out;
  };
  std::vector<std::vector<Layout>> groups[3];
  for (int g = 0; g < 5; ++g) {
    const Layout& anchor = legal[0][d.Below(legal[0].size())];
    for (int m = 0; m < 3; ++m) {
      const std::vector<const Layout*> alike = matching(legal[static_cast<size_t>(m)], [&](const Layout& l) {
        return l.tp == anchor.tp && l.cp == anchor.cp && l.mbs == anchor.mbs;
      });
      std::vector<Layout> group;
      for (int pair = 0; pair < 4 && !alike.empty(); ++pair) {
        const Layout& first = *alike[d.Below(alike.size())];
        group.push_back(first);
        // One of its layers, and one of its etp under another expert load
        // (ep 1 or not), where there is one.
        for (bool same_load : {true, false}) {
          const std::vector<const Layout*> twins = matching(legal[static_cast<size_t>(m)], [&](const Layout& l) {
            return l.tp == first.tp && l.cp == first.cp && l.mbs == first.mbs && l.etp == first.etp &&
                   ((l.ep > 1) == (first.ep > 1)) == same_load;
          });
          if (!twins.empty()) group.push_back(*twins[d.Below(twins.size())]);
        }
      }
      groups[m].push_back(group);
    }
  }
  FamilyPeakMemo memo;
  size_t compared = 0, families = 0, sharing = 0, apart = 0;
  for (int round = 0; round < 3; ++round) {
    // Built anew each round, most likely where the last round's stood.
    const MemoryModel models[3] = {MemoryModel(setups[0].model, setups[0].job, setups[0].cluster),
                                   MemoryModel(setups[1].model, setups[1].job, setups[1].cluster),
                                   MemoryModel(setups[2].model, setups[2].job, setups[2].cluster)};
    std::vector<std::pair<int, Family>> fams;
    for (int m = 0; m < 3; ++m) {
      for (const std::vector<Layout>& group : groups[m]) {
        for (size_t i = 0; i < group.size(); ++i) {
          const Layout& b = group[i];
          auto alike = [&](const Layout& o) { return o.etp == b.etp && (o.ep > 1) == (b.ep > 1); };
          sharing += std::any_of(group.begin(), group.begin() + i, alike) ? 1 : 0;
          apart += std::all_of(group.begin(), group.begin() + i, alike) ? 0 : 1;
          fams.push_back({m, {b, DescribePipeline(b, setups[m].model)}});
        }
      }
    }
    for (size_t i = fams.size(); i > 1; --i) std::swap(fams[i - 1], fams[d.Below(i)]);
    for (const auto& [m, fam] : fams) {
      memo.Reset(models[m], fam.base, fam.pipeline);
      ++families;
      for (const Layout& l : Variants(fam.base)) {
        if (d.Below(3) != 0) continue;
        RequireSamePeak(memo, models[m], l, fam.pipeline);
        ++compared;
      }
    }
  }
  MESSAGE(families << " families, " << sharing << " sharing an earlier one's layers, " << apart
                   << " not some other's, " << compared << " variants compared");
  CHECK(sharing * 3 > families);
  CHECK(apart * 3 > families);
  CHECK(compared > 10000);
}

TEST_CASE("the peak does not depend on order, placement or tp_overlap") {
  Draws d{20260802};
  size_t compared = 0;
  const std::vector<std::string> orders = {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-ep-cp-dp-pp",
                                           "cp-tp-ep-dp-pp", "tp-dp-cp-ep-pp", "ep-tp-cp-dp-pp"};
  for (const char* name : {"deepseek-v3", "mixtral-8x7b", "llama3-70b"}) {
    const FamilySetup s = MakeSetup("h100-dgx-128n", name, 512, d);
    const MemoryModel model(s.model, s.job, s.cluster);
    for (const Layout& base : SampleLegal(s, 30, d)) {
      const PipelineDescription pipeline = DescribePipeline(base, s.model);
      const std::vector<Layout> variants = Variants(base);
      for (int i = 0; i < 20; ++i) {
        const Layout& l = variants[d.Below(variants.size())];
        int want_stage = -1;
        const double want = model.PeakBytes(l, pipeline, &want_stage);
        const MemoryBreakdown want_terms = model.Estimate(l, pipeline);
        Layout other = l;
        other.order = orders[d.Below(orders.size())];
        other.placement = d.Coin() ? Placement::kLinear : Placement::kPacked;
        other.tp_overlap = !l.tp_overlap;
        INFO("layout: " << FormatLayout(l) << " against " << FormatLayout(other));
        int got_stage = -2;
        REQUIRE(Bits(model.PeakBytes(other, pipeline, &got_stage)) == Bits(want));
        REQUIRE(got_stage == want_stage);
        // Its own pipeline description too, and every term.
        REQUIRE(Bits(model.PeakBytes(other)) == Bits(want));
        const MemoryBreakdown got_terms = model.Estimate(other, pipeline);
        REQUIRE(got_terms.terms.size() == want_terms.terms.size());
        for (size_t t = 0; t < want_terms.terms.size(); ++t) {
          CAPTURE(want_terms.terms[t].name);
          REQUIRE(Bits(got_terms.terms[t].bytes) == Bits(want_terms.terms[t].bytes));
        }
        ++compared;
      }
    }
  }
  CHECK(compared > 1000);
}

}  // namespace
}  // namespace foldplan
