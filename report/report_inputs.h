// What the report reads besides the plan's inputs: the plan file's ranked
// candidates as written (costmodel/plan_file.h CandidateJson: step time,
// breakdown, memory terms, communication by kind) and the simulator's
// `foldplan.simulation/v1` output (cli/simulate_command.cc, doc/formats.md),
// of which the report uses the step times, the critical path and the memory
// timelines. Both read in one pass (report/json_stream.h) that checks the
// schema as soon as it is read, so a file of another kind is refused before
// its body, and keeps only what the report draws: a simulation file of
// hundreds of megabytes costs its text and the kept fields, not a parse
// tree. Errors name the file and the JSON pointer (core/json_check.h).
// Fields the report does not draw are not checked, so a newer writer's
// additions do not break it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "costmodel/layout_verdict.h"

namespace foldplan {

struct CommKindSeconds {
  std::string name;
  double total_s = 0, exposed_s = 0;
};

struct MemoryTermGib {
  std::string name;
  double gib = 0;
  std::string note;
};

// /candidates/N of a foldplan.plan/v1 file.
struct PlanCandidate {
  std::string layout;  // layout/text
  double step_time_s = 0, tokens_per_s = 0, mfu = 0;
  // step/...
  long long microbatches = 0;
  double stage_compute_s = 0, stage_exposed_comm_s = 0, stage_time_s = 0;
  double pipeline_s = 0, bubble_s = 0, dp_exposed_s = 0, optimizer_s = 0;
  double stage_host_exposed_s = 0, host_step_s = 0;  // 0 in plan files that predate the host model
  // memory/...
  double peak_gib = 0, hbm_gib = 0;
  bool fits = false;
  int worst_stage = 0;
  std::vector<MemoryTermGib> memory_terms;  // in the file's order
  std::vector<CommKindSeconds> comm;        // in the file's order
  int violations = 0;
  std::vector<std::pair<std::string, std::string>> violated;  // (rule, detail) of each violation
  unsigned long long equivalent_layouts = 1;  // layouts of equal score it stands for (plan --distinct)
};

// Whether the candidate, as written, can run (costmodel/layout_verdict.h):
// its memory's fit and the rules it breaks.
LayoutVerdict VerdictOf(const PlanCandidate& candidate);

struct PlanSummary {
  std::string objective;
  std::string cluster, model, job;  // /inputs/*/name
  double memory_limit_gib = 0;      // /memory_limit/max_peak_gib (0: none)
  std::vector<PlanCandidate> candidates;  // best first: #1, #2, ...
};

// At most this many candidates are read (a plan keeps its top N, 10 by default).
inline constexpr size_t kMaxReportCandidates = 10000;
Result<PlanSummary> ReadPlanSummary(const std::string& path);
// The same from text already read (`file` names it in errors; the fuzz target).
Result<PlanSummary> ParsePlanSummary(const std::string& text, const std::string& file);

struct SimSegment {
  int rank = 0;
  std::string pass;  // F, B, W, step
  int microbatch = -1;
  double start_s = 0, duration_s = 0;
  std::vector<std::pair<std::string, double>> by_kind_s;
};

struct SimMemory {
  int rank = 0, pipeline_rank = 0;
  double peak_bytes = 0, model_peak_bytes = 0;
  std::vector<std::pair<double, double>> points;  // (seconds, bytes)
};

// What a simulation file's reader keeps: the first kMaxSegments segments of
// the critical path and the first kMaxMemoryRanks ranks' memory timelines
// (the pictures draw no more); the others are checked and counted.
inline constexpr size_t kMaxSegments = 4000;
inline constexpr size_t kMaxMemoryRanks = 16;

struct SimulationSummary {
  std::string layout, schedule;
  double hbm_gib = 0;  // 0 in files that predate it
  double simulated_step_s = 0, analytical_step_s = 0;
  double simulated_bubble_fraction = 0;
  std::vector<SimSegment> critical_path;  // the first kMaxSegments
  size_t critical_path_segments = 0;      // all of them
  std::vector<SimMemory> memory;          // the first kMaxMemoryRanks
  size_t memory_ranks = 0;                // all of them
};

Result<SimulationSummary> ReadSimulation(const std::string& path);
Result<SimulationSummary> ParseSimulation(const std::string& text, const std::string& file);

}  // namespace foldplan
