#include "planner/pipeline.h"

#include <algorithm>
#include <numeric>

#include "planner/pipeline_split.h"

namespace foldplan {
namespace {

// Layers per virtual stage by the rules of the header.
std::vector<int> LayersPerVirtualStage(const Layout& l, const ModelSpec& model, int pp, int vpp) {
  const int stages = pp * vpp;
  if (static_cast<int>(l.stage_layers.size()) == stages &&
      std::accumulate(l.stage_layers.begin(), l.stage_layers.end(), 0) == model.layers) {
    return l.stage_layers;
  }
  if (Result<std::vector<int>> split = SplitLayers(model.layers, pp, vpp); split.ok()) {
    return std::move(split).value();
  }
  std::vector<int> even(static_cast<size_t>(stages), model.layers / stages);
  for (int i = 0; i < model.layers % stages; ++i) ++even[static_cast<size_t>(i)];
  return even;
}

}  // namespace

const char* Name(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::k1F1B: return "1f1b";
    case PipelineSchedule::kInterleaved1F1B: return "interleaved-1f1b";
  }
  return "?";
}

PipelineSchedule ScheduleOf(const Layout& layout) {
  return layout.vpp > 1 ? PipelineSchedule::kInterleaved1F1B : PipelineSchedule::k1F1B;
}

std::vector<int> PipelineDescription::StageLayers() const {
  std::vector<int> out;
  out.reserve(stages.size());
  for (const VirtualStage& s : stages) out.push_back(s.layers);
  return out;
}

PipelineDescription DescribePipeline(const Layout& layout, const ModelSpec& model) {
  PipelineDescription d;
  d.pp = std::max(1, layout.pp);
  d.vpp = std::max(1, layout.vpp);
  d.schedule = ScheduleOf(layout);
  const std::vector<int> layers = LayersPerVirtualStage(layout, model, d.pp, d.vpp);
  d.stages.resize(layers.size());
  d.ranks.resize(static_cast<size_t>(d.pp));
  int first = 0;
  for (size_t c = 0; c < layers.size(); ++c) {
    VirtualStage& s = d.stages[c];
    s.index = static_cast<int>(c);
    s.pipeline_rank = s.index % d.pp;
    s.chunk = s.index / d.pp;
    s.first_layer = first;
    s.layers = layers[c];
    s.moe_layers = model.moe_layers_below(first + s.layers) - model.moe_layers_below(first);
    s.embedding = c == 0;
    s.loss = c + 1 == layers.size();
    first += s.layers;
    PipelineRank& r = d.ranks[static_cast<size_t>(s.pipeline_rank)];
    r.layers += s.layers;
    r.moe_layers += s.moe_layers;
    r.embedding |= s.embedding;
    r.loss |= s.loss;
  }
  return d;
}

}  // namespace foldplan
