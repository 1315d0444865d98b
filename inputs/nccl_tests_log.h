// The stdout of an nccl-tests run (all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, alltoall_perf, sendrecv_perf; one process with -g or
// under MPI) read as checked structs, for `foldplan calibrate --nccl-tests`
// (doc/formats.md "nccl-tests logs"). The column variant (with `root` and
// `#wrong`, or the older one with `error`) is taken from the table's header
// line. Errors name the file and line: `FILE:LINE: expected ...`. A row with
// wrong elements is read, not refused (like inputs/measurements.h): the
// caller decides what to use. Unrecognised lines (NCCL INFO chatter, MPI
// warnings) are ignored; a row-like line in the table that does not parse is
// an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace foldplan {

// One half (out-of-place or in-place) of a results row.
struct NcclTestsHalf {
  bool present = false;    // false when the log prints N/A for the half
  double time_us = 0;      // microseconds per iteration
  double algbw_gb_per_s = 0, busbw_gb_per_s = 0;  // 10^9 bytes/s
  bool validated = false;  // the #wrong / error column is a number (not N/A, as with -c 0)
  int64_t wrong = 0;       // #wrong; older logs: 1 when `error` is nonzero
  double max_error = 0;    // older logs' `error` column (max abs error); 0 otherwise
};

// One row of the results table: one message size (and type, op, root).
struct NcclTestsRow {
  int line = 0;  // 1-based line in the log
  int64_t size_bytes = 0, count = 0;
  std::string type, redop;
  std::optional<int> root;  // when the table has a root column (-1: none)
  NcclTestsHalf out_of_place, in_place;
};

// One "#  Rank N Group G Pid P on HOST device D [BUS] NAME" line.
struct NcclTestsRank {
  int rank = 0, group = 0;  // group 0 when the line has no Group
  int64_t pid = 0;
  std::string host;
  int device = 0;
  std::string bus_id, gpu_name;  // bus id without the brackets
  int line = 0;
};

struct NcclTestsLog {
  std::string source;      // the file name
  std::string collective;  // foldplan's name (costmodel/collective.h): "all_reduce", "all_to_all", ...
  int threads = 0, gpus_per_thread = 0;  // "# nThread N nGpus G"
  int64_t min_bytes = 0, max_bytes = 0;
  int warmup_iters = 0, iters = 0;
  std::vector<NcclTestsRank> ranks;  // in rank order, 0..n-1 each once
  int group_count = 1;               // distinct Group values (0..group_count-1, equal sizes)
  int group_size() const { return group_count > 0 ? static_cast<int>(ranks.size()) / group_count : 0; }
  std::vector<std::string> hosts;    // distinct hosts of all ranks, first-seen order
  std::vector<int> ranks_per_host;   // ranks (all groups) on each host, same order
  std::string nccl_version;  // "2.21.5", when the log says; "" otherwise
  std::string cuda_version;  // "12.4", from NCCL's INFO version line; "" otherwise
  std::vector<NcclTestsRow> rows;
  double avg_busbw_gb_per_s = 0;  // the "# Avg bus bandwidth" trailer

  // Rows with wrong elements in either half.
  int64_t wrong_rows() const;
};

// `file` names the log in errors and may name the collective (its base name
// containing all_reduce, all_gather, reduce_scatter, alltoall or sendrecv).
// `collective_hint` (foldplan's or nccl-tests' name, e.g. "all_reduce" from
// `all_reduce:FILE`) is used when the log has no "# Collective test
// starting" line, and is an error when it contradicts that line.
Result<NcclTestsLog> ParseNcclTestsLog(std::string_view text, const std::string& file,
                                       const std::string& collective_hint = "");
Result<NcclTestsLog> LoadNcclTestsLog(const std::string& path, const std::string& collective_hint = "");

}  // namespace foldplan
