// Ops are small plug-ins over one shared loop (runner.cc), in the manner of
// nccl-tests: the loop owns warm-up, timing, statistics and the correctness
// pass; an op only knows how to set up, run and check its own data.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "validate/backend.h"
#include "validate/plan_input.h"

namespace foldplan::validate {

// One size an op runs at (nccl-tests' "size" row).
struct OpCase {
  std::string name;             // e.g. "q seq->heads"
  int64_t elements_per_rank = 0;
  DType type = DType::kU16;
  // Bytes each rank sends; algbw = this / time (nccl-tests' S).
  int64_t send_bytes_per_rank = 0;
  // busbw = algbw x this; all-to-all: (n - 1) / n.
  double bus_factor = 1.0;
};

struct OpOptions {
  int64_t max_seq_len = 4096;  // scale the plan's sequence down to at most this
};

class Op {
 public:
  virtual ~Op() = default;
  virtual std::string name() const = 0;        // "ulysses"
  virtual std::string group_kind() const = 0;  // "cp"
  // Non-empty when the op cannot run on this plan ("skipped: cp = 1").
  virtual std::string skip_reason() const = 0;
  // Free text notes for the report ("seq_len scaled from 32768 to 4096").
  virtual std::vector<std::string> notes() const = 0;
  virtual int group_size() const = 0;
  virtual std::vector<OpCase> cases() const = 0;

  // Allocates and fills the buffers of case `index` with exactly
  // predictable data. Called again before the correctness pass.
  virtual Status Prepare(int index) = 0;
  // The timed operation. Collective: every rank calls it.
  virtual Status Run() = 0;
  // Test hook: changes one output element on this rank, after Run().
  virtual void Corrupt() = 0;
  // Counts this rank's wrong elements after Run(). Collective (may move data
  // back to check a round trip).
  virtual Result<int64_t> Check() = 0;
  virtual void Release() = 0;
};

// Builds an op by name; an unknown name is an error listing the known ones.
Result<std::unique_ptr<Op>> MakeOp(const std::string& name, const BenchInput& input,
                                   const OpOptions& options, Backend* backend);
std::unique_ptr<Op> MakeUlyssesOp(const BenchInput& input, const OpOptions& options,
                                  Backend* backend);

struct LoopOptions {
  int warmup_iters = 2;
  int timed_iters = 5;
  int corrupt_rank = -1;  // world rank whose output Corrupt() changes; -1 none
};

struct CaseResult {
  OpCase op_case;
  double median_s = 0, min_s = 0, max_s = 0;  // across iterations and ranks
  double algbw_gb_per_s = 0, busbw_gb_per_s = 0;  // from the median, 1 GB = 1e9 B
  int64_t wrong_elements = 0;  // summed over all ranks
};

struct OpResult {
  std::string op, group_kind;
  int group_size = 0, group_count = 0;
  std::string skip_reason;  // non-empty: not run
  std::vector<std::string> notes;
  std::vector<CaseResult> cases;
};

// Runs every case of `op`. Collective; the statistics are meaningful on
// world rank 0 only (wrong_elements on every rank).
Result<OpResult> RunOp(Op& op, const LoopOptions& options, Backend& backend,
                       const BenchInput& input);

// Median of an unsorted list (mean of the middle two for an even count).
double Median(std::vector<double> values);

}  // namespace foldplan::validate
