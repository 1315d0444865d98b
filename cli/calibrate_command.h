// `foldplan calibrate` and `foldplan collective`: measurements in, a
// calibration file out (costmodel/calibrate.h), and the model's prediction
// of one collective across sizes as an nccl-tests-shaped table, to hold
// against a measured run. Exit codes as cli/inputs.h says.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/inputs.h"

namespace foldplan {

struct CalibrateCliOptions {
  InputOptions inputs;                    // --cluster, --nodes, --gpus-per-domain
  std::vector<std::string> measurements;  // foldplan.measurements/v1 files
  std::vector<std::string> nccl_tests;    // logs: FILE or COLLECTIVE:FILE
  std::string output;                     // -o FILE; "" = write nothing
  double holdout = 0.25;                  // [0, 0.5]
  uint64_t seed = 1;
  int max_segments = 3;                   // [1, 3]
  bool report = false;                    // the per-series table
  bool json = false;                      // the report as foldplan.calibration-report/v1
};
int RunCalibrate(const CalibrateCliOptions& options, std::ostream& out, std::ostream& err);

struct CollectiveCliOptions {
  InputOptions inputs;  // --cluster, --calibration, ...
  std::string op;       // all_reduce|all_gather|reduce_scatter|all_to_all|all_to_all_v|send_recv
  int ranks = 0;        // [2, cluster GPUs]
  std::optional<int> ranks_per_domain;  // default: as many as one domain holds
  std::string bytes = "1K:8G";          // MIN:MAX, doubling (K, M, G: powers of 1024)
  bool json = false;
};
int RunCollective(const CollectiveCliOptions& options, std::ostream& out, std::ostream& err);

}  // namespace foldplan
