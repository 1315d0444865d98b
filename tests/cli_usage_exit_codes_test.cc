// Through the command line: every flag value is checked against its
// range before any work that grows with it, a value wrong on its own is a
// usage error (exit 2, as the parser's own errors), and a layout that cannot
// be this job's, or does not fit in memory, is a negative answer (exit 1):
// doc/formats.md, Exit codes.
#include "cli_run.h"
#include "under_sanitizer.h"

#include <unistd.h>

#include <cstdio>
#include <cctype>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using foldplan::testing::ExpectExit;
using foldplan::testing::ExpectUsage;
using foldplan::testing::RunFoldplan;

namespace {

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

}  // namespace

TEST_CASE("--nodes takes the cluster file's range, and its GPUs the largest world") {
  // Was "world -8" and exit 0: 2147483647 x 8 wrapped.
  for (const char* cmd : {"enumerate", "topo", "plan", "explain --layout tp=1", "ranks --layout tp=1"}) {
    ExpectUsage(std::string(cmd) + " --nodes 2147483647", "foldplan: --nodes: expected an integer in [1, 1048576], found 2147483647");
  }
  ExpectUsage("enumerate --nodes 0", "--nodes: expected an integer in [1, 1048576], found 0");
  ExpectExit(1, "enumerate --nodes 1048576",
             "foldplan: --nodes 1048576: 1048576 x 8 GPUs per node is more than the largest world, 1048576 GPUs");
}

TEST_CASE("products of layout degrees beyond the largest world are refused, not computed") {
  // Was SIGFPE (pp*tp*cp wrapped to 0, then world % 0) and an overflow.
  ExpectUsage("explain --model mixtral-8x7b --layout tp=65536,pp=65536",
              "foldplan: layout: pp*tp*cp*dp = 65536*65536*1*1 is more than the largest world, 1048576 ranks");
  ExpectUsage("ranks --world-size 16 --layout tp=46341,cp=46341",
              "foldplan: layout: pp*tp*cp*dp = 1*46341*46341*1 is more than the largest world, 1048576 ranks");
  ExpectUsage("enumerate --layout pp=2048,vpp=1024", "layout: pp*vpp = 2048*1024 is more than the largest world");
  ExpectUsage("plan --fix tp=1024,ep=2048", "--fix tp=1024,ep=2048: layout: pp*etp*ep*edp = 1*1024*2048*1");
}

TEST_CASE("job overrides take the job file's ranges") {
  ExpectUsage("enumerate --global-batch 0", "--global-batch: expected an integer in [1, 16777216], found 0");
  ExpectUsage("enumerate --global-batch 16777217", "--global-batch: expected an integer in [1, 16777216], found 16777217");
  ExpectUsage("enumerate --seq 16777217", "--seq: expected an integer in [1, 16777216], found 16777217");
  ExpectUsage("enumerate --micro-batch 65537", "--micro-batch: expected an integer in [1, 65536], found 65537");
  ExpectUsage("plan --gpus 0", "--gpus: expected an integer in [1, 1048576], found 0");
  ExpectUsage("plan --gpus 1048577", "--gpus: expected an integer in [1, 1048576], found 1048577");
  ExpectUsage("topo --gpus-per-domain 0", "--gpus-per-domain: expected an integer in [1, 1048576], found 0");
  ExpectUsage("enumerate --mtp 65", "--mtp: expected an integer in [0, 64], found 65");
}

TEST_CASE("absurd sizes are refused before the work that grows with them") {
  // Was a hang in explain and 24 GB in ranks.
  ExpectUsage("ranks --world-size 100000000 --layout tp=1", "--world-size: expected an integer in [1, 1048576], found 100000000");
  ExpectUsage("ranks --world-size 0 --layout tp=1", "--world-size: expected an integer in [1, 1048576], found 0");
  ExpectUsage("explain --layout vpp=2147483647", "layout: vpp=2147483647: expected an integer in [1, 1024]");
  // In range, but more virtual stages than the model's 32 layers can fill:
  // illegal, with the reason, and not costed.
  ExpectExit(1, "explain --model mixtral-8x7b --nodes 512 --layout pp=2,vpp=1024",
             "pipeline_split: 32 layers cannot fill 2048 virtual stages (2 x 1024)");
  auto r = RunFoldplan("explain --model mixtral-8x7b --nodes 512 --layout pp=2,vpp=1024");
  CHECK(r.err.find("not explained: 2048 virtual stages cannot hold the model's 32 layers") != std::string::npos);
}

