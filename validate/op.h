// Ops are small plug-ins over one shared loop (runner.cc), in the manner of
// nccl-tests: the loop owns warm-up, timing, statistics and the correctness
// pass; an op only knows how to set up, run and check its own data.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "validate/backend.h"
#include "validate/plan_input.h"
#include "validate/watchdog.h"

namespace foldplan::validate {

// The shape of a compute case: `batch` problems of row-major
// [m x k] x [k x n] (the FLOPs are 2 batch m n k).
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
};

// One size an op runs at (nccl-tests' "size" row).
struct OpCase {
  std::string name;             // e.g. "q seq->heads"
  int64_t elements_per_rank = 0;
  DType type = DType::kU16;
  // Bytes each rank sends; algbw = this / time (nccl-tests' S).
  int64_t send_bytes_per_rank = 0;
  // busbw = algbw x this; all-to-all: (n - 1) / n.
  double bus_factor = 1.0;
  // Floating-point operations one Run() does on this rank (compute op;
  // 0 for communication): TFLOP/s = flops / time / 1e12.
  double flops = 0;
  std::optional<GemmShape> gemm;  // compute cases: the GEMM timed
};

struct OpOptions {
  int64_t max_seq_len = 4096;  // scale the plan's sequence down to at most this
  // dispatch: one case per routing, "uniform" or "skewed" (expert e drawn
  // with weight 1 / (e + 1)^skew, so expert 0 is the hottest).
  std::vector<std::string> routings = {"uniform", "skewed"};
  double skew = 1.0;
  uint64_t seed = 1;  // routing and data seed; the same seed routes the same way
  // dispatch: the expert function (--expert). "term": ExpertPartial, each
  // ETP shard adds a hashed term (kernels.h ExpertTerm; cheap). "gemm": two
  // real bf16 GEMMs per local expert (H x F/etp, F/etp x H) with structured
  // weights whose output is known exactly (kernels.h ExpertGemmOutput).
  std::string expert_function = "term";
  // sweep: message sizes per rank, min, min x step, ... up to max (bytes).
  int64_t sweep_min_bytes = 1024;
  int64_t sweep_max_bytes = int64_t{16} << 20;
  int64_t sweep_step = 4;
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
  // This rank's group, for messages: "cp group 1 (world ranks 2, 3)".
  virtual std::string group_label() const = 0;
  virtual std::vector<OpCase> cases() const = 0;
  // Backend memory case `index` allocates on this rank, checked against
  // Backend::FreeBytes() before Prepare.
  virtual int64_t bytes_needed(int index) const = 0;
  // Whether only world rank 0's times count (an op whose work runs on rank
  // 0 alone, so that ranks sharing a GPU do not contend); else every rank's.
  virtual bool timed_on_root_only() const { return false; }

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

// Builds the ops one --ops name stands for ("sweep" is one op per
// collective and group kind); an unknown name is an error listing the known
// ones. Collective: ops split communicators.
// Whether MakeOps knows `name` ("ulysses", "dispatch", "sweep", "compute",
// "pack");
// the error lists the known names.
Status CheckOpName(const std::string& name);
// The group kinds op `name` runs over: ulysses and pack cp, dispatch ep and
// etp, sweep every kind the cost model times (tp, cp, dp, dp_cp, ep, etp,
// edp, pp), compute none.
const std::vector<std::string>& GroupKindsNeeded(const std::string& name);
// Refuses an input that lacks a group kind one of `ops` needs, naming the
// file, the kind's JSON pointer and the op; a kind no requested op needs
// may be missing. Run before any collective, on every rank.
Status CheckGroupsForOps(const BenchInput& input, const std::vector<std::string>& ops);
Result<std::vector<std::unique_ptr<Op>>> MakeOps(const std::string& name,
                                                 const BenchInput& input,
                                                 const OpOptions& options, Backend* backend);
Result<std::unique_ptr<Op>> MakeUlyssesOp(const BenchInput& input, const OpOptions& options,
                                          Backend* backend);
Result<std::unique_ptr<Op>> MakeDispatchOp(const BenchInput& input, const OpOptions& options,
                                           Backend* backend);
// GPU only (NCCL backend builds); see ops_compute.cc.
Result<std::unique_ptr<Op>> MakeComputeOp(const BenchInput& input, const OpOptions& options,
                                          Backend* backend);
Result<std::unique_ptr<Op>> MakePackOp(const BenchInput& input, const OpOptions& options,
                                       Backend* backend);
// The sweep's sizes per rank: min, min x step, ... up to max (bytes);
// overflow-free for any values, an error unless 1 <= min <= max, step >= 2.
Result<std::vector<int64_t>> SweepSizes(const OpOptions& options);
Result<std::vector<std::unique_ptr<Op>>> MakeSweepOps(const BenchInput& input,
                                                      const OpOptions& options,
                                                      Backend* backend);
// The sequence length an op runs: the plan's, or --max-seq rounded down to
// a multiple of `multiple` (at least `multiple`) when the plan's is longer,
// with a note saying so appended to `notes`.
int64_t ScaledSeqLen(int64_t plan_seq_len, int64_t multiple, const OpOptions& options,
                     std::vector<std::string>* notes);
// "cp group 1 (world ranks 2, 3)"; "cp (no group holds this rank)" for null.
std::string GroupLabel(const std::string& kind, const GroupComm* comm);

struct LoopOptions {
  int warmup_iters = 2;
  int timed_iters = 5;
  int corrupt_rank = -1;  // world rank whose output Corrupt() changes; -1 none
  // The watchdog aborts the job when one step (an iteration, a check) takes
  // longer than this, naming the op and the group (seconds; 0: no watchdog).
  double timeout_s = 300;
  int hang_rank = -1;  // test hook: this world rank never joins the check's collective
  // Test hook: this world rank kills itself (SIGKILL, as the OOM killer
  // would) halfway through the first case's timed iterations, so that a
  // rank dying mid-run is seen to end the job rather than hang it.
  int die_rank = -1;
};

struct CaseResult {
  OpCase op_case;
  double median_s = 0, min_s = 0, max_s = 0;  // across iterations and ranks
  double algbw_gb_per_s = 0, busbw_gb_per_s = 0;  // from the median, 1 GB = 1e9 B
  double tflops_per_s = 0;  // compute cases: op_case.flops / median / 1e12
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
// `watchdog` (may be null) is armed around every step that can block.
// Options with no timed iteration (or a negative warm-up) are an error
// before any collective, on every rank alike.
Result<OpResult> RunOp(Op& op, const LoopOptions& options, Backend& backend,
                       const BenchInput& input, Watchdog* watchdog);

// Median of an unsorted list (mean of the middle two for an even count).
double Median(std::vector<double> values);

}  // namespace foldplan::validate
