// Step time (costmodel/evaluate.h): the pipeline formula, the step's sum,
// tokens/s and MFU follow from the parts as doc/cost-model.md states them.
#include <doctest/doctest.h>

#include <random>

#include "costmodel/evaluate.h"
#include "inputs/loader.h"
#include "planner/enumerate.h"

using namespace foldplan;

namespace {

struct Fixture {
  ClusterSpec cluster = LoadCluster("h100-dgx-16n").value();
  ModelSpec model = LoadModel("mixtral-8x22b").value();
  JobSpec job = LoadJob("default").value();
  std::unique_ptr<CostModel> cost = std::move(CostModel::Create(cluster, model, job)).value();

  Evaluation Eval(const std::string& text) {
    auto l = ParseLayout(text, cluster.total_gpus());
    REQUIRE(l.ok());
    return cost->Evaluate(l.value());
  }
};

}  // namespace

TEST_CASE("interleaved 1F1B: pipeline = m t_max + (pp - 1) / vpp t_max + (pp - 1) s") {
  Fixture f;
  // tp1 cp4 pp4 vpp2: dp = 128 / 16 = 8, m = 1024 / 8 = 128 micro-batches;
  // bubble = 3/2 t_max + 3 crossings s. Each rank sends vpp = 2 crossings
  // per micro-batch, so the step's pp_send_recv total is 2 x 128 x s.
  const Evaluation e = f.Eval("tp=1,cp=4,pp=4,vpp=2,ep=8,etp=1");
  CHECK(e.violations.empty());
  CHECK(e.step.microbatches == 128);
  double s = 0;
  for (const CommKindCost& c : e.comm) {
    if (c.name == "pp_send_recv") s = c.total_s / (2 * 128);
  }
  REQUIRE(s > 0);
  CHECK(e.step.bubble_s == doctest::Approx(1.5 * e.step.stage_time_s + 3 * s));
  CHECK(e.step.pipeline_s == doctest::Approx(128 * e.step.stage_time_s + e.step.bubble_s));
  CHECK(e.step.stage_time_s ==
        doctest::Approx(e.step.stage_compute_s + e.step.stage_exposed_comm_s + e.step.stage_host_exposed_s));
}

TEST_CASE("the step is pipeline + exposed data parallel + optimizer + host syncs; tokens/s and MFU follow") {
  Fixture f;
  const Evaluation e = f.Eval("tp=2,cp=1,pp=8,ep=8,etp=1");
  const StepBreakdown& s = e.step;
  CHECK(s.step_time_s == doctest::Approx(s.pipeline_s + s.dp_exposed_s + s.optimizer_s + s.host_step_s));
  // The gradient norm and the loss report: two syncs of 21.1 us (HostSpec).
  CHECK(s.host_step_s == doctest::Approx(2 * 21.1e-6));
  // 1024 sequences x 4096 tokens per step.
  CHECK(s.tokens_per_s == doctest::Approx(1024.0 * 4096 / s.step_time_s));
  // MFU = FLOPs per token x tokens/s / (128 GPUs x 989 TFLOP/s).
  CHECK(s.mfu == doctest::Approx(s.model_flops_per_token * s.tokens_per_s / (128 * 989e12)));
  CHECK(s.mfu > 0.05);
  CHECK(s.mfu < 0.8);
}

TEST_CASE("1F1B without interleaving has a bubble of (pp - 1) t_max") {
  Fixture f;
  const Evaluation e = f.Eval("tp=2,cp=1,pp=8,ep=8,etp=1");
  CHECK(e.step.bubble_s == doctest::Approx(7 * e.step.stage_time_s));
}

TEST_CASE("Score agrees with Evaluate on step time and memory") {
  Fixture f;
  for (const char* text : {"tp=1,cp=4,pp=4,vpp=2,ep=8,etp=1", "tp=2,cp=1,pp=8,ep=8,etp=1",
                           "tp=4,cp=1,pp=4,ep=8,etp=2,recompute=full"}) {
    Layout l = ParseLayout(text, 128).value();
    const Evaluation e = f.cost->Evaluate(l);
    l.stage_layers = e.layout.stage_layers;
    const LayoutScore s = f.cost->Score(l, false);
    CHECK(s.peak_memory_gib == doctest::Approx(e.memory.peak_gib()));
    CHECK(s.fits == e.memory.fits);
    if (s.fits) CHECK(s.step_time_s == doctest::Approx(e.step.step_time_s));
  }
}

TEST_CASE("an illegal layout is still evaluated, with its violations") {
  Fixture f;
  // mixtral-8x22b has 8 KV heads: tp 16 breaks tp_divides_kv_heads.
  const Evaluation e = f.Eval("tp=16,cp=1,pp=8,ep=1,etp=1");
  CHECK_FALSE(e.violations.empty());
  CHECK(e.step.step_time_s > 0);
}

TEST_CASE("every legal layout of a small search gets a finite, positive step time") {
  Fixture f;
  f.cluster.nodes = 4;
  auto cost = std::move(CostModel::Create(f.cluster, f.model, f.job)).value();
  const Enumeration all = EnumerateLayouts({&f.cluster, &f.model, &f.job});
  REQUIRE(all.legal_count > 0);
  for (const Layout& l : all.legal) {
    const LayoutScore s = cost->Score(l, false);
    CHECK(s.peak_memory_gib > 0);
    if (s.fits) {
      CHECK(s.step_time_s > 0);
      CHECK(std::isfinite(s.step_time_s));
    }
  }
}