TEST_CASE("an empty --layout or --fix is an error, not the default layout") {
  for (const char* cmd : {"explain", "enumerate", "ranks --world-size 16"}) {
    ExpectUsage(std::string(cmd) + " --layout ''", "--layout: expected a value, found an empty one");
    ExpectUsage(std::string(cmd) + " --layout ','", "foldplan: layout: \",\": an empty item (expected key=value between commas)");
  }
  ExpectUsage("explain --model mixtral-8x7b --layout tp=2,,pp=2", "an empty item");
  ExpectUsage("plan --fix ''", "foldplan: plan: --fix: expected a value, found an empty one");
}

TEST_CASE("--threads, --top and --limit are bounded") {
  for (const char* n : {"0", "-1", "100000"}) {
    ExpectUsage(std::string("plan --threads ") + n, std::string("--threads: expected an integer in [1, 256], found ") + n);
  }
  ExpectUsage("plan --top 0", "--top: expected an integer in [1, 10000], found 0");
  ExpectUsage("plan --top 10001", "--top: expected an integer in [1, 10000], found 10001");
  ExpectUsage("enumerate --limit -1", "--limit: expected 0 (all) or a positive count, found -1");
}

TEST_CASE("a flag value that is not one of its names is usage") {
  ExpectUsage("plan --objective speed", "--objective: expected throughput or memory, found \"speed\"");
  ExpectUsage("plan --precision fp16", "--precision: expected one of bf16");
  ExpectUsage("ranks --world-size 16 --layout tp=1 --format foo", "unknown export format 'foo'");
  ExpectUsage("explain --layout cp_style=zigzag", "cp_style=zigzag: expected one of ulysses, ring");
}

TEST_CASE("a well-formed layout this job cannot run is a negative answer") {
  ExpectExit(1, "enumerate --model mixtral-8x7b --layout tp=16,cp=1,pp=8,ep=16,etp=1", "is illegal; it breaks 2 rules");
  ExpectExit(1, "explain --layout tp=3", "does not divide the world size 128");
}

// Mixtral 8x7B on 8 GPUs with PP2 CP2 EP4 needs about 121 GiB of an H100's 79.6.
TEST_CASE("explain of a layout that does not fit exits 1 and writes its plan only with --allow-oom") {
  const std::string oom = "explain --cluster h100-dgx-16n --gpus 8 --model mixtral-8x7b --layout tp=1,cp=2,pp=2,ep=4,etp=1 "
                          "--global-batch 64";
  const std::string why = "does not fit in memory: peak 121.0 GiB on stage 0 > 79.6 GiB of HBM";
  auto r = RunFoldplan(oom);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find(why) != std::string::npos);
  CHECK(r.out.find("DOES NOT FIT") != std::string::npos);  // the breakdown is still printed

  const std::string path = "/tmp/foldplan_cli_oom_" + std::to_string(::getpid()) + ".json";
  std::remove(path.c_str());
  r = RunFoldplan(oom + " -o " + path);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("not writing " + path + ": the layout does not fit in memory (--allow-oom writes it)") !=
        std::string::npos);
  CHECK_FALSE(Exists(path));

  r = RunFoldplan(oom + " -o " + path + " --allow-oom");
  CHECK_MESSAGE(r.exit_code == 0, r.err);
  CHECK(Exists(path));
  CHECK(r.err.find(why + " (--allow-oom)") != std::string::npos);
  std::remove(path.c_str());

  r = RunFoldplan(oom + " --json");
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("\"fits\": false") != std::string::npos);
}

TEST_CASE("explain of an illegal layout gives the reason on stderr too") {
  auto r = RunFoldplan("explain --model mixtral-8x7b --layout tp=16,cp=1,pp=8,ep=16,etp=1");
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("is illegal; it breaks 2 rules:\n  tp_divides_kv_heads") != std::string::npos);
}

namespace {

// Every option of every command as its --help lists it: (command, flag,
// type name), flags without a value left out.
struct UsageFlag {
  std::string command, flag, type;
};
std::vector<UsageFlag> UsageFlagsFromHelp() {
  std::vector<UsageFlag> flags;
  std::istringstream commands(RunFoldplan("--help").out);
  std::vector<std::string> names;
  for (std::string line; std::getline(commands, line);) {
    std::istringstream words(line);
    std::string word;
    if (line.rfind("  ", 0) == 0 && line.size() > 2 && std::islower(static_cast<unsigned char>(line[2])) && (words >> word)) {
      names.push_back(word);
    }
  }
  for (const std::string& command : names) {
    std::istringstream help(RunFoldplan(command + " --help").out);
    for (std::string line; std::getline(help, line);) {
      if (line.rfind("  -", 0) != 0) continue;
      std::istringstream words(line);
      std::string names_word, type;
      words >> names_word >> type;
      const std::string flag = names_word.substr(names_word.rfind(',') + 1);
      if (flag == "--help" || type.empty() || !std::isupper(static_cast<unsigned char>(type[0]))) continue;
      flags.push_back({command, flag, type.substr(0, type.find('='))});
    }
  }
  return flags;
}

}  // namespace

