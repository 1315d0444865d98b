// What `foldplan plan` says a user can do next, every figure checked by the
// cost model rather than guessed (doc/usage.md, `foldplan plan`):
//
// - when no layout is legal: the rules that rejected the most candidates;
// - when no legal layout fits (in HBM, or under --max-mem-gib /
//   --headroom-gib): the smallest peak any legal layout reaches, by how much
//   it exceeds the limit and its largest memory terms, then the changes that
//   could make one fit, each a search of its own (more GPUs, FSDP,
//   recompute, a smaller micro-batch, an FP8 recipe the GPU runs) with the
//   best layout it finds (peak, step time) or its smallest peak;
// - when a smaller world on the same cluster is faster, or within
//   kFewerGpusTolerance of the throughput with fewer GPUs: both figures and
//   the command that plans it.
//
// Each variant is a `foldplan plan` of its own: its flags go through the same
// LoadInputs, pins and memory limit as the command, and the command line
// printed with it reproduces it.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/plan_command.h"
#include "core/status.h"
#include "costmodel/evaluate.h"
#include "planner/search.h"

namespace foldplan {

// A smaller world is advised when its tokens/s are at least (1 - this) x
// the full world's: more throughput, or nearly the same with fewer GPUs.
inline constexpr double kFewerGpusTolerance = 0.02;
// "More GPUs" tries world x 2, x 4, ... up to x this (whole nodes; the
// cluster grown in whole NVLink domains), and no world above
// kMoreGpusMaxWorld: a search's enumeration grows with the world (a plan of
// DeepSeek-V3 on 16,384 GPUs that nothing fits took 2.5 minutes of advice
// when it went on to 1,048,576).
inline constexpr int kMoreGpusMaxFactor = 64;
inline constexpr int kMoreGpusMaxWorld = 65536;
// ... and, once a doubling fits, up to this many whole-node worlds between
// it and the last that did not.
inline constexpr int kMoreGpusBetween = 8;

struct PlanAdvice {
  std::string text;             // lines for plan's text output; "" when there is nothing to say
  nlohmann::ordered_json json;  // the plan file's `advice` (doc/formats.md); null when none
  bool empty() const { return text.empty(); }
};

// A world (the job's world_size, --gpus or --fix world=) larger than the
// cluster: an invalid request, exit 1, in `plan` and `plan --gpus-range`
// alike; the message names where the world came from and the --nodes that
// would hold it. Ok when the world fits.
Status CheckWorldFitsCluster(const Inputs& in, const std::string& origin);

// plan found no candidate: `result` is its search of `in` on `cost`, under
// the memory limit `limit_gib` (none: HBM). Nothing legal: the rules that
// rejected most; legal but nothing fits: the smallest peak and the changes
// above. Runs further searches (each a normal plan search; the smallest-peak
// search scores memory only).
PlanAdvice NoFitAdvice(const PlanOptions& options, const Inputs& in, const CostModel& cost,
                       const SearchResult& result, std::optional<double> limit_gib, Objective objective);
// The same for `plan --gpus-range` when no size has a layout: the search of
// the largest size, repeated, then NoFitAdvice.
PlanAdvice NoFitAdviceAtSize(const PlanOptions& options, int gpus, std::optional<double> limit_gib,
                             Objective objective);

// plan's best layout `best` on `in`: the candidate smaller worlds on the
// same cluster (see FewerGpuWorlds in plan_advice.cc and doc/usage.md), each
// searched with its step time capped at best's / (1 - kFewerGpusTolerance),
// so that layouts which cannot qualify are pruned by the search's bound. The
// throughput objective only; none with --recipe (the recipe fixes the world)
// or --fix world=.
PlanAdvice FewerGpusAdvice(const PlanOptions& options, const Inputs& in, const Evaluation& best,
                           std::optional<double> limit_gib, Objective objective);

// `foldplan plan` with the input and search flags of `options` (not the
// output ones: --top, --json, -o, --why, ...), values quoted for a POSIX
// shell where needed.
std::string PlanCommandLine(const PlanOptions& options);

}  // namespace foldplan
