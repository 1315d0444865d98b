// Megatron's split of a model's decoder layers over pipeline stages, one of
// the candidates planner/pipeline.h's ChooseStageLayers weighs.
//
// Megatron's rules: even when layers % (pp * vpp) == 0; otherwise the first
// and last pipeline stages take F and L layers (--decoder-first/last-
// pipeline-num-layers) and the pp - 2 middle stages share the rest equally.
// With vpp > 1 each pipeline stage's layers are split equally over its vpp
// chunks (virtual stage v*pp + p lives on pipeline rank p), so every
// stage's count must divide by vpp.
#pragma once

#include <vector>

#include "core/status.h"

namespace foldplan {

// Layers per virtual stage (pp * vpp entries, Megatron's order). When the
// layers do not divide evenly, picks Megatron's first/last split that
// minimises the heaviest stage (ties: first and last as equal as possible,
// the last stage, which also holds the output layer, no heavier than the
// first). Error when no Megatron split exists.
Result<std::vector<int>> SplitLayers(int layers, int pp, int vpp);

}  // namespace foldplan
