// `foldplan validate`: runs foldbench (validate/, doc/validate.md) on a plan
// under mpirun, after printing the exact command. The CLI does not link
// foldbench's code; it only finds and launches the binary.
//
// Exit status (doc/formats.md "Exit codes"), foldbench's own once it runs:
// 0 every element right, 1 an invalid plan, 2 usage (bad flags, --np not
// the plan's world size, foldbench or the launcher not found), 3 a run-time
// failure (wrong elements among them); refused before launching: 1 a plan
// that cannot be read, 2 the rest; a launcher killed by signal S gives 128 + S.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/status.h"

namespace foldplan {

struct ValidateOptions {
  std::string plan;                    // --plan FILE: foldplan.plan/v1 or foldplan.rankmap/v1
  std::optional<int> np;               // --np N; unset = the plan's world size
  std::optional<std::string> backend;  // --backend mpi|nccl; unset = foldbench's default (mpi)
  std::string ops;                     // --ops LIST; "" = foldbench's default
  std::string output;                  // -o FILE (foldplan.measurements/v1)
  std::string mpirun;                  // --mpirun PATH; "" = DefaultLauncher()
  std::string mpirun_args;             // --mpirun-args "...": launcher flags, split on spaces
  std::vector<std::string> foldbench_args;  // after `--`: more foldbench flags, passed as given
  bool dry_run = false;                // print the command, run nothing
  // --candidate N: the plan's candidate N (a plan file only); foldbench
  // reads a one-candidate plan of it written beside -o (or in a temp dir).
  std::optional<int> candidate;
  // --hosts FILE: host names in node order (planner/launch_files.h); the
  // ranks then go on their planned hosts through a rankfile.
  std::string hosts;
};

// What the command depends on besides the options; DetectLaunchEnvironment
// fills it from this machine, tests fill it by hand.
struct LaunchEnvironment {
  std::string foldbench;    // the foldbench executable
  std::string mpirun;       // the launcher (a name looked up on PATH, or a path)
  bool launcher_found = false;  // `mpirun --version` could be started
  bool open_mpi = false;    // the launcher says it is Open MPI
  bool root = false;        // running as root (Open MPI refuses without --allow-run-as-root)
  int cores = 1;            // CPU cores this process may use: Open MPI's default slot count
};

// The world size of a plan or rank map file (/rank_map/world_size or
// /world_size); errors name the file and the JSON pointer.
Result<int> ReadPlanWorldSize(const std::string& path);

// foldbench: $FOLDBENCH when set (`env_value`; it must be an executable
// file), else `foldbench` in `exe_dir` (the directory of the running
// foldplan). The error says where it looked.
Result<std::string> FindFoldbench(const char* env_value, const std::string& exe_dir);

// The launcher used without --mpirun: the mpiexec CMake found next to the
// MPI foldbench was built with, when that file exists; else `mpirun`.
std::string DefaultLauncher();

// Finds foldbench and the launcher and probes the machine (euid, cores,
// `LAUNCHER --version`). Fails only when foldbench is not found.
Result<LaunchEnvironment> DetectLaunchEnvironment(const ValidateOptions& options);

// What validate writes for the launcher besides the options' files.
struct LaunchFiles {
  std::string plan;      // the file foldbench reads: --plan, or candidate N's plan
  std::string rankfile;  // Open MPI rankfile; "" when none is needed
  std::string notes;     // warnings for stderr ("" or lines ending in \n)
};
// Writes candidate N's plan (with --candidate; PlanFileJson of the plan's
// inputs and that layout, as `explain -o` would) and a rankfile when the
// placement needs one: when --hosts is given (ranks on the named hosts), or
// the placement is not linear (rank r not on GPU r) and spans one node (the
// host `local_host`). A non-linear placement over several nodes without
// --hosts gets no rankfile and a note saying so. Files are `prefix` +
// "candidate-N.plan.json" and `prefix` + "rankfile". A --rankfile in
// --mpirun-args is the user's: none is written.
Result<LaunchFiles> PrepareLaunchFiles(const ValidateOptions& options, const std::string& prefix,
                                       const std::string& local_host);

// The launcher's argv:
//   MPIRUN [--allow-run-as-root] [--oversubscribe] [--mpirun-args...] -np N
//     FOLDBENCH --plan FILE [--backend B] [--ops LIST] [-o FILE] [args after --]
// --allow-run-as-root and --oversubscribe are Open MPI's and added only for
// it: the first as root, the second when N exceeds env.cores and the user
// named no hosts (--hosts, or --hostfile/--machinefile in --mpirun-args);
// neither twice. With `files`: foldbench gets files->plan and the launcher
// --rankfile files->rankfile when there is one.
// Reads the plan (for N) but runs nothing.
Result<std::vector<std::string>> BuildValidateCommand(const ValidateOptions& options,
                                                      const LaunchEnvironment& env,
                                                      const LaunchFiles* files = nullptr);

// POSIX shell quoting: `word` unchanged when it needs none, else in single quotes.
std::string ShellQuote(const std::string& word);
// The words quoted and joined by spaces: a line to paste into a shell.
std::string ShellJoin(const std::vector<std::string>& words);

// The subcommand: builds the command, prints it (stdout with --dry-run,
// else "running: ..." on stderr), runs it with inherited stdout/stderr,
// waits, and returns its exit status (see the top of this file).
int RunValidate(const ValidateOptions& options, std::ostream& out, std::ostream& err);

}  // namespace foldplan
