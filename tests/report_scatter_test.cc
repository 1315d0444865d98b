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
  for (int i = 0; i < 4; ++i) CHECK(Count(svg, "data-candidate=\"" + std::to_string(i) + "\"") == 1);
  CHECK(Count(svg, "data-front=\"1\"") == 2);
  CHECK(svg.find("data-candidate=\"1\" data-front=\"1\"") != std::string::npos);
  CHECK(svg.find("data-candidate=\"2\" data-front") == std::string::npos);
  CHECK(svg.find("#1 (chosen): tp=2,ep=8") != std::string::npos);
  CHECK(svg.find("tp=4,ep=&lt;8&gt;") != std::string::npos);
  CHECK(svg.find("ep=<8>") == std::string::npos);
}

}  // namespace
}  // namespace foldplan
