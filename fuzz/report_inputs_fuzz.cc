// libFuzzer target: `foldplan report`'s readers of a plan file's candidates
// and of `simulate --json` output (report/report_inputs.cc). An accepted
// input is drawn as the report draws it (the scatter, the breakdowns, the
// critical path and memory timelines), which must stay bounded and finite.
#include <cmath>

#include "fuzz/fuzz_input.h"
#include "report/breakdown_svg.h"
#include "report/report_inputs.h"
#include "report/scatter_svg.h"
#include "report/sim_svg.h"
#include "report/svg.h"

using namespace foldplan;

namespace {

// Drawn output is bounded whatever the input holds (sim_svg.h's caps): a
// page of a few MB, never one that grows with the input's numbers.
void CheckBounded(const std::string& svg, const char* what) {
  if (svg.size() > (64u << 20) || svg.find("nan") != std::string::npos || svg.find("inf") != std::string::npos) {
    std::fprintf(stderr, "%s: %zu bytes, or a non-finite number drawn\n", what, svg.size());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = fuzz::AsText(data, size);
  auto plan = ParsePlanSummary(text, fuzz::kFuzzFile);
  fuzz::CheckRefusal(plan.status());
  if (plan.ok()) {
    CheckBounded(CandidateScatterSvg(plan->candidates, plan->memory_limit_gib), "candidate scatter");
    const PlanCandidate& best = plan->candidates.front();
    CheckBounded(StackedBarSvg(StepSegments(best), SecondsText, 0, ""), "step breakdown");
    CheckBounded(StackedBarSvg(MemorySegments(best), GibText, best.hbm_gib, "HBM"), "memory breakdown");
  }
  auto sim = ParseSimulation(text, fuzz::kFuzzFile);
  fuzz::CheckRefusal(sim.status());
  if (sim.ok()) {
    CheckBounded(CriticalPathSvg(sim.value()).svg, "critical path");
    CheckBounded(MemoryTimelineSvg(sim.value()).svg, "memory timeline");
  }
  return 0;
}
