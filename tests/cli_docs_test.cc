// The command line's own documentation: every subcommand's --help ends with
// a working example; the man page and bash completion are what `foldplan
// man` and `foldplan completion` generate from the definition (doc/ holds
// them; FOLDPLAN_UPDATE_GOLDEN=1 rewrites them), and the completion
// completes.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "cli/cli_docs.h"
#include "tests/cli_run.h"

namespace fs = std::filesystem;
using foldplan::testing::RunFoldplan;
using foldplan::testing::Slurp;

namespace {

// The subcommand names `foldplan --help` lists.
std::set<std::string> ListedSubcommands() {
  const auto run = RunFoldplan("--help");
  REQUIRE(run.exit_code == 0);
  std::set<std::string> names;
  const std::size_t start = run.out.find("Subcommands:");
  REQUIRE(start != std::string::npos);
  static const std::regex kLine("\n  ([a-z]+) ");
  const std::string tail = run.out.substr(start);
  for (std::sregex_iterator it(tail.begin(), tail.end(), kLine), end; it != end; ++it) names.insert((*it)[1]);
  return names;
}

void CheckDocFile(const std::string& name, const std::string& actual) {
  const std::string path = std::string(FOLDPLAN_SOURCE_DIR) + "/doc/" + name;
  if (const char* update = std::getenv("FOLDPLAN_UPDATE_GOLDEN"); update && *update == '1') {
    std::ofstream(path) << actual;
    return;
  }
  CHECK_MESSAGE(actual == Slurp(path), path << " is not what the definition generates (FOLDPLAN_UPDATE_GOLDEN=1 "
                                               "rewrites it)");
}

// Runs bash completion on a partial command line; the last word is the one
// being completed.
std::string Complete(const std::string& words) {
  const std::string script = std::string(FOLDPLAN_SOURCE_DIR) + "/doc/foldplan.bash";
  const std::string out = "/tmp/foldplan_complete_" + std::to_string(::getpid());
  const std::string cmd = "bash -c 'source " + script + " && COMP_WORDS=(" + words +
                          ") && COMP_CWORD=$((${#COMP_WORDS[@]} - 1)) && { _foldplan; echo \"${COMPREPLY[*]}\"; }' > " +
                          out + " 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::string text = Slurp(out);
  std::remove(out.c_str());
  return text;
}

}  // namespace

TEST_CASE("every subcommand has exactly one example and its --help shows it") {
  const std::set<std::string> listed = ListedSubcommands();
  std::set<std::string> with_example;
  for (const auto& example : foldplan::CliExamples()) {
    CAPTURE(example.subcommand);
    CHECK(listed.count(example.subcommand) == 1);
    CHECK(with_example.insert(example.subcommand).second);
    const auto help = RunFoldplan(example.subcommand + " --help");
    CHECK(help.exit_code == 0);
    CHECK(help.out.find("Example:\n  " + example.command) != std::string::npos);
  }
  CHECK(with_example == listed);
}

TEST_CASE("the examples run, in order, in a directory holding the shipped data") {
  const char* bin = std::getenv("FOLDPLAN_BIN");
  REQUIRE(bin != nullptr);
  const fs::path dir = fs::temp_directory_path() / ("foldplan_examples_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::create_directory_symlink(fs::path(FOLDPLAN_SOURCE_DIR) / "data", dir / "data");
  const std::string bin_dir = fs::path(bin).parent_path().string();
  int ran = 0;
  for (const auto& example : foldplan::CliExamples()) {
    if (!example.runs_here) continue;
    CAPTURE(example.command);
    const std::string cmd = "cd " + dir.string() + " && PATH=" + bin_dir + ":$PATH " + example.command +
                            " > example.out 2> example.err";
    const int status = std::system(cmd.c_str());
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    CHECK_MESSAGE(ok, Slurp((dir / "example.err").string()));
    ++ran;
  }
  CHECK(ran >= 12);
  fs::remove_all(dir);
}

TEST_CASE("doc/foldplan.1 is the man page the definition generates, and groff reads it") {
  const auto run = RunFoldplan("man");
  REQUIRE(run.exit_code == 0);
  CheckDocFile("foldplan.1", run.out);
  for (const std::string& name : ListedSubcommands())
    CHECK(run.out.find(".SS \"foldplan " + name + "\"") != std::string::npos);
  // An option with its argument's type, help and default, hyphens escaped.
  CHECK(run.out.find(".TP\n\\fB\\-\\-top\\fR \\fIINT\\fR\ncandidates to show and write (default: 10)\n") !=
        std::string::npos);
  if (std::system("command -v groff > /dev/null") == 0) {
    const std::string cmd = "groff -man -Tutf8 " + std::string(FOLDPLAN_SOURCE_DIR) + "/doc/foldplan.1 > /dev/null";
    CHECK(std::system(cmd.c_str()) == 0);
  }
}

TEST_CASE("doc/foldplan.bash is the completion the definition generates, and it completes") {
  const auto run = RunFoldplan("completion");
  REQUIRE(run.exit_code == 0);
  CheckDocFile("foldplan.bash", run.out);
  CHECK(std::system(("bash -n " + std::string(FOLDPLAN_SOURCE_DIR) + "/doc/foldplan.bash").c_str()) == 0);
  // A subcommand from its prefix, a subcommand's option, an option's listed choices.
  CHECK(Complete("foldplan pla") == "plan\n");
  CHECK(Complete("foldplan plan --to") == "--top\n");
  CHECK(Complete("foldplan plan --objective m") == "memory\n");
  CHECK(Complete("foldplan simulate --pla") == "--plan\n");
  CHECK(Complete("foldplan ranks --format s") == "slurm\n");
  // Another subcommand's options are not offered.
  CHECK(Complete("foldplan topo --to") == "\n");
}
