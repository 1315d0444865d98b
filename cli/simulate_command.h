// `foldplan simulate`: one layout's step played out by the simulator
// (sim/simulate.h), its figures beside the analytical model's, a
// Perfetto-readable trace on request (sim/trace.h).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include <vector>

#include <nlohmann/json.hpp>

#include "cli/inputs.h"
#include "core/status.h"
#include "costmodel/evaluate.h"
#include "sim/sim_estimate.h"

namespace foldplan {

struct SimulateOptions {
  InputOptions inputs;
  std::optional<std::string> layout;  // --layout, or:
  std::string plan;                   // --plan FILE: a foldplan.plan/v1 file's inputs and
  int candidate = 1;                  //   candidate #N (1: the best)
  std::string schedule;               // --schedule NAME ("": the layout's)
  std::string overlap;                // --overlap tp=0,ep=1,... | all | none ("": the recipe's)
  std::string imbalance;              // --imbalance uniform|zipf:S|dirichlet:A|FILE ("": balanced)
  uint64_t seed = 0;                  // --seed N: the imbalance's draws
  bool whole = false;                 // --whole: every rank even when balanced
  std::string trace;                  // --trace FILE: Chrome trace-event JSON
  std::string trace_ranks;            // --trace-ranks 0,3: only these pipeline ranks
  bool json = false;                  // --json: foldplan.simulation/v1
  long long max_tasks = kDefaultMaxSimTaskSlots;  // --max-tasks N: the run's size limit (sim/sim_estimate.h)
  // Progress on stderr for runs past a second; unset: when stderr is a terminal.
  std::optional<bool> progress;
};
int RunSimulate(const SimulateOptions& options, std::ostream& out, std::ostream& err);

// simulate's progress on a terminal: whether to show it (stderr a
// terminal, and a second gone since the run began), and its line, which
// rewrites itself ("\rsimulate: running the step 45% (12 s)").
bool ShowSimulateProgress(bool stderr_is_terminal, double elapsed_s);
std::string SimulateProgressLine(const std::string& phase, double share, double elapsed_s);

// `plan --simulate-top N`: the analytical top `candidates` (best first)
// simulated and re-ranked by simulated step time, as a table that says
// where the two orders disagree and which part of the step moved (the
// pipeline, the data-parallel traffic outside it, the optimizer); `json`
// receives the same as a list (analytical_rank, simulated_rank, layout,
// both step times and the parts' differences).
struct SimulatedRanking {
  std::string text;
  nlohmann::ordered_json json;
};
Result<SimulatedRanking> RankBySimulation(const CostModel& model, const std::vector<Evaluation>& candidates);

}  // namespace foldplan
