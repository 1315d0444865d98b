// libFuzzer target: the layout syntax (planner/layout.cc), `--fix` pins and
// Megatron's pipeline-layout grammar, then what `explain` does with a layout
// that parses: the rules, and the costs, of DeepSeek-V3 on 1,024 H100s.
#include <memory>

#include "costmodel/evaluate.h"
#include "fuzz/fuzz_input.h"
#include "inputs/loader.h"
#include "planner/layout.h"
#include "planner/pipeline_layout.h"

using namespace foldplan;

namespace {

struct Inputs {
  ClusterSpec cluster;
  ModelSpec model;
  JobSpec job;
  std::unique_ptr<CostModel> cost;
};

template <typename T>
T OrDie(Result<T> r) {
  if (!r.ok()) {
    std::fprintf(stderr, "layout_fuzz: %s\n", r.status().message().c_str());
    std::abort();
  }
  return std::move(r).value();
}

const Inputs& Shipped() {
  static const Inputs* inputs = [] {
    auto* in = new Inputs{OrDie(LoadCluster("h100-dgx-128n")), OrDie(LoadModel("deepseek-v3")),
                          OrDie(LoadJob("default")), nullptr};
    in->cost = OrDie(CostModel::Create(in->cluster, in->model, in->job));
    return in;
  }();
  return *inputs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // command-line text, not files
  const std::string text = fuzz::AsText(data, size);
  const Inputs& in = Shipped();
  (void)ParseLayoutPins(text);
  (void)ParsePipelineLayout(text);
  auto layout = ParseLayout(text, in.cluster.total_gpus(), &in.job);
  if (layout.ok()) (void)in.cost->Evaluate(layout.value());
  return 0;
}
