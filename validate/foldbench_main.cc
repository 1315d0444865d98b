// foldbench: every rank of `mpirun -np N foldbench --plan FILE ...` runs
// this. Exit status (doc/formats.md "Exit codes"): 0 every checked element
// right; 1 an invalid input (the plan file; nothing ran) or an output file
// that could not be written; 2 command-line usage, the launcher's -np
// included (nothing ran); 3 a run-time failure: a wrong element, a backend
// error, a hang the watchdog ended (the job is aborted).
#include <mpi.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "core/atomic_file.h"
#include "validate/backend.h"
#include "validate/op.h"
#include "validate/plan_input.h"
#include "validate/report.h"
#include "validate/watchdog.h"

namespace {

using namespace foldplan;
using namespace foldplan::validate;

constexpr const char* kUsage =
    "usage: mpirun -np N foldbench --plan FILE [--backend mpi|nccl]\n"
    "                 [--ops ulysses,dispatch,sweep,pack,compute] [-o measurements.json]\n"
    "                 [--max-seq N] [--routing uniform,skewed] [--skew S] [--seed N]\n"
    "                 [--expert term|gemm]\n"
    "                 [--sweep-min-bytes N] [--sweep-max-bytes N] [--sweep-step N]\n"
    "                 [--warmup N] [--iters N] [--timeout SECONDS]\n"
    "                 [--corrupt-rank R] [--hang-rank R] [--die-rank R]\n"
    "  FILE is a foldplan.plan/v1 (foldplan plan/explain -o) or foldplan.rankmap/v1 file\n"
    "  --timeout 0 turns the watchdog off; inf or any large value never fires\n"
    "  exit status: 0 ok, 1 invalid input, 2 usage, 3 run-time failure (doc/formats.md)\n";

// Exit codes, doc/formats.md "Exit codes".
constexpr int kExitOk = 0;
constexpr int kExitInvalidInput = 1;
constexpr int kExitUsage = 2;
constexpr int kExitRunFailure = 3;

struct Args {
  std::string plan, output, backend = "mpi";
  std::vector<std::string> ops = {"ulysses", "dispatch"};
  OpOptions op_options;
  LoopOptions loop;
  bool help = false;
};

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) items.push_back(item);
  return items;
}

// A number >= min; "inf" is one, NaN is not (it compares false with min).
Result<double> ParseNumber(const std::string& flag, const std::string& text, double min) {
  try {
    size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size() && value >= min) return value;
  } catch (const std::out_of_range&) {
    // Beyond double's range: a huge positive value is as good as inf.
    if (!text.empty() && text[0] != '-' && std::isinf(std::strtod(text.c_str(), nullptr))) {
      return HUGE_VAL;
    }
  } catch (const std::exception&) {
  }
  char min_text[32];
  std::snprintf(min_text, sizeof min_text, "%g", min);
  return Status::Error(flag + ": expected a number >= " + min_text + ", found \"" + text + "\"");
}

Result<int64_t> ParseInt(const std::string& flag, const std::string& text, int64_t min) {
  try {
    size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size() && value >= min) return static_cast<int64_t>(value);
  } catch (const std::exception&) {
  }
  return Status::Error(flag + ": expected an integer >= " + std::to_string(min) + ", found \"" +
                       text + "\"");
}

Result<Args> ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      args.help = true;
      continue;
    }
    if (i + 1 >= argc) return Status::Error(flag + ": unknown flag or missing value");
    const std::string value = argv[++i];
    auto integer = [&](int64_t min, auto* out) -> Status {
      auto parsed = ParseInt(flag, value, min);
      if (!parsed.ok()) return parsed.status();
      *out = static_cast<std::remove_pointer_t<decltype(out)>>(parsed.value());
      return Status();
    };
    auto number = [&](double min, double* out) -> Status {
      auto parsed = ParseNumber(flag, value, min);
      if (!parsed.ok()) return parsed.status();
      *out = parsed.value();
      return Status();
    };
    OpOptions& op = args.op_options;
    Status s;
    if (flag == "--plan") args.plan = value;
    else if (flag == "-o" || flag == "--output") args.output = value;
    else if (flag == "--backend") args.backend = value;
    else if (flag == "--ops") args.ops = SplitList(value);
    else if (flag == "--max-seq") s = integer(1, &op.max_seq_len);
    else if (flag == "--routing") op.routings = SplitList(value);
    else if (flag == "--skew") s = number(0, &op.skew);
    else if (flag == "--seed") s = integer(0, &op.seed);
    else if (flag == "--expert") op.expert_function = value;
    else if (flag == "--sweep-min-bytes") s = integer(4, &op.sweep_min_bytes);
    else if (flag == "--sweep-max-bytes") s = integer(4, &op.sweep_max_bytes);
    else if (flag == "--sweep-step") s = integer(2, &op.sweep_step);
    else if (flag == "--warmup") s = integer(0, &args.loop.warmup_iters);
    else if (flag == "--iters") s = integer(1, &args.loop.timed_iters);
    else if (flag == "--timeout") s = number(0, &args.loop.timeout_s);
    else if (flag == "--corrupt-rank") s = integer(0, &args.loop.corrupt_rank);
    else if (flag == "--hang-rank") s = integer(0, &args.loop.hang_rank);
    else if (flag == "--die-rank") s = integer(0, &args.loop.die_rank);
    else return Status::Error(flag + ": unknown flag");
    if (!s.ok()) return s;
  }
  if (args.help) return args;
  if (args.plan.empty()) return Status::Error("--plan FILE is required");
  if (args.backend != "mpi" && args.backend != "nccl") {
    return Status::Error("--backend " + args.backend + ": expected mpi or nccl");
  }
  for (const std::string& op : args.ops) {
    if (Status s = CheckOpName(op); !s.ok()) return Status::Error("--ops: " + s.message());
    if (op == "compute" && args.backend != "nccl") {
      return Status::Error("--ops compute times GPU kernels; it needs --backend nccl");
    }
  }
  for (const std::string& routing : args.op_options.routings) {
    if (routing != "uniform" && routing != "skewed") {
      return Status::Error("--routing " + routing + ": expected uniform or skewed");
    }
  }
  if (args.op_options.expert_function != "term" && args.op_options.expert_function != "gemm") {
    return Status::Error("--expert " + args.op_options.expert_function +
                         ": expected term or gemm");
  }
  if (args.op_options.sweep_max_bytes < args.op_options.sweep_min_bytes) {
    return Status::Error("--sweep-max-bytes is below --sweep-min-bytes");
  }
  return args;
}

