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
  return in;
}

// The widened job of bench/plan_widened_bench.cc: every recipe option a
// candidate (4 recompute choices, 2 dispatchers, EP overlap on and off,
// bf16 and fp8, FSDP on and off, TP overlap on and off).
inline void WidenJob(JobSpec& job) {
  job.recompute = {Recompute::None(), Recompute::Selective(), Recompute::Full(),
                   Recompute::Modules((1u << int(RecomputeModule::kLayernorm)) |
                                      (1u << int(RecomputeModule::kMoeAct)))};
  job.dispatchers = {Dispatcher::kAllToAll, Dispatcher::kDeepEP};
  job.a2a_overlap = {false, true};
  job.precisions = {Precision::kBF16, Precision::kFP8Tensorwise};
  job.fsdp = {false, true};
  job.tp_overlap = {false, true};
}

}  // namespace foldplan::bench
