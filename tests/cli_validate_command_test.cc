// `foldplan validate`: the launcher command built from the options (no MPI
// needed), its refusals, and the binary's exit status with a stand-in
// launcher. The run under the real mpirun is tests/cli_validate_launch.sh.
#include "cli_run.h"
#include "text_count.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/validate_command.h"

using foldplan::BuildValidateCommand;
using foldplan::LaunchEnvironment;
using foldplan::ValidateOptions;
using foldplan::testing::Contains;
using foldplan::testing::RunFoldplan;
using Words = std::vector<std::string>;

namespace {

const std::string kPlan = FOLDPLAN_TEST_DATA_DIR "/validate/pp2_cp2_ep4.plan.json";  // world 8
const std::string kRankMap = FOLDPLAN_SOURCE_DIR "/tests/golden/ranks_w16_rankmap.json";  // world 16

// A machine without Open MPI quirks: not root, plenty of cores.
LaunchEnvironment PlainEnv() {
  LaunchEnvironment env;
  env.foldbench = "/opt/fp/bin/foldbench";
  env.mpirun = "mpirun";
  env.launcher_found = true;
  env.cores = 64;
  return env;
}

ValidateOptions Options(const std::string& plan = kPlan) {
  ValidateOptions o;
  o.plan = plan;
  return o;
}

// Writes `text` to a fresh file under /tmp and returns its path.
std::string TempFile(const std::string& name, const std::string& text, bool executable = false) {
  const std::string path = "/tmp/foldplan_validate_test_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path) << text;
  if (executable) ::chmod(path.c_str(), 0755);
  return path;
}

std::string Error(const ValidateOptions& o, const LaunchEnvironment& env = PlainEnv()) {
  auto cmd = BuildValidateCommand(o, env);
  REQUIRE_MESSAGE(!cmd.ok(), "expected an error, got: " << foldplan::ShellJoin(cmd.value()));
  return cmd.status().message();
}

}  // namespace

TEST_CASE("the rank count defaults to the plan's world size") {
  auto cmd = BuildValidateCommand(Options(), PlainEnv());
  REQUIRE(cmd.ok());
  CHECK(cmd.value() == Words{"mpirun", "-np", "8", "/opt/fp/bin/foldbench", "--plan", kPlan});

  cmd = BuildValidateCommand(Options(kRankMap), PlainEnv());  // a rank map: /world_size
  REQUIRE(cmd.ok());
  CHECK(cmd.value()[2] == "16");
}

TEST_CASE("--np other than the plan's world size is refused, naming both") {
  ValidateOptions o = Options();
  o.np = 4;
  const std::string e = Error(o);
  CHECK(Contains(e, "--np 4: "));
  CHECK(Contains(e, "pp2_cp2_ep4.plan.json is for 8 ranks"));
  CHECK(Contains(e, "--np 8"));
  o.np = 8;
  CHECK(BuildValidateCommand(o, PlainEnv()).ok());
  o.np = 0;
  CHECK(Contains(Error(o), "--np: expected a positive integer"));
}

TEST_CASE("flags for foldbench: --backend, --ops, -o, then the ones after -- in order") {
  ValidateOptions o = Options();
  o.backend = "nccl";
  o.ops = "ulysses,dispatch";
  o.output = "m.json";
  o.foldbench_args = {"--max-seq", "512", "--iters", "3"};
  auto cmd = BuildValidateCommand(o, PlainEnv());
  REQUIRE(cmd.ok());
  CHECK(cmd.value() == Words{"mpirun", "-np", "8", "/opt/fp/bin/foldbench", "--plan", kPlan,
                             "--backend", "nccl", "--ops", "ulysses,dispatch", "-o", "m.json",
                             "--max-seq", "512", "--iters", "3"});
}

TEST_CASE("flags after -- are passed through unless validate owns them") {
  ValidateOptions o = Options();
  o.foldbench_args = {"--ops", "ulysses", "--backend", "mpi"};  // not given to validate: fine
  CHECK(BuildValidateCommand(o, PlainEnv()).ok());

  o.ops = "dispatch";
  CHECK(Contains(Error(o), "--ops is given both to foldplan validate and after --"));
  o = Options();
  o.output = "a.json";
  o.foldbench_args = {"--output", "b.json"};
  CHECK(Contains(Error(o), "-o is given both"));
  o = Options();
  o.foldbench_args = {"--plan", "other.json"};
  CHECK(Contains(Error(o), "--plan after --"));
  o = Options();
  o.foldbench_args = {"512"};
  CHECK(Contains(Error(o), "unexpected argument \"512\": foldbench takes only flags"));
}

