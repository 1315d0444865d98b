// The candidates' Pareto front (minimum step time and minimum memory) and
// the scatter built from it.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "report/scatter_svg.h"
#include "tests/text_count.h"

namespace foldplan {
namespace {

using foldplan::testing::Count;

TEST_CASE("pareto: a point is on the front when no other is at most as large in both and smaller in one") {
  // (memory GiB, step s):
  //   0 (1, 5)  front: the least memory
  //   1 (2, 3)  front
  //   2 (3, 4)  dominated by 1 (2 <= 3, 3 < 4)
  //   3 (4, 1)  front: the fastest
  //   4 (2, 3)  equal to 1: neither dominates the other, both on the front
  //   5 (5, 1)  dominated by 3 (same time, more memory)
  //   6 (0.5, 9) front: less memory than all
  const std::vector<std::pair<double, double>> points = {{1, 5}, {2, 3}, {3, 4}, {4, 1}, {2, 3}, {5, 1}, {0.5, 9}};
  CHECK(ParetoFront(points) == std::vector<size_t>{6, 0, 1, 4, 3});
  // Brute force against the definition, for the same set.
  for (size_t i = 0; i < points.size(); ++i) {
    bool dominated = false;
    for (size_t j = 0; j < points.size(); ++j) {
      const bool le = points[j].first <= points[i].first && points[j].second <= points[i].second;
      if (le && points[j] != points[i]) dominated = true;
    }
    const std::vector<size_t> front = ParetoFront(points);
    CAPTURE(i);
    CHECK((std::find(front.begin(), front.end(), i) != front.end()) == !dominated);
  }
  CHECK(ParetoFront({}).empty());
  CHECK(ParetoFront({{3, 3}}) == std::vector<size_t>{0});
}

TEST_CASE("scatter: one point per candidate, the front marked, the chosen one named, layouts escaped") {
  std::vector<PlanCandidate> c(4);
  c[0].layout = "tp=2,ep=8";
  c[0].step_time_s = 1.0, c[0].peak_gib = 60;   // chosen, fastest: on the front
  c[1].layout = "tp=4,ep=<8>";
  c[1].step_time_s = 1.2, c[1].peak_gib = 40;   // less memory: on the front
  c[2].layout = "tp=8,ep=8";
  c[2].step_time_s = 1.3, c[2].peak_gib = 50;   // dominated by 1
  c[3].layout = "tp=1,ep=16";
  c[3].step_time_s = 1.1, c[3].peak_gib = 70;   // dominated by 0
  const std::string svg = CandidateScatterSvg(c);
  for (int i = 1; i <= 4; ++i) CHECK(Count(svg, "data-candidate=\"" + std::to_string(i) + "\"") == 1);
  CHECK(Count(svg, "data-front=\"1\"") == 2);
  CHECK(svg.find("data-candidate=\"2\" data-front=\"1\"") != std::string::npos);
  CHECK(svg.find("data-candidate=\"3\" data-front") == std::string::npos);
  CHECK(svg.find("#1 (chosen): tp=2,ep=8") != std::string::npos);
  CHECK(svg.find("tp=4,ep=&lt;8&gt;") != std::string::npos);
  CHECK(svg.find("ep=<8>") == std::string::npos);
}

TEST_CASE("scatter: every candidate kept is a point numbered from 1 as in the table, twins share a label") {
  // 12 candidates (more than a plan's default top 10); #5 and #6 are twins
  // (equal step time and memory), so they share one point and one label.
  std::vector<PlanCandidate> c(12);
  for (size_t i = 0; i < c.size(); ++i) {
    c[i].layout = "tp=" + std::to_string(i + 1);
    c[i].step_time_s = 1.0 + 0.01 * static_cast<double>(i);
    c[i].peak_gib = 70 - static_cast<double>(i);
    c[i].hbm_gib = 80;
  }
  c[5].step_time_s = c[4].step_time_s;
  c[5].peak_gib = c[4].peak_gib;
  const std::string svg = CandidateScatterSvg(c);
  CHECK(Count(svg, "data-candidate=") == 12);
  for (int n = 1; n <= 12; ++n) {
    CAPTURE(n);
    CHECK(Count(svg, "data-candidate=\"" + std::to_string(n) + "\"") == 1);
    if (n != 5 && n != 6) CHECK(Count(svg, "data-label=\"" + std::to_string(n) + "\"") == 1);
  }
  CHECK(Count(svg, "data-label=\"5,6\"") == 1);
  CHECK(Count(svg, "data-label=") == 11);
  CHECK(svg.find("#6: tp=6") != std::string::npos);
  CHECK(svg.find("same step time and memory as #5") != std::string::npos);
}

TEST_CASE("scatter: the memory axis reaches the GPU's HBM, drawn as a line, and the plan's limit") {
  std::vector<PlanCandidate> c(2);
  c[0].step_time_s = 1.0, c[0].peak_gib = 40, c[0].hbm_gib = 79.6;
  c[1].step_time_s = 1.5, c[1].peak_gib = 30, c[1].hbm_gib = 79.6;
  const std::string svg = CandidateScatterSvg(c, 75.6);
  CHECK(Count(svg, "class=\"hbm\"") == 1);
  CHECK(svg.find("HBM 79.6 GiB") != std::string::npos);
  CHECK(Count(svg, "class=\"memory-limit\"") == 1);
  // The axis reaches 79.6 GiB: its ticks go past 70.
  CHECK(svg.find(">80</text>") != std::string::npos);
}

TEST_CASE("scatter: tokens per second carry thousands separators") {
  CHECK(TokensText(1284113.4) == "1,284,113");
  CHECK(TokensText(999) == "999");
  std::vector<PlanCandidate> c(1);
  c[0].layout = "tp=1", c[0].step_time_s = 1, c[0].peak_gib = 10, c[0].hbm_gib = 80, c[0].tokens_per_s = 308933;
  CHECK(CandidateScatterSvg(c).find("308,933 tokens/s") != std::string::npos);
}

}  // namespace
}  // namespace foldplan
