// foldplan ranks: a layout's rank map in a trainer's or a launcher's form (cli/inputs.h states what a command call returns).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/inputs.h"

namespace foldplan {

struct RanksOptions {
  InputOptions inputs;
  std::optional<std::string> layout;  // required unless --recipe gives one
  std::string format = "rankmap";     // rankmap|megatron|torch|torchtitan|olmo-core
  std::optional<int> world_size;      // --world-size: generic cluster of N GPUs, [1, kMaxWorldSize]
  bool model_given = false;           // --model given: run the model's legality rules
  std::string output;                 // -o FILE; "" = stdout
  // The launcher formats (openmpi-rankfile|slurm|hostfile|env,
  // planner/launch_files.h) need --hosts FILE: host names in node order.
  std::string hosts;
  // --plan FILE [--candidate N]: a foldplan.plan/v1 file's inputs and its
  // candidate #N (from 1, the best) instead of --layout and the input flags.
  std::string plan;
  std::optional<int> candidate;
  // With a model, a layout that does not fit in memory is refused (exit 1)
  // unless --force, which exports it with a warning.
  bool force = false;
};
int RunRanks(const RanksOptions& options, std::ostream& out, std::ostream& err);

}  // namespace foldplan