TEST_CASE("--backend accepts only mpi and nccl") {
  ValidateOptions o = Options();
  o.backend = "gloo";
  CHECK(Contains(Error(o), "--backend gloo: expected mpi or nccl"));
}

TEST_CASE("--mpirun and --mpirun-args: launcher flags before -np, split on spaces") {
  ValidateOptions o = Options();
  LaunchEnvironment env = PlainEnv();
  env.mpirun = "/usr/local/bin/mpiexec";
  o.mpirun_args = "  --hostfile hosts   --bind-to none ";
  auto cmd = BuildValidateCommand(o, env);
  REQUIRE(cmd.ok());
  CHECK(cmd.value() == Words{"/usr/local/bin/mpiexec", "--hostfile", "hosts", "--bind-to", "none",
                             "-np", "8", "/opt/fp/bin/foldbench", "--plan", kPlan});
  o.mpirun_args = "-n 8";
  CHECK(Contains(Error(o, env), "give the number of ranks with --np"));
}

TEST_CASE("Open MPI as root gets --allow-run-as-root; more ranks than cores get --oversubscribe") {
  LaunchEnvironment env = PlainEnv();
  env.open_mpi = true;
  env.root = true;
  env.cores = 2;
  auto cmd = BuildValidateCommand(Options(), env);
  REQUIRE(cmd.ok());
  CHECK(cmd.value() == Words{"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "8",
                             "/opt/fp/bin/foldbench", "--plan", kPlan});

  env.root = false;
  env.cores = 8;  // 8 ranks on 8 cores: no oversubscription
  cmd = BuildValidateCommand(Options(), env);
  REQUIRE(cmd.ok());
  CHECK(cmd.value()[1] == "-np");

  // Given already in --mpirun-args: not added twice.
  env.root = true;
  env.cores = 2;
  ValidateOptions o = Options();
  o.mpirun_args = "--oversubscribe --allow-run-as-root";
  cmd = BuildValidateCommand(o, env);
  REQUIRE(cmd.ok());
  CHECK(cmd.value() == Words{"mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "8",
                             "/opt/fp/bin/foldbench", "--plan", kPlan});

  // Another MPI: these flags are Open MPI's, so neither.
  env.open_mpi = false;
  cmd = BuildValidateCommand(Options(), env);
  REQUIRE(cmd.ok());
  CHECK(cmd.value()[1] == "-np");
}

TEST_CASE("the printed command is shell-quoted") {
  using foldplan::ShellQuote;
  CHECK(ShellQuote("tests/data/plan-1.json") == "tests/data/plan-1.json");
  CHECK(ShellQuote("--ops=ulysses,dispatch") == "--ops=ulysses,dispatch");
  CHECK(ShellQuote("my plan.json") == "'my plan.json'");
  CHECK(ShellQuote("it's") == "'it'\\''s'");
  CHECK(ShellQuote("$HOME") == "'$HOME'");
  CHECK(ShellQuote("") == "''");
  CHECK(ShellQuote("=x") == "'=x'");
  CHECK(ShellQuote("a=b") == "a=b");
  CHECK(foldplan::ShellJoin({"mpirun", "-np", "8", "fb", "--plan", "a b.json"}) ==
        "mpirun -np 8 fb --plan 'a b.json'");
}

