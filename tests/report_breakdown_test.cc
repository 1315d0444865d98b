// The best layout's step as stacked parts: they are the plan file's
// breakdown and sum to its step time; the memory parts are its nonzero
// terms.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "report/breakdown_svg.h"
#include "report/report_inputs.h"

namespace foldplan {
namespace {

double Sum(const std::vector<BarSegment>& segments) {
  double s = 0;
  for (const BarSegment& b : segments) s += b.value;
  return s;
}

PlanCandidate HandMade() {
  // m = 8 micro-batches, stage compute 0.1 s each: 0.8 s of compute;
  // exposed tp 0.05 s and ep 0.1 s over the step; stage time 0.13 s, so
  // m x stage time = 1.04 s = 0.8 + 0.15 + 0.09 (the other 0.09 s: stage
  // boundaries); bubble 0.2 s: pipeline 1.24 s; + dp 0.05 + optimizer 0.03
  // = step 1.32 s.
  PlanCandidate c;
  c.microbatches = 8;
  c.stage_compute_s = 0.1;
  c.stage_time_s = 0.13;
  c.bubble_s = 0.2;
  c.pipeline_s = 8 * 0.13 + 0.2;
  c.dp_exposed_s = 0.05;
  c.optimizer_s = 0.03;
  c.step_time_s = c.pipeline_s + c.dp_exposed_s + c.optimizer_s;
  c.comm = {{"tp_allgather", 0.2, 0.05}, {"ep_dispatch", 0.3, 0.1}, {"cp_ring", 0.1, 0},
            {kDataParallelExposedKind, 0, 0.05}};
  c.memory_terms = {{"parameters", 10, "p"}, {"gradients", 0, "g"}, {"activations", 30.5, "a"}};
  c.peak_gib = 40.5;
  c.hbm_gib = 80;
  return c;
}

TEST_CASE("breakdown: compute, exposed kinds, other, bubble, dp, optimizer, summing to the step") {
  const PlanCandidate c = HandMade();
  const std::vector<BarSegment> parts = StepSegments(c);
  REQUIRE(parts.size() == 7);
  const std::vector<std::string> names = {"compute", "exposed tp_allgather", "exposed ep_dispatch",
                                          "other pipeline time", "pipeline bubble", "data-parallel exposed",
                                          "optimizer"};
  const std::vector<double> values = {0.8, 0.05, 0.1, 0.09, 0.2, 0.05, 0.03};
  for (size_t i = 0; i < parts.size(); ++i) {
    CAPTURE(i);
    CHECK(parts[i].name == names[i]);
    CHECK(parts[i].value == doctest::Approx(values[i]).epsilon(1e-12));
  }
  // Hidden kinds (cp_ring: nothing exposed) and the dp entry (its own part) are not kinds here.
  CHECK(Sum(parts) == doctest::Approx(c.step_time_s).epsilon(1e-15));
}

TEST_CASE("breakdown: the host's exposure per micro-batch x m, and the step's host syncs, as their own parts") {
  // 2 ms of exposed host per micro-batch: 8 x 2 ms = 16 ms of the 0.09 s
  // of the stage's "other" time; and 42 us of step syncs after the optimizer.
  PlanCandidate c = HandMade();
  c.stage_host_exposed_s = 2e-3;
  c.host_step_s = 42e-6;
  c.step_time_s += c.host_step_s;
  const std::vector<BarSegment> parts = StepSegments(c);
  auto value = [&](const std::string& name) {
    for (const BarSegment& p : parts) {
      if (p.name == name) return p.value;
    }
    return -1.0;
  };
  CHECK(value("exposed host") == doctest::Approx(16e-3).epsilon(1e-12));
  CHECK(value("other pipeline time") == doctest::Approx(0.09 - 16e-3).epsilon(1e-12));
  CHECK(value("host syncs") == doctest::Approx(42e-6).epsilon(1e-9));
  CHECK(Sum(parts) == doctest::Approx(c.step_time_s).epsilon(1e-15));
}

TEST_CASE("breakdown: no 'other' part when compute and the kinds fill the stage time") {
  PlanCandidate c = HandMade();
  c.stage_time_s = 0.1 + 0.15 / 8;
  c.pipeline_s = 8 * c.stage_time_s + c.bubble_s;
  c.step_time_s = c.pipeline_s + c.dp_exposed_s + c.optimizer_s;
  const std::vector<BarSegment> parts = StepSegments(c);
  for (const BarSegment& p : parts) CHECK(p.name != "other pipeline time");
  CHECK(Sum(parts) == doctest::Approx(c.step_time_s).epsilon(1e-15));
}

TEST_CASE("breakdown: the plan fixture's every candidate splits into parts summing to its step") {
  auto plan = ReadPlanSummary(std::string(FOLDPLAN_TEST_DATA_DIR) + "/validate/pp2_cp2_ep4.plan.json");
  REQUIRE_MESSAGE(plan.ok(), plan.status().message());
  REQUIRE(!plan->candidates.empty());
  for (const PlanCandidate& c : plan->candidates) {
    CAPTURE(c.layout);
    const std::vector<BarSegment> parts = StepSegments(c);
    CHECK(Sum(parts) == doctest::Approx(c.step_time_s).epsilon(1e-12));
    for (const BarSegment& p : parts) CHECK(p.value >= -1e-12 * c.step_time_s);
    // Memory: the nonzero terms, summing to the peak.
    CHECK(Sum(MemorySegments(c)) == doctest::Approx(c.peak_gib).epsilon(1e-9));
  }
}

TEST_CASE("breakdown: the bar draws one rect per part, a capacity marker when asked") {
  const PlanCandidate c = HandMade();
  const std::string svg = StackedBarSvg(MemorySegments(c), GibText, c.hbm_gib, "HBM 80 GiB");
  CHECK(svg.find("data-segment=\"parameters\" data-value=\"10\"") != std::string::npos);
  CHECK(svg.find("data-segment=\"activations\" data-value=\"30.5\"") != std::string::npos);
  CHECK(svg.find("data-segment=\"gradients\"") == std::string::npos);  // zero: left out
  CHECK(svg.find("HBM 80 GiB") != std::string::npos);
}

// The fill of the bar part named `name` in a stacked bar's markup ("" if absent).
std::string BreakdownFillOf(const std::string& svg, const std::string& name) {
  const size_t at = svg.find("data-segment=\"" + name + "\"");
  if (at == std::string::npos) return "";
  const size_t fill = svg.rfind("fill=\"", at);
  return svg.substr(fill + 6, svg.find('"', fill + 6) - fill - 6);
}

TEST_CASE("breakdown: a memory term has the same colour in two reports listing terms in other orders") {
  PlanCandidate a = HandMade(), b = HandMade();
  a.memory_terms = {{"parameters", 10, ""}, {"activations", 30, ""}, {"NCCL buffers", 1, ""}};
  b.memory_terms = {{"activations", 20, ""}, {"optimizer states", 5, ""}, {"NCCL buffers", 2, ""},
                    {"parameters", 4, ""}};
  const std::string sa = StackedBarSvg(MemorySegments(a), GibText, 80, "HBM");
  const std::string sb = StackedBarSvg(MemorySegments(b), GibText, 80, "HBM");
  for (const char* term : {"parameters", "activations", "NCCL buffers"}) {
    CAPTURE(term);
    CHECK_FALSE(BreakdownFillOf(sa, term).empty());
    CHECK(BreakdownFillOf(sa, term) == BreakdownFillOf(sb, term));
  }
  CHECK(BreakdownFillOf(sb, "optimizer states") != BreakdownFillOf(sb, "activations"));
  // Step parts too: "optimizer" keeps its colour whatever comes before it.
  PlanCandidate c = HandMade();
  c.comm.clear();
  const std::string step_a = StackedBarSvg(StepSegments(c), GibText, 0, "");
  const std::string step_b = StackedBarSvg(StepSegments(HandMade()), GibText, 0, "");
  CHECK(BreakdownFillOf(step_a, "optimizer") == BreakdownFillOf(step_b, "optimizer"));
  CHECK(BreakdownFillOf(step_a, "pipeline bubble") == BreakdownFillOf(step_b, "pipeline bubble"));
}

}  // namespace
}  // namespace foldplan
