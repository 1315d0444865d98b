// Peak memory of layout families (costmodel/memory.h's FamilyPeakMemo)
// against MemoryModel::PeakBytes, side by side: DeepSeek-V3 on 16,384 H100
// GPUs with the widened job and the recipe options (bench/deepseek_inputs.h),
// families of pp 8, 16 and 32 (vpp 1 and 2, both schedules, several degree
// sets, mbs 1 and 2), each scored over all its memory variants (4 recompute
// x 2 dispatchers x 2 a2a_overlap x 3 precisions x 2 fsdp = 96). The memo's
// time includes its Reset per family; neither includes the pipeline
// description, which the family shares. Counters: CPU ns per variant of
// each, and their ratio.
#include <benchmark/benchmark.h>

#include <time.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>

#include "costmodel/memory.h"
#include "costmodel/memory_memo.h"
#include "deepseek_inputs.h"
#include "planner/legality.h"
#include "planner/pipeline.h"

namespace {

using namespace foldplan;

struct Family {
  PipelineDescription pipeline;
  std::vector<Layout> variants;  // variants[0] is the base
};

struct Setup {
  bench::BenchInputs in;
  std::vector<Family> families;
  size_t variants = 0;
};

// The memory variants the job offers of one base.
std::vector<Layout> Variants(const Layout& base, const JobSpec& job) {
  std::vector<Layout> out;
  for (const Recompute& r : job.recompute) {
    for (Dispatcher d : job.dispatchers) {
      for (bool a2a : job.a2a_overlap) {
        for (Precision p : job.precisions) {
          for (bool fsdp : job.fsdp) {
            Layout l = base;
            l.recompute = r;
            l.dispatcher = d;
            l.a2a_overlap = a2a;
            l.precision = p;
            l.fsdp = fsdp;
            out.push_back(l);
          }
        }
      }
    }
  }
  return out;
}

// Legal families of pipeline size `pp` (0: 8, 16 and 32).
const Setup& Families(int pp) {
  static std::map<int, Setup> cache;
  if (auto it = cache.find(pp); it != cache.end()) return it->second;
  Setup s{bench::DeepSeekV3On(16384), {}, 0};
  bench::WidenJob(s.in.job);
  bench::AddRecipeOptions(s.in.job);
  const LegalityContext ctx{&s.in.cluster, &s.in.model, &s.in.job, nullptr};
  struct Degrees {
    int tp, cp, ep, etp;
  };
  const Degrees degree_sets[] = {{1, 1, 64, 1}, {2, 1, 32, 1}, {4, 2, 64, 1}, {8, 1, 8, 8}, {2, 4, 16, 2}};
  std::vector<int> pps = pp > 0 ? std::vector<int>{pp} : std::vector<int>{8, 16, 32};
  for (int p : pps) {
    for (int vpp : {1, 2}) {
      for (PipelineSchedule schedule : s.in.job.pipeline_schedules) {
        for (const Degrees& g : degree_sets) {
          for (int mbs : {1, 2}) {
            Layout base;
            base.world = 16384;
            base.pp = p;
            base.vpp = vpp;
            base.tp = g.tp;
            base.cp = g.cp;
            base.dp = 16384 / (p * g.tp * g.cp);
            base.ep = g.ep;
            base.etp = g.etp;
            base.edp = 16384 / (p * g.ep * g.etp);
            base.mbs = mbs;
            base.schedule = schedule;
            if (!CheckLayout(base, ctx).empty()) continue;
            Family f{DescribePipeline(base, s.in.model), Variants(base, s.in.job)};
            s.variants += f.variants.size();
            s.families.push_back(std::move(f));
          }
        }
      }
    }
  }
  if (s.families.empty()) {
    std::cerr << "no legal family for pp " << pp << "\n";
    std::exit(1);
  }
  return cache[pp] = std::move(s);
}

uint64_t Bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// Each iteration: every variant of every family through PeakBytes, then
// through a FamilyPeakMemo, each timed on the thread's CPU clock (the
// machines this runs on are shared; wall time would count the others).
void BM_FamilyPeakVsPeakBytes(benchmark::State& state) {
  const Setup& s = Families(static_cast<int>(state.range(0)));
  const MemoryModel model(s.in.model, s.in.job, s.in.cluster);
  FamilyPeakMemo memo;
  // The two agree (the test holds them to it; a benchmark of a wrong
  // answer would be no benchmark).
  for (const Family& f : s.families) {
    memo.Reset(model, f.variants[0], f.pipeline);
    for (const Layout& l : f.variants) {
      int a = 0, b = 0;
      if (Bits(model.PeakBytes(l, f.pipeline, &a)) != Bits(memo.PeakBytes(l, &b)) || a != b) {
        std::cerr << "FamilyPeakMemo disagrees with PeakBytes on " << FormatLayout(l) << "\n";
        std::exit(1);
      }
    }
  }
  auto cpu_s = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  };
  double direct_s = 0, memo_s = 0;
  for (auto _ : state) {
    const double t0 = cpu_s();
    for (const Family& f : s.families) {
      for (const Layout& l : f.variants) {
        int stage = 0;
        benchmark::DoNotOptimize(model.PeakBytes(l, f.pipeline, &stage));
        benchmark::DoNotOptimize(stage);
      }
    }
    const double t1 = cpu_s();
    for (const Family& f : s.families) {
      memo.Reset(model, f.variants[0], f.pipeline);
      for (const Layout& l : f.variants) {
        int stage = 0;
        benchmark::DoNotOptimize(memo.PeakBytes(l, &stage));
        benchmark::DoNotOptimize(stage);
      }
    }
    const double t2 = cpu_s();
    direct_s += t1 - t0;
    memo_s += t2 - t1;
  }
  const double n = double(state.iterations()) * double(s.variants);
  state.counters["families"] = double(s.families.size());
  state.counters["variants"] = double(s.variants);
  state.counters["peakbytes_ns"] = direct_s / n * 1e9;
  state.counters["memo_ns"] = memo_s / n * 1e9;
  state.counters["ratio"] = direct_s / memo_s;
  state.SetLabel(state.range(0) > 0 ? "pp " + std::to_string(state.range(0)) : "pp 8, 16, 32");
}
BENCHMARK(BM_FamilyPeakVsPeakBytes)->Arg(8)->Arg(16)->Arg(32)->Arg(0)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