TEST_CASE("foldbench is found via $FOLDBENCH or next to foldplan, else a clear error") {
  using foldplan::FindFoldbench;
  auto missing = FindFoldbench(nullptr, "/no/such/dir");
  REQUIRE(!missing.ok());
  CHECK(Contains(missing.status().message(), "foldbench not found: looked for /no/such/dir/foldbench"));
  CHECK(Contains(missing.status().message(), "only when CMake finds MPI"));

  auto bad_env = FindFoldbench("/no/such/foldbench", "/no/such/dir");
  REQUIRE(!bad_env.ok());
  CHECK(Contains(bad_env.status().message(), "FOLDBENCH=/no/such/foldbench is not an executable file"));

  auto from_env = FindFoldbench("/bin/sh", "/no/such/dir");
  REQUIRE(from_env.ok());
  CHECK(from_env.value() == "/bin/sh");

  const std::string dir = "/tmp/foldplan_validate_test_" + std::to_string(::getpid()) + "_bin";
  ::mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/foldbench") << "#!/bin/sh\n";
  CHECK(!FindFoldbench(nullptr, dir).ok());  // not executable
  CHECK(!FindFoldbench("/tmp", dir).ok());    // a directory
  ::chmod((dir + "/foldbench").c_str(), 0755);
  auto next_to = FindFoldbench("", dir);  // FOLDBENCH= (empty) counts as unset
  REQUIRE(next_to.ok());
  CHECK(next_to.value() == dir + "/foldbench");
  std::remove((dir + "/foldbench").c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("a bad plan file is refused naming the file and the JSON pointer") {
  auto world = [](const std::string& name, const std::string& text) {
    const std::string path = TempFile(name, text);
    auto w = foldplan::ReadPlanWorldSize(path);
    std::remove(path.c_str());
    REQUIRE(!w.ok());
    return w.status().message();
  };
  CHECK(Contains(world("a.json", R"({"schema": "foldplan.plan/v1", "candidates": []})"),
            "_a.json: /rank_map: missing; expected an object"));
  CHECK(Contains(world("b.json", R"({"schema": "foldplan.plan/v1", "rank_map": {"world_size": "8"}})"),
            "_b.json: /rank_map/world_size: expected an integer in [1, 1048576], found the string \"8\""));
  CHECK(Contains(world("c.json", R"({"schema": "foldplan.rankmap/v1", "world_size": 0})"),
            "_c.json: /world_size: expected an integer in [1, 1048576], found 0"));
  CHECK(Contains(world("d.json", R"({"schema": "foldplan.model/v1"})"), "_d.json: /schema: expected one of"));
  CHECK(Contains(world("e.json", "{\n  \"schema\": \n"), "_e.json:3:"));
  CHECK(Contains(world("f.json", "[1, 2]"), "_f.json: /: expected an object"));

  auto missing = foldplan::ReadPlanWorldSize("/no/such/plan.json");
  REQUIRE(!missing.ok());
  CHECK(Contains(missing.status().message(), "/no/such/plan.json: cannot open"));

  ValidateOptions o = Options(TempFile("g.json", R"({"schema": "foldplan.rankmap/v1"})"));
  CHECK(Contains(Error(o), "_g.json: /world_size: missing"));
  std::remove(o.plan.c_str());
}

// Through the binary, with $FOLDBENCH standing in for foldbench (so no MPI
// is needed) and a script standing in for the launcher.
TEST_CASE("foldplan validate: refusals exit 1 (a plan it cannot read) or 2 (usage) and launch nothing") {
  ::setenv("FOLDBENCH", "/bin/true", 1);
  auto r = RunFoldplan("validate --plan tests/data/validate/no-such-plan.json");
  CHECK(r.exit_code == 1);
  CHECK(Contains(r.err, "foldplan: tests/data/validate/no-such-plan.json: cannot open"));
  CHECK(r.out.empty());

  r = RunFoldplan("validate --plan tests/data/validate/pp2_cp2_ep4.plan.json --np 4");
  CHECK(r.exit_code == 2);
  CHECK(Contains(r.err, "--np 4: tests/data/validate/pp2_cp2_ep4.plan.json is for 8 ranks"));
  CHECK(!Contains(r.err, "running:"));

  r = RunFoldplan("validate --plan tests/data/validate/pp2_cp2_ep4.plan.json --backend gloo");
  CHECK(r.exit_code == 2);
  r = RunFoldplan("validate --plan tests/data/validate/pp2_cp2_ep4.plan.json --max-seq 512");
  CHECK(r.exit_code == 2);  // foldbench flags go after --
  r = RunFoldplan("validate");
  CHECK(r.exit_code == 2);

  r = RunFoldplan("validate --plan tests/data/validate/pp2_cp2_ep4.plan.json --mpirun /no/such/mpirun");
  CHECK(r.exit_code == 2);
  CHECK(Contains(r.err, "cannot start /no/such/mpirun: No such file or directory"));

  ::setenv("FOLDBENCH", "/no/such/foldbench", 1);
  r = RunFoldplan("validate --plan tests/data/validate/pp2_cp2_ep4.plan.json --dry-run");
  CHECK(r.exit_code == 2);
  CHECK(Contains(r.err, "FOLDBENCH=/no/such/foldbench is not an executable file"));
  r = RunFoldplan("validate --plan tests/data/validate/no-such-plan.json");  // the plan first
  CHECK(Contains(r.err, "no-such-plan.json: cannot open"));
  CHECK(r.exit_code == 1);
  ::unsetenv("FOLDBENCH");
}

TEST_CASE("foldplan validate --dry-run prints the command on stdout") {
  ::setenv("FOLDBENCH", "/bin/true", 1);
  auto r = RunFoldplan(
      "validate --plan tests/data/validate/pp2_cp2_ep4.plan.json --mpirun-args='--tag-output' "
      "--dry-run -- --ops ulysses --max-seq 512");
  ::unsetenv("FOLDBENCH");
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.out, " --tag-output -np 8 /bin/true --plan tests/data/validate/pp2_cp2_ep4.plan.json "
                   "--ops ulysses --max-seq 512\n"));
  CHECK(!Contains(r.err, "running:"));
}

