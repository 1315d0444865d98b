// foldbench's output read back: a `foldplan.measurements/v1` file
// (doc/validate.md "Output") as checked structs, every field checked as the
// input readers check theirs (errors name the file and JSON pointer). The
// calibration issue fits the cost model to these; `foldplan check` reads
// them. A measured case with wrong elements is read, not refused: the
// reader says what the file holds; whoever fits decides what to use.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace foldplan {

// The shape a compute case timed: `batch` problems of row-major
// [m x k] x [k x n]; each dimension in [1, 2^40].
struct MeasuredGemm {
  int64_t batch = 1, m = 0, n = 0, k = 0;
};

// One message size of one op: nccl-tests' conventions (S = send bytes per
// rank, algbw = S / median, busbw = algbw x bus_factor, GB = 1e9 bytes).
struct MeasuredCase {
  std::string name;                  // e.g. "q seq->heads"
  int64_t elements_per_rank = 0;
  int element_bytes = 0;
  int64_t send_bytes_per_rank = 0;
  double median_seconds = 0, min_seconds = 0, max_seconds = 0;
  double algbw_gb_per_s = 0, bus_factor = 0, busbw_gb_per_s = 0;
  std::optional<double> flops;       // compute cases
  std::optional<double> tflops_per_s;
  std::optional<MeasuredGemm> gemm;  // compute cases (files written since the field was added)
  int64_t wrong_elements = 0;        // summed over all ranks
};

// The ops foldbench measures, by the name its file gives them: its own
// (validate/ops_*.cc) and the sweep's collectives. Any other is refused.
inline constexpr std::initializer_list<const char*> kMeasuredOpNames = {
    "ulysses",   "dispatch",       "pack",       "compute",      "all_to_all",
    "all_to_all_v", "all_gather", "reduce_scatter", "all_reduce", "send_recv"};

struct MeasuredOp {
  std::string op;          // one of kMeasuredOpNames
  std::string group_kind;  // "cp", "ep", ...
  int group_count = 0;
  std::vector<std::string> notes;
  bool ran = false;
  std::string skip_reason;  // when not ran: foldbench's "status"
  // When ran:
  int group_size = 0;
  std::string placement_class;
  int max_nodes_per_group = 0;
  std::vector<std::vector<int>> ranks_per_node;  // per group
  std::vector<MeasuredCase> cases;
};

struct MeasurementSet {
  std::string source;  // the file read
  std::vector<std::string> hosts;
  int ranks = 0;
  std::string backend;  // "mpi" or "nccl"
  std::string mpi_version;
  std::vector<std::string> devices;
  std::string plan_file, plan_schema, layout;
  int world_size = 0;
  std::string conventions;
  std::vector<MeasuredOp> ops;
  int64_t wrong_elements = 0;

  // The GPU of the NCCL backend's device fact "GPU 0 of 8 (node-local rank
  // 0): NVIDIA H200, compute capability 9.0, ..." (validate/nccl_backend.cc):
  // the name up to the first comma; "" when no fact has one (MPI backend).
  std::string gpu_name() const;
  // Ranks per GPU from the fact "ranks per GPU: N ..."; 1 when not stated.
  int ranks_per_gpu() const;
};

Result<MeasurementSet> ParseMeasurements(const nlohmann::json& json, const std::string& file);
Result<MeasurementSet> LoadMeasurements(const std::string& path);

}  // namespace foldplan
