// foldplan plan and explain: the best layouts of a search, and one layout's costs (cli/inputs.h states what a command call returns).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/inputs.h"

namespace foldplan {

// Limits of the commands' own flags (doc/formats.md, Command-line values).
inline constexpr int kMaxTop = 10000;  // plan --top in [1, this]: candidates costed in full and written
inline constexpr double kMaxMemoryGib = 1 << 20;  // plan --max-mem-gib in (0, this], --headroom-gib in [0, this]
inline constexpr int kMaxWorldSizes = 64;         // plan --gpus-range: at most this many world sizes

struct PlanOptions {
  InputOptions inputs;
  int top = 10;                       // candidates shown and written, [1, kMaxTop]
  std::string objective = "throughput";  // throughput|memory
  bool json = false;
  std::string output;                 // -o plan.json
  bool why = false;                   // rejection counts, memory included
  int threads = 2;                    // [1, kMaxSearchThreads] (planner/search.h)
  std::optional<std::string> fix;     // --fix: only the layouts that agree with these keys
  int simulate_top = 0;               // --simulate-top N: re-rank the best N by simulated step time
  std::string format = "text";        // --format text|json|csv (--json is json)
  // The table shows each layout once: twins (differing only in group
  // order) and layouts of bit-equal score (planner/search.h) collapsed.
  bool distinct = false;              // --distinct: that default, said
  bool all = false;                   // --all: every layout, twins included
  // --stats: the search's counts, time and peak memory on stderr (also
  // without it when stderr is a terminal and the search took over a second).
  bool stats = false;
  std::optional<double> max_mem_gib;  // --max-mem-gib X: only layouts whose peak is <= X GiB
  std::optional<double> headroom_gib; // --headroom-gib X: only layouts with >= X GiB of HBM to spare
  // --gpus-range A:B (A, 2A, 4A, ... <= B, and B), A:B:S (A, A+S, ... <= B)
  // or a list N,M,...: the search at each world size, the best of each.
  std::string gpus_range;
};
int RunPlan(const PlanOptions& options, std::ostream& out, std::ostream& err);

struct ExplainOptions {
  InputOptions inputs;
  std::optional<std::string> layout;  // required unless --recipe gives one
  bool json = false;
  std::string output;                 // -o plan.json holding just this layout
  bool allow_oom = false;             // -o writes (and exit 0) even when the layout does not fit in memory
  std::string plan;                   // --plan FILE: a foldplan.plan/v1 file's inputs and
  int candidate = 1;                  //   candidate #N (1: the best) instead of --layout
};
int RunExplain(const ExplainOptions& options, std::ostream& out, std::ostream& err);

}  // namespace foldplan
