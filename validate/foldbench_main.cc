// foldbench: every rank of `mpirun -np N foldbench --plan FILE ...` runs
// this. Exit status (doc/formats.md "Exit codes"): 0 every checked element
// right; 1 an invalid input (the plan file; nothing ran) or an output file
// that could not be written; 2 command-line usage, the launcher's -np
// included (nothing ran); 3 a run-time failure: a wrong element, a backend
// error, a hang the watchdog ended (the job is aborted).
#include <mpi.h>

#include <iostream>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "validate/backend.h"
#include "validate/bench_args.h"
#include "validate/op.h"
#include "validate/plan_input.h"
#include "validate/report.h"
#include "validate/watchdog.h"

namespace {

using namespace foldplan;
using namespace foldplan::validate;

// Exit codes, doc/formats.md "Exit codes".
constexpr int kExitOk = 0;
constexpr int kExitInvalidInput = 1;
constexpr int kExitUsage = 2;
constexpr int kExitRunFailure = 3;

// Everything after MPI_Init and before MPI_Finalize, so that the backend and
// its communicators are gone before MPI is. Every rank reaches the same
// verdict on arguments and input (they read the same file), so a refusal
// exits all ranks without a collective to hang in.
int Run(int argc, char** argv) {
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const bool root = world_rank == 0;

  Result<BenchArgs> args = ParseBenchArgs(std::vector<std::string>(argv + 1, argv + argc));
  if (!args.ok()) {
    if (root) std::cerr << "foldbench: " << args.status().message() << "\n" << kBenchUsage;
    return kExitUsage;
  }
  if (args->help) {
    if (root) std::cout << kBenchUsage;
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
