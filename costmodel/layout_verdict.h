// Whether a costed layout can run as planned: it breaks no rule (planner/
// legality.h) and its worst stage's peak fits in the GPU's HBM (the memory
// model's MemoryBreakdown::fits). The one verdict the commands that show
// or export one layout give (explain, simulate, ranks, diff, report), in
// the same words on stderr and the same fields in their JSON.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/evaluate.h"

namespace foldplan {

struct LayoutVerdict {
  std::string layout;  // the layout's canonical text
  double peak_gib = 0;
  double hbm_gib = 0;
  int worst_stage = 0;  // the pipeline rank the peak is on
  bool fits = true;
  std::vector<std::pair<std::string, std::string>> violations;  // (rule, detail), in check order

  bool legal() const { return violations.empty(); }
  bool runs() const { return fits && legal(); }
};

// From a full evaluation: its memory verdict and its violations.
LayoutVerdict JudgeLayout(const Evaluation& e);

// "peak 91.3 GiB on stage 2 > 79.6 GiB of HBM" (for a layout that does not fit).
std::string OverHbmText(const LayoutVerdict& v);

// What is wrong, "" when it runs: "does not fit in memory: peak 91.3 GiB on
// stage 2 > 79.6 GiB of HBM", "breaks 2 rules: tp_divides_heads,
// ep_divides_experts", or both joined by "; it also ".
std::string VerdictProblems(const LayoutVerdict& v);

// One line for stderr, "" when the layout runs: "warning: `who` <problems>"
// with a newline (`who` is, say, "layout tp1 cp1 dp128 pp1 | ep1 etp1
// edp128" or "B (tp2 cp1 ...)").
std::string VerdictWarning(const LayoutVerdict& v, const std::string& who);

// The JSON fields every command marks its output with:
// {"fits", "peak_gib", "hbm_gib", "worst_stage", "violations": [{"rule", "detail"}]}.
nlohmann::ordered_json VerdictJson(const LayoutVerdict& v);

}  // namespace foldplan