TEST_CASE("every numeric flag of every command takes decimal digits only: no hex, spaces, exponent or overflow") {
  int numeric = 0;
  for (const UsageFlag& f : UsageFlagsFromHelp()) {
    const bool integer = f.type == "INT" || f.type == "N" || f.type == "K" || f.type == "UINT";
    const bool number = f.type == "FLOAT" || f.type == "X";
    if (!integer && !number) continue;
    ++numeric;
    const std::string at = f.command + " " + f.flag;
    // Before: 0x10 was 16, " 1" was 1, and an unsigned -1 or 2^64 became 2^64 - 1.
    std::vector<std::string> bad = {"0x10", "' 1'", "'1 '", "inf"};
    if (integer) bad.insert(bad.end(), {"1e3", "1.0", "18446744073709551616"});
    if (f.type == "UINT") bad.push_back("-1");
    // Under ASan (each run three times slower, some 300 runs here) each flag
    // gets one of the bad forms in turn: every form still meets several
    // flags, every flag one form; the rule is one function for them all
    // (ApplyValueRules).
    if (foldplan::testing::kUnderAsan) bad = {bad[static_cast<size_t>(numeric) % bad.size()]};
    for (const std::string& value : bad) {
      const auto r = RunFoldplan(at + " " + value);
      CHECK_MESSAGE(r.exit_code == 2, at << " " << value << "\nstderr: " << r.err);
      CHECK_MESSAGE(r.err.find(f.command + ": " + f.flag + ": expected ") != std::string::npos,
                    at << " " << value << "\nstderr: " << r.err);
    }
  }
  CHECK(numeric >= 30);  // the walk found the flags
}

TEST_CASE("an empty value is a usage error for every flag that takes one, not \"unset\"") {
  int flags = 0;
  for (const UsageFlag& f : UsageFlagsFromHelp()) {
    ++flags;
    const auto r = RunFoldplan(f.command + " " + f.flag + " ''");
    CHECK_MESSAGE(r.exit_code == 2, f.command << " " << f.flag << " ''\nstderr: " << r.err);
    CHECK_MESSAGE(r.err.find(f.flag + ": expected a value, found an empty one") != std::string::npos,
                  f.command << " " << f.flag << "\nstderr: " << r.err);
  }
  CHECK(flags >= 100);
}

TEST_CASE("a leading zero is decimal, not octal, and the largest seed is taken whole") {
  const std::string model = "--model mixtral-8x7b --layout tp=1,pp=4,ep=8 --imbalance zipf:1.2 --json";
  const auto a = RunFoldplan("simulate " + model + " --seed 010");
  const auto b = RunFoldplan("simulate " + model + " --seed 10");
  REQUIRE(a.exit_code == 0);
  CHECK(a.out == b.out);
  CHECK(RunFoldplan("simulate " + model + " --seed 18446744073709551615").exit_code == 0);
}

TEST_CASE("a capacity factor below one token's share of an expert is a usage error") {
  // Was accepted: MFU 175% at 0.001.
  for (const char* x : {"0.001", "1e-320", "0.5"}) {
    ExpectUsage(std::string("explain --model mixtral-8x7b --layout tp=1,pp=4,ep=8 --capacity-factor ") + x,
                "--capacity-factor: expected 0 (dropless) or a number in [1, 1024]");
  }
  CHECK(RunFoldplan("explain --model mixtral-8x7b --layout tp=1,pp=4,ep=8 --capacity-factor 1").exit_code == 0);
  CHECK(RunFoldplan("explain --model mixtral-8x7b --layout tp=1,pp=4,ep=8 --capacity-factor 0").exit_code == 0);
}

TEST_CASE("--trace-ranks needs --trace, takes each rank once, and takes every simulated rank with --whole") {
  const std::string sim = "simulate --model mixtral-8x7b --layout tp=1,pp=4,ep=8 ";
  ExpectUsage(sim + "--trace-ranks 0", "simulate: --trace-ranks needs --trace");
  const std::string trace = foldplan::testing::TempPath("trace_ranks.json");
  ExpectUsage(sim + "--trace " + trace + " --trace-ranks 1,1", "--trace-ranks: rank 1 given twice: give each rank once");
  ExpectUsage(sim + "--trace " + trace + " --trace-ranks 4",
              "--trace-ranks: expected simulated ranks 0..3 (the pipeline ranks; --whole simulates every rank)");
  // The whole path simulates the 128 ranks of the world: rank 17 is one of them.
  const auto whole = RunFoldplan(sim + "--whole --trace " + trace + " --trace-ranks 5,17");
  CHECK_MESSAGE(whole.exit_code == 0, whole.err);
  CHECK(foldplan::testing::Slurp(trace).find("\"pipeline rank 17\"") != std::string::npos);
  std::remove(trace.c_str());
}