TEST_CASE("foldplan validate prints the command, runs it, and returns its exit status") {
  // The stand-in launcher echoes its arguments and exits with $FAKE_EXIT.
  const std::string launcher = TempFile("launcher.sh",
                                        "#!/bin/sh\n"
                                        "[ \"$1\" = --version ] && { echo 'fake launcher 1.0'; exit 0; }\n"
                                        "echo \"launched: $*\"\n"
                                        "[ \"$FAKE_EXIT\" = kill ] && kill -TERM $$\n"
                                        "exit \"$FAKE_EXIT\"\n",
                                        true);
  ::setenv("FOLDBENCH", "/bin/true", 1);
  const std::string args = "validate --plan tests/data/validate/pp2_cp2_ep4.plan.json --mpirun " +
                           launcher + " -o 'my m.json' -- --iters 2";
  for (const char* code : {"0", "1", "3"}) {
    ::setenv("FAKE_EXIT", code, 1);
    auto r = RunFoldplan(args);
    CHECK(r.exit_code == std::atoi(code));
    CHECK(Contains(r.err, "running: " + launcher +
                         " -np 8 /bin/true --plan tests/data/validate/pp2_cp2_ep4.plan.json "
                         "-o 'my m.json' --iters 2\n"));
    CHECK(Contains(r.out, "launched: -np 8 /bin/true --plan tests/data/validate/pp2_cp2_ep4.plan.json "
                     "-o my m.json --iters 2\n"));
  }
  ::setenv("FAKE_EXIT", "kill", 1);
  auto r = RunFoldplan(args);
  CHECK(r.exit_code == 128 + SIGTERM);
  CHECK(Contains(r.err, "was killed by signal 15"));
  ::unsetenv("FAKE_EXIT");
  ::unsetenv("FOLDBENCH");
  std::remove(launcher.c_str());
}

namespace {

// EP 64 packed on two GB200 NVL72 racks: ranks 64-127 on nodes 18-33, so
// rank 64 is on GPU 72, not 64 (not linear). Written as a rank map file.
std::string PackedRankMap() {
  const std::string path = TempFile("packed.rankmap.json", "");
  auto r = RunFoldplan("ranks --cluster gb200-nvl72-4r --gpus 128 --layout tp=1,pp=1,ep=64,etp=1,placement=packed "
                       "--format rankmap -o " + path);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return path;
}

std::string HostList(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text += "node" + std::to_string(i) + "\n";
  return TempFile("hosts" + std::to_string(n), text);
}

// Open MPI on a 2-core machine: 128 ranks outnumber its cores.
LaunchEnvironment SmallOpenMpi() {
  LaunchEnvironment env = PlainEnv();
  env.open_mpi = true;
  env.cores = 2;
  return env;
}

}  // namespace

TEST_CASE("a packed plan with --hosts gets a rankfile on the planned hosts, and no --oversubscribe") {
  ValidateOptions o = Options(PackedRankMap());
  o.hosts = HostList(34);
  const std::string prefix = TempFile("packed.", "");
  auto files = foldplan::PrepareLaunchFiles(o, prefix, "thishost");
  REQUIRE_MESSAGE(files.ok(), files.status().message());
  CHECK(files->plan == o.plan);
  CHECK(files->rankfile == prefix + "rankfile");
  const std::string rankfile = foldplan::testing::Slurp(files->rankfile);
  CHECK(Contains(rankfile, "\nrank 63=node15 slot=3\nrank 64=node18 slot=0\n"));
  auto cmd = BuildValidateCommand(o, SmallOpenMpi(), &files.value());
  REQUIRE(cmd.ok());
  const std::string line = foldplan::ShellJoin(cmd.value());
  CHECK(Contains(line, "mpirun --rankfile " + prefix + "rankfile -np 128 /opt/fp/bin/foldbench --plan " + o.plan));
  CHECK(!Contains(line, "--oversubscribe"));  // --hosts names the hosts and their slots
  for (const std::string& f : {o.plan, o.hosts, files->rankfile, prefix}) std::remove(f.c_str());
}

