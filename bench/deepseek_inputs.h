// The inputs the planner and cost-model benchmarks share: DeepSeek-V3 with
// the default job on DGX H100 nodes (the shipped h100-dgx-128n cluster,
// resized to `gpus`). Exits with a message if the shipped files do not load:
// a benchmark has nothing to time then.
#pragma once

#include <cstdlib>
#include <iostream>

#include "inputs/loader.h"

namespace foldplan::bench {

struct BenchInputs {
  ClusterSpec cluster;
  ModelSpec model;
  JobSpec job;
};

inline BenchInputs DeepSeekV3On(int gpus) {
  auto cluster = LoadCluster("h100-dgx-128n");
  auto model = LoadModel("deepseek-v3");
  auto job = LoadJob("default");
  for (const Status& s : {cluster.status(), model.status(), job.status()}) {
    if (!s.ok()) {
      std::cerr << "cannot load the shipped inputs: " << s.message() << "\n";
      std::exit(1);
    }
  }
  BenchInputs in{cluster.value(), model.value(), job.value()};
  in.cluster.nodes = gpus / in.cluster.gpus_per_node;
  in.job = JobForCluster(in.job, in.cluster);  // the dispatchers of the cluster, as `plan` takes them
  return in;
}

// The default job as it was before it searched both CP styles, EP
// overlap, FSDP and the cluster's dispatchers: Ulysses CP, alltoall, no EP
// overlap, the distributed optimizer (TP overlap off and on, the implied
// schedules, as now). The scoring, enumeration and communication
// benchmarks keep it, so that their figures compare with the earlier
// ones in doc/performance.md (and their legal sets stay small enough to store);
// BM_PlanDeepSeekV3 searches the default job, BM_PlanDeepSeekV3Before this.
inline void DefaultJobBefore(JobSpec& job) {
  job.cp_styles = {CpStyle::kUlysses};
  job.dispatchers = {Dispatcher::kAllToAll};
  job.a2a_overlap = {false};
  job.fsdp = {false};
  job.pipeline_schedules.clear();
}

// The widened job (bench/plan_widened_bench.cc, plan_bench's widened
// scoring): the default job before (above), then micro-batch 1/2/4/8, VPP
// 1/2/4/8, none / selective / full recompute, both CP styles, six orders,
// a global batch of 8192.
inline void WidenJob(JobSpec& job) {
  DefaultJobBefore(job);
  job.micro_batch_sizes = {1, 2, 4, 8};
  job.vpp = {1, 2, 4, 8};
  job.recompute = {Recompute::None(), Recompute::Selective(), Recompute::Full()};
  job.cp_styles = {CpStyle::kUlysses, CpStyle::kRing};
  job.orders = {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-ep-cp-dp-pp",
                "cp-tp-ep-dp-pp", "tp-dp-cp-ep-pp", "ep-tp-cp-dp-pp"};
  job.global_batch = 8192;
}

// The production-recipe options as candidates on top: recompute modules,
// alltoall and DeepEP, EP and TP overlap, bf16 and two FP8 recipes, FSDP,
// the 1F1B and ZB-H1 schedules.
inline void AddRecipeOptions(JobSpec& job) {
  job.recompute.push_back(Recompute::Modules((1u << int(RecomputeModule::kLayernorm)) |
                                             (1u << int(RecomputeModule::kMoeAct))));
  job.dispatchers = {Dispatcher::kAllToAll, Dispatcher::kDeepEP};
  job.a2a_overlap = {false, true};
  job.precisions = {Precision::kBF16, Precision::kFP8Tensorwise, Precision::kFP8Blockwise};
  job.fsdp = {false, true};
  job.tp_overlap = {false, true};
  job.pipeline_schedules = {PipelineSchedule::k1F1B, PipelineSchedule::kZeroBubbleH1};
}

}  // namespace foldplan::bench
