// The pipeline description: which schedule a layout runs and what each of
// its pp x vpp virtual stages holds (decoder layers, MoE among them, the
// embedding, the output layer and loss) and which pipeline rank runs it.
// The one home of two rules every part of foldplan uses:
//  - a layout's layers per virtual stage are its stage_layers when they
//    cover the model (pp x vpp entries summing to its layers), else
//    Megatron's split (planner/pipeline_split.h), else, for a layout that
//    has no Megatron split and is illegal anyway, an even spread (the first
//    layers % (pp x vpp) stages one layer more), so that its costs still
//    mean something next to the violation;
//  - virtual stage c (Megatron's order) runs on pipeline rank c % pp as its
//    model chunk c / pp, and holds the next stage_layers[c] layers.
// The embedding is on virtual stage 0, the output layer and loss on the
// last one.
#pragma once

#include <vector>

#include "inputs/model.h"
#include "planner/layout.h"

namespace foldplan {

// The pipeline schedule (doc/cost-model.md derives each one's step time).
enum class PipelineSchedule {
  k1F1B,             // one forward, one backward (PipeDream-Flush), vpp == 1
  kInterleaved1F1B,  // Megatron's interleaved 1F1B over vpp model chunks
};
const char* Name(PipelineSchedule schedule);  // "1f1b", "interleaved-1f1b"

struct VirtualStage {
  int index = 0;          // c, in Megatron's order
  int pipeline_rank = 0;  // c % pp
  int chunk = 0;          // c / pp: the model chunk it is on its rank
  int first_layer = 0;    // its first decoder layer (0-based)
  int layers = 0;         // decoder layers
  int moe_layers = 0;     // of which MoE
  bool embedding = false; // holds the input embedding (c == 0)
  bool loss = false;      // holds the output layer and loss (the last c)
  int dense_layers() const { return layers - moe_layers; }
};

// What one pipeline rank holds: the sum of its virtual stages.
struct PipelineRank {
  int layers = 0;
  int moe_layers = 0;
  bool embedding = false;
  bool loss = false;
  int dense_layers() const { return layers - moe_layers; }
};

struct PipelineDescription {
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int pp = 1;
  int vpp = 1;
  std::vector<VirtualStage> stages;  // pp x vpp, in Megatron's order
  std::vector<PipelineRank> ranks;   // pp

  // Decoder layers per virtual stage (a Layout's stage_layers).
  std::vector<int> StageLayers() const;
};

// The schedule a layout runs: interleaved 1F1B when vpp > 1, else 1F1B.
PipelineSchedule ScheduleOf(const Layout& layout);

// The layout's pipeline on `model` by the rules above. pp and vpp below 1
// count as 1.
PipelineDescription DescribePipeline(const Layout& layout, const ModelSpec& model);

}  // namespace foldplan
