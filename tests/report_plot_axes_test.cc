// The report's time axes: one unit per axis, chosen from its range, so a
// tick never reads "0 us" beside "1.5 s".
#include <doctest/doctest.h>

#include <string>

#include "report/plot_axes.h"
#include "report/sim_svg.h"
#include "tests/text_count.h"

namespace foldplan {
namespace {

using foldplan::testing::Count;

TEST_CASE("time axis: the unit is chosen from the range, ticks are plain numbers in it") {
  CHECK(TimeUnitFor(0, 13.6).name == "s");
  CHECK(TimeUnitFor(0, 0.35).name == "ms");
  CHECK(TimeUnitFor(0, 0.0004).name == "us");
  const TimeAxisUnit ms = TimeUnitFor(0, 0.35);
  CHECK(ms.Label(0) == "0");
  CHECK(ms.Label(0.05) == "50");
  // A narrow range in seconds keeps the decimals its step needs.
  const TimeAxisUnit s = TimeUnitFor(13.5, 13.9);  // ticks 0.1 s apart
  CHECK(s.name == "s");
  CHECK(s.Label(13.6) == "13.6");
  CHECK(TimeUnitFor(13.5, 13.75).Label(13.55) == "13.55");  // ticks 0.05 s apart
}

TEST_CASE("time axis: the critical path's axis uses one unit, named in its title") {
  // A 2.5 s step: ticks 0, 0.5, ..., 2.5 in seconds, none in ms or us.
  SimulationSummary sim;
  sim.simulated_step_s = 2.5;
  for (int i = 0; i < 5; ++i) sim.critical_path.push_back({i % 2, "F", i, 0.5 * i, 0.5, {}});
  sim.critical_path_segments = sim.critical_path.size();
  const std::string svg = CriticalPathSvg(sim).svg;
  CHECK(Count(svg, " us</text>") == 0);
  CHECK(Count(svg, " ms</text>") == 0);
  CHECK(Count(svg, " s</text>") == 0);
  CHECK(svg.find(">0</text>") != std::string::npos);
  CHECK(svg.find(">2.5</text>") != std::string::npos);
  CHECK(svg.find("time in the step (s;") != std::string::npos);
}

TEST_CASE("time axis: the simulated memory chart draws the GPU's HBM") {
  SimulationSummary sim;
  sim.simulated_step_s = 1;
  sim.hbm_gib = 79.6;
  SimMemory m;
  m.peak_bytes = m.model_peak_bytes = 40.0 * (1 << 30);
  m.points = {{0, 10.0 * (1 << 30)}, {0.5, 40.0 * (1 << 30)}};
  sim.memory.push_back(m);
  sim.memory_ranks = 1;
  const std::string svg = MemoryTimelineSvg(sim).svg;
  CHECK(Count(svg, "class=\"hbm\"") == 1);
  CHECK(svg.find("HBM 79.6 GiB") != std::string::npos);
}

}  // namespace
}  // namespace foldplan
