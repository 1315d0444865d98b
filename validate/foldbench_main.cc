// foldbench: every rank of `mpirun -np N foldbench --plan FILE ...` runs
// this. Exit status: 0 all checked elements right, 1 a wrong element,
// 2 bad arguments or input (nothing ran), 3 a backend error.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <type_traits>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "validate/backend.h"
#include "validate/op.h"
#include "validate/plan_input.h"
#include "validate/report.h"

namespace {

using namespace foldplan;
using namespace foldplan::validate;

constexpr const char* kUsage =
    "usage: mpirun -np N foldbench --plan FILE [--backend mpi] [--ops ulysses]\n"
    "                 [-o measurements.json] [--max-seq N] [--warmup N] [--iters N]\n"
    "                 [--corrupt-rank R]\n"
    "  FILE is a foldplan.plan/v1 (foldplan plan/explain -o) or foldplan.rankmap/v1 file\n";

struct Args {
  std::string plan, output, backend = "mpi";
  std::vector<std::string> ops = {"ulysses"};
  OpOptions op_options;
  LoopOptions loop;
  bool help = false;
};

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
    Status s;
    if (flag == "--plan") args.plan = value;
    else if (flag == "-o" || flag == "--output") args.output = value;
    else if (flag == "--backend") args.backend = value;
    else if (flag == "--ops") {
      args.ops.clear();
      std::stringstream list(value);
      for (std::string op; std::getline(list, op, ',');) args.ops.push_back(op);
    } else if (flag == "--max-seq") s = integer(1, &args.op_options.max_seq_len);
    else if (flag == "--warmup") s = integer(0, &args.loop.warmup_iters);
    else if (flag == "--iters") s = integer(1, &args.loop.timed_iters);
    else if (flag == "--corrupt-rank") s = integer(0, &args.loop.corrupt_rank);
    else return Status::Error(flag + ": unknown flag");
    if (!s.ok()) return s;
  }
  if (!args.help && args.plan.empty()) return Status::Error("--plan FILE is required");
  if (args.backend != "mpi") {
    return Status::Error("--backend " + args.backend +
                         ": only the mpi backend is built (nccl is not implemented yet)");
  }
  return args;
}

// Every rank reaches the same verdict on arguments and input (they read
// the same file), so all exit together without a collective to hang in.
int Finish(int code) {
  MPI_Finalize();
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const bool root = world_rank == 0;

  Result<Args> args = ParseArgs(argc, argv);
  if (!args.ok()) {
    if (root) std::cerr << "foldbench: " << args.status().message() << "\n" << kUsage;
    return Finish(2);
  }
  if (args->help) {
    if (root) std::cout << kUsage;
    return Finish(0);
  }
  Result<BenchInput> input = ReadBenchInput(args->plan);
  Status world_ok = input.ok() ? CheckWorldSize(input.value(), world_size) : input.status();
  if (!world_ok.ok()) {
    if (root) std::cerr << "foldbench: " << world_ok.message() << "\n";
    return Finish(2);
  }
  if (args->loop.corrupt_rank >= world_size) {
    if (root) std::cerr << "foldbench: --corrupt-rank must be below " << world_size << "\n";
    return Finish(2);
  }

  std::unique_ptr<Backend> backend = MakeMpiBackend();
  Environment env;
  env.hosts = backend->AllHostNames();
  env.library_version = backend->LibraryVersion();
  env.backend = backend->name();
  env.placement_class = backend->placement_class();

  std::vector<OpResult> results;
  for (const std::string& name : args->ops) {
    auto op = MakeOp(name, input.value(), args->op_options, backend.get());
    if (!op.ok()) {  // same on every rank: nothing has run yet for this op
      if (root) std::cerr << "foldbench: " << op.status().message() << "\n";
      return Finish(2);
    }
    auto result = RunOp(*op.value(), args->loop, *backend, input.value());
    if (!result.ok()) {
      // A failure on one rank leaves the others inside a collective: abort.
      std::cerr << "foldbench: rank " << world_rank << ": op " << name << ": "
                << result.status().message() << "\n";
      MPI_Abort(MPI_COMM_WORLD, 3);
      return 3;
    }
    results.push_back(std::move(result).value());
  }

  const int64_t wrong = TotalWrongElements(results);
  int code = wrong == 0 ? 0 : 1;
  if (root) {
    std::cout << ReportTable(env, input.value(), results) << std::flush;
    if (!args->output.empty()) {
      const std::string json = MeasurementsJson(env, input.value(), results).dump(2) + "\n";
      if (Status s = WriteFileAtomically(args->output, json); !s.ok()) {
        std::cerr << "foldbench: " << s.message() << "\n";
        code = code == 0 ? 2 : code;
      } else {
        std::cout << "wrote " << args->output << "\n";
      }
    }
  }
  // Every rank returns the verdict (wrong is summed over the world) so
  // mpirun's exit status is non-zero whichever rank it reports.
  return Finish(code);
}
