// The foldplan subcommands as library calls: cli/main.cc parses the command
// line into these option structs and calls one function, which writes its
// report to `out`, errors to `err`, and returns the process exit code
// (0 ok, 1 bad input or refused layout).
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "core/status.h"
#include "inputs/cluster.h"
#include "inputs/job.h"
#include "inputs/model.h"

namespace foldplan {

// --cluster/--model/--job and the job overrides common to most commands.
struct InputOptions {
  std::string cluster = "";           // name or path; "" = shipped default
  std::string model = "";
  std::string job = "";
  std::optional<int> nodes;           // --nodes: override the cluster's node count
  std::optional<int> gpus;            // --gpus: use only this many of the cluster's GPUs
  std::optional<int> seq;             // --seq: tokens per sequence
  std::optional<int> global_batch;    // --global-batch: sequences per step
  std::optional<int> micro_batch;     // --micro-batch: the only micro-batch size considered
  std::optional<std::string> precision;  // --precision bf16|fp8
};

struct Inputs {
  ClusterSpec cluster;
  ModelSpec model;
  JobSpec job;
};

// Loads the three inputs (defaults where unnamed) and applies the overrides.
Result<Inputs> LoadInputs(const InputOptions& options);
// The cluster alone with --nodes applied (for topo and ranks).
Result<ClusterSpec> LoadClusterWithOverrides(const InputOptions& options);

struct ListOptions {
  bool json = false;
};
int RunList(const ListOptions& options, std::ostream& out, std::ostream& err);

struct TopoOptions {
  InputOptions inputs;
  bool json = false;
};
int RunTopo(const TopoOptions& options, std::ostream& out, std::ostream& err);

struct EnumerateOptionsCli {
  InputOptions inputs;
  bool json = false;
  bool why = false;                   // per-rule rejection counts
  int limit = 40;                     // layouts shown in the text table; 0 = all
  std::string layout;                 // check this one layout instead of enumerating
};
int RunEnumerate(const EnumerateOptionsCli& options, std::ostream& out, std::ostream& err);

struct RanksOptions {
  InputOptions inputs;
  std::string layout;                 // required
  std::string format = "rankmap";     // rankmap|megatron|torch|torchtitan|olmo-core
  std::optional<int> world_size;      // --world-size: generic cluster of N GPUs
  bool model_given = false;           // --model given: run the model's legality rules
  std::string output;                 // -o FILE; "" = stdout
};
int RunRanks(const RanksOptions& options, std::ostream& out, std::ostream& err);

struct PlanOptions {
  InputOptions inputs;
  int top = 10;                       // candidates shown and written
  std::string objective = "throughput";  // throughput|memory
  bool json = false;
  std::string output;                 // -o plan.json
  bool why = false;                   // rejection counts, memory included
  int threads = 2;
};
int RunPlan(const PlanOptions& options, std::ostream& out, std::ostream& err);

struct ExplainOptions {
  InputOptions inputs;
  std::string layout;                 // required
  bool json = false;
  std::string output;                 // -o plan.json holding just this layout
};
int RunExplain(const ExplainOptions& options, std::ostream& out, std::ostream& err);

}  // namespace foldplan