// Everything after MPI_Init and before MPI_Finalize, so that the backend and
// its communicators are gone before MPI is. Every rank reaches the same
// verdict on arguments and input (they read the same file), so a refusal
// exits all ranks without a collective to hang in.
int Run(int argc, char** argv) {
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const bool root = world_rank == 0;

  Result<Args> args = ParseArgs(argc, argv);
  if (!args.ok()) {
    if (root) std::cerr << "foldbench: " << args.status().message() << "\n" << kUsage;
    return kExitUsage;
  }
  if (args->help) {
    if (root) std::cout << kUsage;
    return kExitOk;
  }
  // The plan first: a wrong -np for a file that is bad anyway is not the news.
  Result<BenchInput> input = ReadBenchInput(args->plan);
  Status input_ok = input.ok() ? CheckGroupsForOps(input.value(), args->ops) : input.status();
  if (!input_ok.ok()) {
    if (root) std::cerr << "foldbench: " << input_ok.message() << "\n";
    return kExitInvalidInput;
  }
  // The launcher's -np is part of the command line: a usage error.
  if (Status s = CheckWorldSize(input.value(), world_size); !s.ok()) {
    if (root) std::cerr << "foldbench: " << s.message() << "\n";
    return kExitUsage;
  }
  for (int rank : {args->loop.corrupt_rank, args->loop.hang_rank, args->loop.die_rank}) {
    if (rank >= world_size) {
      if (root) std::cerr << "foldbench: --corrupt-rank, --hang-rank and --die-rank must be below "
                          << world_size << "\n";
      return kExitUsage;
    }
  }

  std::unique_ptr<Backend> backend;
  if (args->backend == "nccl") {
    auto made = MakeNcclBackend();
    if (!made.ok()) {
      // The verdict may differ between ranks (one GPU missing): abort all.
      std::cerr << "foldbench: rank " << world_rank << ": " << made.status().message() << "\n";
      MPI_Abort(MPI_COMM_WORLD, kExitRunFailure);
      return kExitRunFailure;
    }
    backend = std::move(made).value();
  } else {
    backend = MakeMpiBackend();
  }
  Environment env;
  env.hosts = backend->AllHostNames();
  env.library_version = backend->LibraryVersion();
  env.backend = backend->name();
  env.placement_class = backend->placement_class();
  env.device_facts = backend->device_facts();

  Backend* raw_backend = backend.get();
  Watchdog watchdog(args->loop.timeout_s, [raw_backend, world_rank, &args](const std::string& what) {
    std::cerr << "foldbench: rank " << world_rank << ": " << what << " did not finish within "
              << args->loop.timeout_s
              << " s (a peer crashed or never joined); aborting the job\n"
              << std::flush;
    raw_backend->Abort(kExitRunFailure);
  });

  std::vector<OpResult> results;
  for (const std::string& name : args->ops) {
    auto ops = MakeOps(name, input.value(), args->op_options, backend.get());
    if (!ops.ok()) {
      // Names were checked; what fails here (a communicator split) may
      // fail on one rank only, so abort rather than leave others waiting.
      std::cerr << "foldbench: rank " << world_rank << ": " << ops.status().message() << "\n";
      backend->Abort(kExitRunFailure);
    }
    for (auto& op : ops.value()) {
      auto result = RunOp(*op, args->loop, *backend, input.value(), &watchdog);
      if (!result.ok()) {
        // A failure on one rank leaves the others inside a collective: abort.
        // RunOp's errors name the op, the case and the group.
        std::cerr << "foldbench: rank " << world_rank << ": " << result.status().message()
                  << "\n";
        backend->Abort(kExitRunFailure);
      }
      results.push_back(std::move(result).value());
    }
  }

  const int64_t wrong = TotalWrongElements(results);
  int code = wrong == 0 ? kExitOk : kExitRunFailure;  // data came back wrong
  if (root) {
    std::cout << ReportTable(env, input.value(), results) << std::flush;
    if (!args->output.empty()) {
      const std::string json = MeasurementsJson(env, input.value(), results).dump(2) + "\n";
      if (Status s = WriteFileAtomically(args->output, json); !s.ok()) {
        std::cerr << "foldbench: " << s.message() << "\n";
        code = code == kExitOk ? kExitInvalidInput : code;  // as foldplan's -o
      } else {
        std::cout << "wrote " << args->output << "\n";
      }
    }
  }
  // Every rank returns the verdict (wrong is summed over the world) so
  // mpirun's exit status is non-zero whichever rank it reports.
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // The watchdog thread may call MPI_Abort while the main thread is inside
  // a collective, which MPI allows at MPI_THREAD_MULTIPLE.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const int code = Run(argc, argv);
  MPI_Finalize();
  return code;
}
