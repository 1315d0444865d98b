// Megatron's --pipeline-model-parallel-layout grammar: an explicit
// placement of the embedding, decoder layers, MTP layers and loss on the
// pp x vpp virtual stages (doc/folding.md section 2.1).
//
//   layout := item*          stages are separated by '|'
//   item   := atom ['*' N]   X*N repeats X N times (N >= 1)
//   atom   := 'E' | 't' | 'm' | 'L' | '|' | '(' layout ')'
//
// E is the input embedding, t a decoder layer, m an MTP layer, L the output
// layer and loss; whitespace is ignored. "Et|(tt|)*30L" is 32 virtual
// stages: E and one layer, thirty stages of two layers, and the loss alone.
// The structure rules that need no model are checked here: E exactly once,
// opening the first stage; L exactly once, closing the last; every m after
// every t and before L. Whether the counts fit a layout (pp x vpp stages)
// and a model (its layers and MTP layers) is planner/legality.h's
// pipeline_split rule.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace foldplan {

// What an explicit pipeline layout places on each virtual stage.
struct PipelineLayout {
  std::vector<int> decoder;  // 't' per virtual stage
  std::vector<int> mtp;      // 'm' per virtual stage
  int stages() const { return static_cast<int>(decoder.size()); }
  int decoder_layers() const;
  int mtp_layers() const;
};

// Parses and checks the grammar and structure above. Errors give the
// 1-based column of the problem ("column 7: ')' without '('").
Result<PipelineLayout> ParsePipelineLayout(std::string_view text);

// The canonical text of a layout: E on the first stage, L on the last,
// runs of identical middle stages grouped ("Et|(tt|)*30L"), runs of more
// than two t as "t*N". `mtp` may be empty (no m written). Parses back to
// the same stages.
std::string FormatPipelineLayout(const std::vector<int>& decoder, const std::vector<int>& mtp);

}  // namespace foldplan
