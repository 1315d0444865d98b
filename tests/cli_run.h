// Runs the foldplan binary (path in $FOLDPLAN_BIN, set by CTest) and
// compares its output with golden files in tests/golden/. Set
// FOLDPLAN_UPDATE_GOLDEN=1 to rewrite the golden files from today's output.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

namespace foldplan::testing {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = text.find(from, pos)) != std::string::npos; pos += to.size()) {
    text.replace(pos, from.size(), to);
  }
  return text;
}

// Runs `foldplan ARGS` from the source directory, so that relative paths
// in ARGS and in messages are stable. With `timeout_s`, a run that takes
// longer is killed and reported as exit 124 (timeout(1)).
inline CliRun RunFoldplan(const std::string& args, int timeout_s = 0) {
  const char* bin = std::getenv("FOLDPLAN_BIN");
  REQUIRE_MESSAGE(bin != nullptr, "FOLDPLAN_BIN is not set (run through ctest)");
  static int counter = 0;
  const std::string base = "/tmp/foldplan_cli_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const std::string limit = timeout_s > 0 ? "timeout -k 2 " + std::to_string(timeout_s) + " " : "";
  const std::string cmd = "cd " FOLDPLAN_SOURCE_DIR " && " + limit + std::string(bin) + " " + args + " >" +
                          base + ".out 2>" + base + ".err";
  const int status = std::system(cmd.c_str());
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = ReplaceAll(Slurp(base + ".out"), FOLDPLAN_SOURCE_DIR, "<src>");
  run.err = ReplaceAll(Slurp(base + ".err"), FOLDPLAN_SOURCE_DIR, "<src>");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return run;
}

// A run of `foldplan ARGS` that must exit with `code`, say `message` on
// stderr and print nothing on stdout.
inline void ExpectExit(int code, const std::string& args, const std::string& message) {
  auto r = RunFoldplan(args);
  CHECK_MESSAGE(r.exit_code == code, args << "\nstderr: " << r.err);
  CHECK_MESSAGE(r.err.find(message) != std::string::npos, args << "\nstderr: " << r.err);
  CHECK_MESSAGE(r.out.empty(), args << "\nstdout: " << r.out);
}

// The same for a usage error (exit 2).
inline void ExpectUsage(const std::string& args, const std::string& message) { ExpectExit(2, args, message); }

// A path in the temporary directory for a file this process writes.
inline std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "-" + name)).string();
}

inline void CheckGolden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(FOLDPLAN_SOURCE_DIR) + "/tests/golden/" + name;
  if (const char* update = std::getenv("FOLDPLAN_UPDATE_GOLDEN"); update && *update == '1') {
    std::ofstream(path) << actual;
    return;
  }
  const std::string expected = Slurp(path);
  REQUIRE_MESSAGE(!expected.empty(), "missing golden file " << path);
  CHECK_MESSAGE(actual == expected, "output differs from " << path
                                         << " (FOLDPLAN_UPDATE_GOLDEN=1 rewrites it)\n--- actual:\n"
                                         << actual);
}

}  // namespace foldplan::testing