TEST_CASE("a non-linear plan spanning nodes without --hosts gets no rankfile and a warning") {
  ValidateOptions o = Options(PackedRankMap());
  auto files = foldplan::PrepareLaunchFiles(o, "/tmp/unused-", "thishost");
  REQUIRE(files.ok());
  CHECK(files->rankfile.empty());
  CHECK(Contains(files->notes, "on 34 nodes; without --hosts FILE the launcher places them linearly"));
  std::remove(o.plan.c_str());
}

TEST_CASE("a linear plan needs no rankfile; --hosts gives one anyway, on the named host") {
  ValidateOptions o = Options();
  auto none = foldplan::PrepareLaunchFiles(o, "/tmp/unused-", "thishost");
  REQUIRE(none.ok());
  CHECK(none->rankfile.empty());
  CHECK(none->notes.empty());
  o.hosts = HostList(1);  // the 8 ranks of kPlan sit on node 0
  const std::string prefix = TempFile("linear.", "");
  auto files = foldplan::PrepareLaunchFiles(o, prefix, "thishost");
  REQUIRE_MESSAGE(files.ok(), files.status().message());
  CHECK(Contains(foldplan::testing::Slurp(files->rankfile), "\nrank 7=node0 slot=7\n"));
  for (const std::string& f : {o.hosts, files->rankfile, prefix}) std::remove(f.c_str());
}

TEST_CASE("a hostfile in --mpirun-args stops the automatic --oversubscribe") {
  ValidateOptions o = Options();  // 8 ranks on 2 cores
  auto cmd = BuildValidateCommand(o, SmallOpenMpi());
  REQUIRE(cmd.ok());
  CHECK(cmd.value()[1] == "--oversubscribe");
  for (const char* flag : {"--hostfile h", "-hostfile h", "--machinefile h", "--host a,b"}) {
    o.mpirun_args = flag;
    cmd = BuildValidateCommand(o, SmallOpenMpi());
    REQUIRE(cmd.ok());
    CHECK_MESSAGE(!Contains(foldplan::ShellJoin(cmd.value()), "--oversubscribe"), flag);
  }
}

TEST_CASE("--candidate writes that candidate's plan for foldbench; past the list is an error") {
  ValidateOptions o = Options();
  o.candidate = 1;  // #1, the best: numbered from 1 as plan numbers them
  const std::string prefix = TempFile("cand.", "");
  auto files = foldplan::PrepareLaunchFiles(o, prefix, "thishost");
  REQUIRE_MESSAGE(files.ok(), files.status().message());
  CHECK(files->plan == prefix + "candidate-1.plan.json");
  // The written plan's rank map is the original's best candidate's.
  const auto written = nlohmann::json::parse(foldplan::testing::Slurp(files->plan));
  const auto original = nlohmann::json::parse(foldplan::testing::Slurp(kPlan));
  CHECK(written["rank_map"]["groups"] == original["rank_map"]["groups"]);
  CHECK(written["candidates"].size() == 1);
  auto cmd = BuildValidateCommand(o, PlainEnv(), &files.value());
  REQUIRE(cmd.ok());
  CHECK(cmd.value().back() == files->plan);
  o.candidate = 2;
  auto past = foldplan::PrepareLaunchFiles(o, prefix, "thishost");
  REQUIRE_FALSE(past.ok());
  CHECK(Contains(past.status().message(), "/candidates"));
  o.candidate = 0;
  CHECK(Contains(Error(o), "--candidate: candidates are numbered from 1 (#1 the best), found 0"));
  for (const std::string& f : {files->plan, prefix}) std::remove(f.c_str());
}

TEST_CASE("foldplan validate --dry-run shows the rankfile of a packed plan") {
  const std::string plan = PackedRankMap();
  const std::string hosts = HostList(34);
  const std::string out = TempFile("m.json", "");
  ::setenv("FOLDBENCH", "/bin/true", 1);
  auto r = RunFoldplan("validate --plan " + plan + " --hosts " + hosts + " -o " + out + " --dry-run");
  ::unsetenv("FOLDBENCH");
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.out, " --rankfile " + out + ".rankfile -np 128 /bin/true --plan " + plan));
  CHECK(!Contains(r.out, "--oversubscribe"));
  CHECK(Contains(foldplan::testing::Slurp(out + ".rankfile"), "rank 127=node33 slot=3\n"));
  for (const std::string& f : {plan, hosts, out, out + ".rankfile"}) std::remove(f.c_str());
}
