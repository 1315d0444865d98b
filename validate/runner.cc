#include <algorithm>
#include <chrono>
#include <csignal>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "core/json_check.h"
#include "validate/op.h"

namespace foldplan::validate {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

int64_t ScaledSeqLen(int64_t plan_seq_len, int64_t multiple, const OpOptions& options,
                     std::vector<std::string>* notes) {
  if (plan_seq_len <= options.max_seq_len) return plan_seq_len;
  // A CPU run stays small; the per-token work is the same at any length.
  const int64_t seq = std::max(multiple, options.max_seq_len / multiple * multiple);
  notes->push_back("seq_len scaled from " + std::to_string(plan_seq_len) + " to " +
                   std::to_string(seq) + " (--max-seq " + std::to_string(options.max_seq_len) +
                   ")");
  return seq;
}

std::string GroupLabel(const std::string& kind, const GroupComm* comm) {
  if (comm == nullptr) return kind + " (no group holds this rank)";
  std::string ranks;
  for (int r : comm->members()) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return kind + " group " + std::to_string(comm->group_index()) + " (world ranks " + ranks + ")";
}

Status CheckOpName(const std::string& name) {
  for (const char* known : {"ulysses", "dispatch", "sweep", "compute", "pack"}) {
    if (name == known) return Status();
  }
  return Status::Error("unknown op \"" + name +
                       "\"; known ops: ulysses, dispatch, sweep, compute, pack");
}

const std::vector<std::string>& GroupKindsNeeded(const std::string& name) {
  static const std::map<std::string, std::vector<std::string>> kNeeded = {
      {"ulysses", {"cp"}},
      {"pack", {"cp"}},  // runs on rank 0 alone, but its shapes are a cp rank's
      {"dispatch", {"ep", "etp"}},
      {"sweep", {"tp", "cp", "dp", "dp_cp", "ep", "etp", "edp", "pp"}},
      {"compute", {}},
  };
  static const std::vector<std::string> kNone;
  const auto it = kNeeded.find(name);
  return it == kNeeded.end() ? kNone : it->second;
}

Status CheckGroupsForOps(const BenchInput& input, const std::vector<std::string>& ops) {
  JsonErrors errors(input.file);
  std::set<std::string> reported;
  for (const std::string& op : ops) {
    for (const std::string& kind : GroupKindsNeeded(op)) {
      if (input.groups.contains(kind) || !reported.insert(kind).second) continue;
      errors.Add(input.rank_map_pointer + "/groups/" + kind,
                 "missing; op " + op + " needs the " + kind + " groups");
    }
  }
  return errors.empty() ? Status() : errors.status();
}

Result<std::vector<std::unique_ptr<Op>>> MakeOps(const std::string& name,
                                                 const BenchInput& input,
                                                 const OpOptions& options, Backend* backend) {
  auto one = [](Result<std::unique_ptr<Op>> op) -> Result<std::vector<std::unique_ptr<Op>>> {
    if (!op.ok()) return op.status();
    std::vector<std::unique_ptr<Op>> ops;
    ops.push_back(std::move(op).value());
    return ops;
  };
  if (name == "ulysses") return one(MakeUlyssesOp(input, options, backend));
  if (name == "dispatch") return one(MakeDispatchOp(input, options, backend));
  if (name == "sweep") return MakeSweepOps(input, options, backend);
  if (name == "compute") return one(MakeComputeOp(input, options, backend));
  if (name == "pack") return one(MakePackOp(input, options, backend));
  return CheckOpName(name);  // an error: every known name returned above
}

namespace {

// Runs `step` under the watchdog's deadline, named for the report.
template <typename Step>
auto Guarded(Watchdog* watchdog, const std::string& what, Step step) {
  if (watchdog != nullptr) watchdog->Arm(what);
  auto result = step();
  if (watchdog != nullptr) watchdog->Disarm();
  return result;
}

// One case: memory check, warm-up, timed iterations, correctness pass.
// Errors come back bare; RunOp says which op, case and group.
Result<CaseResult> RunCase(Op& op, int index, const OpCase& op_case, const std::string& where,
                           const LoopOptions& options, Backend& backend, Watchdog* watchdog) {
  CaseResult row;
  row.op_case = op_case;
  auto step = [&](const std::string& what, auto body) {
    return Guarded(watchdog, what + " of " + where, body);
  };

  // Every rank learns whether any rank lacks the memory before anyone
  // allocates, so a refusal is collective and no rank waits in vain.
  const int64_t needed = op.bytes_needed(index);
  int64_t free_bytes = 0;
  bool short_here = false;
  const int64_t ranks_short = step("memory check", [&] {
    free_bytes = backend.FreeBytes();  // may be collective (MPI: ranks per host)
    short_here = needed > free_bytes;
    return backend.SumOverWorld(short_here ? 1 : 0);
  });
  if (ranks_short > 0) {
    return Status::Error(
        "needs " + std::to_string(needed) + " bytes per rank, " +
        (short_here ? "only " + std::to_string(free_bytes) + " free on this rank"
                    : std::string("another rank has less free memory")) +
        "; lower --max-seq or --sweep-max-bytes");
  }
  if (Status s = op.Prepare(index); !s.ok()) return s;
  for (int i = 0; i < options.warmup_iters; ++i) {
    if (Status s = step("warm-up iteration " + std::to_string(i), [&] { return op.Run(); });
        !s.ok()) {
      return s;
    }
  }
  // Each iteration starts together (world barrier) so that one slow
  // rank's lateness is not counted as the others' transfer time.
  std::vector<double> times_s;
  for (int i = 0; i < options.timed_iters; ++i) {
    Status s = step("timed iteration " + std::to_string(i), [&] {
      if (backend.world_rank() == options.die_rank && i == options.timed_iters / 2) {
        std::cerr << "foldbench: rank " << backend.world_rank()
                  << ": --die-rank: killing this rank in timed iteration " << i << " of " << where
                  << "\n"
                  << std::flush;
        std::raise(SIGKILL);
      }
      if (Status b = backend.Barrier(backend.World()); !b.ok()) return b;
      backend.TimerStart();
      Status run = op.Run();
      times_s.push_back(backend.TimerStopSeconds());
      return run;
    });
    if (!s.ok()) return s;
  }
  std::vector<double> all_s =
      step("gathering times", [&] { return backend.GatherToRoot(times_s); });
  if (op.timed_on_root_only()) all_s.resize(times_s.size());  // rank 0's come first
  if (backend.world_rank() == 0 && !all_s.empty()) {  // RunOp asks for one timed run
    row.median_s = Median(all_s);
    row.min_s = *std::min_element(all_s.begin(), all_s.end());
    row.max_s = *std::max_element(all_s.begin(), all_s.end());
    if (row.median_s > 0) {
      row.algbw_gb_per_s = static_cast<double>(op_case.send_bytes_per_rank) / row.median_s / 1e9;
      row.busbw_gb_per_s = row.algbw_gb_per_s * op_case.bus_factor;
      row.tflops_per_s = op_case.flops / row.median_s / 1e12;
    }
  }

  // Correctness pass on freshly filled buffers, separate from the timing
  // so that checking never overlaps a timed iteration.
  if (Status s = op.Prepare(index); !s.ok()) return s;
  Result<int64_t> wrong = step("correctness pass", [&]() -> Result<int64_t> {
    if (backend.world_rank() == options.hang_rank) {
      // Test hook: never join the collective, as a hung peer would not,
      // and stay silent so that the peers' watchdogs are the ones to speak.
      if (watchdog != nullptr) watchdog->Disarm();
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (Status s = op.Run(); !s.ok()) return s;
    if (backend.world_rank() == options.corrupt_rank) op.Corrupt();
    return op.Check();
  });
  if (!wrong.ok()) return wrong.status();
  row.wrong_elements =
      step("summing wrong elements", [&] { return backend.SumOverWorld(wrong.value()); });
  op.Release();
  return row;
}

}  // namespace

Result<OpResult> RunOp(Op& op, const LoopOptions& options, Backend& backend,
                       const BenchInput& input, Watchdog* watchdog) {
  OpResult result;
  result.op = op.name();
  result.group_kind = op.group_kind();
  result.skip_reason = op.skip_reason();
  result.notes = op.notes();
  if (input.groups.contains(op.group_kind())) {
    result.group_count = static_cast<int>(input.groups.at(op.group_kind()).size());
  }
  if (!result.skip_reason.empty()) return result;
  result.group_size = op.group_size();
  // A case without a timed iteration has no median to report. Every rank
  // holds the same options, so every rank refuses here, before a collective.
  if (options.timed_iters < 1 || options.warmup_iters < 0) {
    return Status::Error("op " + op.name() + ": needs at least one timed iteration and no " +
                         "negative warm-up (timed " + std::to_string(options.timed_iters) +
                         ", warm-up " + std::to_string(options.warmup_iters) + ")");
  }

  const std::vector<OpCase> cases = op.cases();
  for (int index = 0; index < static_cast<int>(cases.size()); ++index) {
    const std::string where = "op " + op.name() + ", case \"" + cases[index].name + "\", on " +
                              op.group_label();
    auto row = RunCase(op, index, cases[index], where, options, backend, watchdog);
    if (!row.ok()) return Status::Error(where + ": " + row.status().message());
    result.cases.push_back(std::move(row).value());
  }
  return result;
}

}  // namespace foldplan::validate
