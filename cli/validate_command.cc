#include "cli/validate_command.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "core/atomic_file.h"
#include "core/formats.h"
#include "core/json_check.h"
#include "costmodel/evaluate.h"
#include "costmodel/plan_file.h"
#include "planner/launch_files.h"

extern char** environ;

namespace foldplan {
namespace {

// Prints the error; refused, nothing ran. A plan that cannot be read is
// invalid input (1); every other refusal is command-line usage (2), as in
// foldbench (doc/formats.md "Exit codes").
int Refuse(std::ostream& err, const Status& status, const ValidateOptions& options) {
  err << "foldplan: " << status.message() << "\n";
  if (!options.plan.empty()) {
    auto world = ReadPlanWorldSize(options.plan);
    if (!world.ok() && world.status().message() == status.message()) return 1;
  }
  return 2;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

std::string ExeDir() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  const std::string exe(buf, static_cast<size_t>(n));
  const auto slash = exe.rfind('/');
  return slash == std::string::npos ? "" : exe.substr(0, slash);
}

std::vector<std::string> SplitOnSpaces(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

bool Contains(const std::vector<std::string>& words, std::initializer_list<const char*> any) {
  for (const auto& w : words) {
    for (const char* a : any) {
      if (w == a) return true;
    }
  }
  return false;
}

// CPU cores among the CPUs this process may run on (distinct package and
// core ids); Open MPI gives a machine that many slots unless told otherwise.
int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) {
    return std::max(1u, std::thread::hardware_concurrency());
  }
  std::set<std::string> cores;
  int cpus = 0;
  bool topology = true;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    ++cpus;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    std::string package, core;
    if ((std::ifstream(dir + "physical_package_id") >> package) &&
        (std::ifstream(dir + "core_id") >> core)) {
      cores.insert(package + ":" + core);
    } else {
      topology = false;
    }
  }
  if (topology && !cores.empty()) return static_cast<int>(cores.size());
  return std::max(1, cpus);
}

std::vector<char*> CArgv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

// Runs `LAUNCHER --version` and returns what it printed (stdout and stderr),
// or nullopt when it cannot be started.
std::optional<std::string> LauncherVersion(const std::string& launcher) {
  int fds[2];
  if (::pipe(fds) != 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  const std::vector<std::string> argv = {launcher, "--version"};
  auto cargv = CArgv(argv);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, launcher.c_str(), &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  std::string text;
  if (rc == 0) {
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
      if (n < 0) {
        if (errno == EINTR) continue;
        break;
      }
      text.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fds[0]);
  if (rc != 0) return std::nullopt;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return text;
}

// The launcher's pid while it runs, and the last signal we were sent then.
volatile sig_atomic_t g_launcher_pid = 0;
volatile sig_atomic_t g_signal = 0;

extern "C" void NoteSignal(int sig) { g_signal = sig; }

extern "C" void ForwardToLauncher(int sig) {
  g_signal = sig;
  if (g_launcher_pid > 0) ::kill(g_launcher_pid, sig);
}

// Starts argv with inherited stdin/stdout/stderr and waits for it. While it
// runs, SIGINT and SIGQUIT are only noted here (a terminal sends them to the
// launcher too, which stops its ranks) and SIGTERM and SIGHUP are passed on,
// so that the launcher is never left running without us. Signalled (S) and
// the launcher did not exit 0, we return 128 + S whatever its own status.
Result<int> SpawnAndWait(const std::vector<std::string>& argv, std::ostream& err) {
  // Signals ignored when we started (nohup, a background job) stay ignored,
  // here and in the launcher; the others get our handlers here and the
  // default action in the launcher.
  struct Handled {
    int sig;
    void (*handler)(int);
    struct sigaction old;
  };
  Handled handled[] = {{SIGINT, NoteSignal, {}},
                       {SIGQUIT, NoteSignal, {}},
                       {SIGTERM, ForwardToLauncher, {}},
                       {SIGHUP, ForwardToLauncher, {}}};
  sigset_t defaults, empty;
  sigemptyset(&defaults);
  sigemptyset(&empty);
  g_signal = 0;
  for (Handled& h : handled) {
    ::sigaction(h.sig, nullptr, &h.old);
    if (h.old.sa_handler == SIG_IGN) continue;
    struct sigaction act {};
    act.sa_handler = h.handler;
    act.sa_flags = SA_RESTART;
    ::sigaction(h.sig, &act, nullptr);
    sigaddset(&defaults, h.sig);
  }
  auto restore = [&] {
    g_launcher_pid = 0;
    for (const Handled& h : handled) ::sigaction(h.sig, &h.old, nullptr);
  };
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  auto cargv = CArgv(argv);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), nullptr, &attr, cargv.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    restore();
    const std::string hint = argv[0].find('/') == std::string::npos
                                 ? " (looked for it on PATH); install MPI, or give --mpirun PATH"
                                 : "";
    return Status::Error("cannot start " + argv[0] + ": " + std::strerror(rc) + hint);
  }
  g_launcher_pid = pid;
  int status = 0;
  pid_t waited;
  while ((waited = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  restore();
  if (waited < 0) return Status::Error("waiting for " + argv[0] + ": " + std::strerror(errno));
  const bool launcher_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (const int sig = g_signal; sig != 0 && !launcher_ok) {
    err << "foldplan: stopped by signal " << sig << " (" << ::strsignal(sig) << "); "
        << argv[0] << " "
        << (WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                              : "was killed by signal " + std::to_string(WTERMSIG(status)))
        << "\n";
    return 128 + sig;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    err << "foldplan: " << argv[0] << " was killed by signal " << sig << " (" << ::strsignal(sig)
        << ")\n";
    return 128 + sig;
  }
  return Status::Error(argv[0] + ": unexpected wait status " + std::to_string(status));
}

// Flags by which the user names the hosts: the slot counts are theirs then.
bool NamesHosts(const std::vector<std::string>& launcher_args) {
  return Contains(launcher_args, {"--hostfile", "-hostfile", "--machinefile", "-machinefile", "--default-hostfile",
                                  "-default-hostfile", "--host", "-host", "-H"});
}

bool NamesRankfile(const std::vector<std::string>& launcher_args) {
  return Contains(launcher_args, {"--rankfile", "-rankfile", "-rf"});
}

// Each rank's place as the file foldbench reads records it
// (/rank_map/placement in a plan, /placement in a rank map), and whether
// rank r is on GPU r throughout.
struct FilePlacement {
  LaunchPlacement launch;
  bool linear = true;
};

Result<FilePlacement> ReadPlacement(const std::string& path) {
  auto world = ReadPlanWorldSize(path);
  if (!world.ok()) return world.status();
  auto doc = ParseJsonFile(path);
  if (!doc.ok()) return doc.status();
  JsonErrors errors(path);
  CheckedObject root(doc.value(), "", &errors);
  const bool plan = root.String("schema") == kPlanSchema;
  CheckedObject map = plan ? root.Object("rank_map") : root;
  if (!errors.empty()) return errors.status();
  CheckedObject placement = map.Object("placement");
  FilePlacement out;
  out.launch.layout_text = map.String("layout", "?");
  if (!errors.empty()) return errors.status();
  out.launch.placement = placement.String("kind", "?");
  const std::vector<int64_t> gpu = placement.IntList("gpu", 0, kMaxWorldSize);
  const std::vector<int64_t> node = placement.IntList("node", 0, kMaxWorldSize);
  const std::vector<int64_t> local = placement.IntList("local_gpu", 0, kMaxWorldSize);
  if (!errors.empty()) return errors.status();
  for (const auto& [key, list] : {std::pair{"gpu", &gpu}, std::pair{"node", &node}, std::pair{"local_gpu", &local}}) {
    if (static_cast<int>(list->size()) != world.value()) {
      errors.Add(placement.Pointer(key), "expected " + std::to_string(world.value()) + " entries (the world size), found " +
                                             std::to_string(list->size()));
    }
  }
  if (!errors.empty()) return errors.status();
  for (int r = 0; r < world.value(); ++r) {
    out.launch.ranks.push_back({static_cast<int>(node[r]), static_cast<int>(local[r])});
    out.linear = out.linear && gpu[r] == r;
  }
  return out;
}

}  // namespace

Result<LaunchFiles> PrepareLaunchFiles(const ValidateOptions& o, const std::string& prefix,
                                       const std::string& local_host) {
  LaunchFiles files;
  files.plan = o.plan;
  if (o.candidate) {
    if (Status s = CheckCandidateNumber("--candidate", *o.candidate); !s.ok()) return s;
    // foldbench reads the plan's rank map, which is the best candidate's:
    // candidate N gets a plan of its own, made as `explain -o` makes one.
    auto plan = LoadPlanFile(o.plan, *o.candidate);
    if (!plan.ok()) return plan.status();
    auto model = CostModel::Create(plan->cluster, plan->model, plan->job);
    if (!model.ok()) return model.status();
    const Evaluation e = model.value()->Evaluate(plan->layout);
    PlanFileContents contents{model.value().get(), "explain", {e}, nullptr};
    auto text = PlanFileJson(contents);
    if (!text.ok()) return text.status();
    files.plan = prefix + "candidate-" + std::to_string(*o.candidate) + ".plan.json";
    if (Status s = WriteFileAtomically(files.plan, text.value()); !s.ok()) return s;
  }
  const std::vector<std::string> launcher_args = SplitOnSpaces(o.mpirun_args);
  if (NamesRankfile(launcher_args)) {
    if (!o.hosts.empty()) return Status::Error("--hosts and a --rankfile in --mpirun-args: give one of them");
    return files;  // the user's rankfile places the ranks
  }
  auto placement = ReadPlacement(files.plan);
  if (!placement.ok()) return placement.status();
  std::vector<std::string> hosts;
  std::string hosts_file = o.hosts;
  if (o.hosts.empty()) {
    if (placement->linear) return files;  // what the launcher does unasked
    const int nodes = NodesUsed(placement->launch);
    if (nodes > 1) {
      files.notes = "foldplan: warning: " + files.plan + " places its ranks non-linearly (placement " +
                    placement->launch.placement + ") on " + std::to_string(nodes) +
                    " nodes; without --hosts FILE the launcher places them linearly, not on their planned nodes\n";
      return files;
    }
    hosts = {local_host};
    hosts_file = "this host";
  } else {
    auto read = ReadHostList(o.hosts);
    if (!read.ok()) return read.status();
    hosts = std::move(read).value();
  }
  auto assignment = AssignHosts(placement->launch, hosts, hosts_file);
  if (!assignment.ok()) return assignment.status();
  auto text = LaunchFileText(assignment.value(), placement->launch, LaunchFormat::kOpenMpiRankfile);
  if (!text.ok()) return text.status();
  files.rankfile = prefix + "rankfile";
  if (Status s = WriteFileAtomically(files.rankfile, text.value()); !s.ok()) return s;
  return files;
}

Result<int> ReadPlanWorldSize(const std::string& path) {
  auto doc = ParseJsonFile(path);
  if (!doc.ok()) return doc.status();
  JsonErrors errors(path);
  CheckedObject root(doc.value(), "", &errors);
  if (!errors.empty()) return errors.status();
  const std::string schema = root.Enum("schema", {kPlanSchema, kRankMapSchema});
  if (!errors.empty()) return errors.status();
  int64_t world = 0;
  if (schema == kPlanSchema) {
    CheckedObject map = root.Object("rank_map");
    if (!errors.empty()) return errors.status();
    world = map.Int("world_size", 1, kMaxWorldSize);
  } else {
    world = root.Int("world_size", 1, kMaxWorldSize);
  }
  if (!errors.empty()) return errors.status();
  return static_cast<int>(world);
}

Result<std::string> FindFoldbench(const char* env_value, const std::string& exe_dir) {
  if (env_value != nullptr && *env_value != '\0') {
    if (IsExecutableFile(env_value)) return std::string(env_value);
    return Status::Error(std::string("FOLDBENCH=") + env_value +
                         " is not an executable file (unset it to use the foldbench next to foldplan)");
  }
  if (exe_dir.empty()) {
    return Status::Error("foldbench not found: $FOLDBENCH is unset and foldplan's own directory "
                         "is unknown (no /proc/self/exe); set FOLDBENCH=/path/to/foldbench");
  }
  const std::string next_to = exe_dir + "/foldbench";
  if (IsExecutableFile(next_to)) return next_to;
  return Status::Error("foldbench not found: looked for " + next_to +
                       " (next to foldplan) and $FOLDBENCH (unset); foldbench is built only when "
                       "CMake finds MPI (install libopenmpi-dev, reconfigure, build the foldbench "
                       "target), or set FOLDBENCH=/path/to/foldbench");
}

std::string DefaultLauncher() {
#ifdef FOLDPLAN_MPIEXEC
  if (IsExecutableFile(FOLDPLAN_MPIEXEC)) return FOLDPLAN_MPIEXEC;
#endif
  return "mpirun";
}

Result<LaunchEnvironment> DetectLaunchEnvironment(const ValidateOptions& options) {
  auto foldbench = FindFoldbench(std::getenv("FOLDBENCH"), ExeDir());
  if (!foldbench.ok()) return foldbench.status();
  LaunchEnvironment env;
  env.foldbench = foldbench.value();
  env.mpirun = options.mpirun.empty() ? DefaultLauncher() : options.mpirun;
  if (auto version = LauncherVersion(env.mpirun)) {
    env.launcher_found = true;
    env.open_mpi = version->find("Open MPI") != std::string::npos ||
                   version->find("OpenRTE") != std::string::npos ||
                   version->find("open-mpi") != std::string::npos;
  }
  env.root = ::geteuid() == 0;
  env.cores = UsableCores();
  return env;
}

Result<std::vector<std::string>> BuildValidateCommand(const ValidateOptions& o,
                                                      const LaunchEnvironment& env,
                                                      const LaunchFiles* files) {
  if (o.plan.empty()) return Status::Error("--plan FILE is required");
  if (o.backend && *o.backend != "mpi" && *o.backend != "nccl") {
    return Status::Error("--backend " + *o.backend + ": expected mpi or nccl");
  }
  if (o.np && *o.np < 1) return Status::Error("--np: expected a positive integer");
  if (o.candidate) {
    if (Status s = CheckCandidateNumber("--candidate", *o.candidate); !s.ok()) return s;
  }

  // Flags after `--` go to foldbench as given, except those validate owns.
  const auto& extra = o.foldbench_args;
  if (!extra.empty() && (extra.front().empty() || extra.front()[0] != '-')) {
    return Status::Error("unexpected argument \"" + extra.front() +
                         "\": foldbench takes only flags (e.g. -- --max-seq 512 --iters 3)");
  }
  if (Contains(extra, {"--plan"})) {
    return Status::Error("--plan after --: give the plan to foldplan validate (--plan FILE), "
                         "which reads its world size");
  }
  struct Owned {
    bool given;
    std::initializer_list<const char*> names;
    const char* shown;
  };
  for (const Owned& f : {Owned{o.backend.has_value(), {"--backend"}, "--backend"},
                         Owned{!o.ops.empty(), {"--ops"}, "--ops"},
                         Owned{!o.output.empty(), {"-o", "--output"}, "-o"}}) {
    if (f.given && Contains(extra, f.names)) {
      return Status::Error(std::string(f.shown) + " is given both to foldplan validate and after --; "
                           "give it once");
    }
  }
  const std::vector<std::string> launcher_args = SplitOnSpaces(o.mpirun_args);
  if (Contains(launcher_args, {"-np", "--np", "-n", "-c"})) {
    return Status::Error("--mpirun-args: give the number of ranks with --np, not in --mpirun-args");
  }

  auto world = ReadPlanWorldSize(o.plan);
  if (!world.ok()) return world.status();
  const int np = o.np.value_or(world.value());
  if (np != world.value()) {
    return Status::Error("--np " + std::to_string(np) + ": " + o.plan + " is for " +
                         std::to_string(world.value()) + " ranks (its world size), and foldbench "
                         "refuses any other; omit --np or give --np " +
                         std::to_string(world.value()));
  }
  if (env.foldbench.empty()) return Status::Error("foldbench not found");
  const std::string mpirun = env.mpirun.empty() ? "mpirun" : env.mpirun;

  std::vector<std::string> cmd = {mpirun};
  if (env.open_mpi && env.root && !Contains(launcher_args, {"--allow-run-as-root", "-allow-run-as-root"})) {
    cmd.push_back("--allow-run-as-root");
  }
  // Named hosts bring their own slot counts: oversubscribing them is the user's call.
  const bool hosts_named = !o.hosts.empty() || NamesHosts(launcher_args);
  if (env.open_mpi && np > env.cores && !hosts_named &&
      !Contains(launcher_args, {"--oversubscribe", "-oversubscribe"})) {
    cmd.push_back("--oversubscribe");
  }
  cmd.insert(cmd.end(), launcher_args.begin(), launcher_args.end());
  if (files && !files->rankfile.empty()) cmd.insert(cmd.end(), {"--rankfile", files->rankfile});
  cmd.insert(cmd.end(), {"-np", std::to_string(np), env.foldbench, "--plan", files ? files->plan : o.plan});
  if (o.backend) cmd.insert(cmd.end(), {"--backend", *o.backend});
  if (!o.ops.empty()) cmd.insert(cmd.end(), {"--ops", o.ops});
  if (!o.output.empty()) cmd.insert(cmd.end(), {"-o", o.output});
  cmd.insert(cmd.end(), extra.begin(), extra.end());
  return cmd;
}

std::string ShellQuote(const std::string& word) {
  // '=' first would be command lookup in zsh.
  const bool plain = !word.empty() && word[0] != '=' && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_-+=:,./@%", c) != nullptr;
  });
  if (plain) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string ShellJoin(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += (i ? " " : "") + ShellQuote(words[i]);
  return out;
}

int RunValidate(const ValidateOptions& options, std::ostream& out, std::ostream& err) {
  auto env = DetectLaunchEnvironment(options);
  if (!env.ok()) {
    // Report a bad plan or bad flags before a missing foldbench.
    LaunchEnvironment stand_in;
    stand_in.foldbench = "foldbench";
    auto cmd = BuildValidateCommand(options, stand_in);
    return Refuse(err, cmd.ok() ? env.status() : cmd.status(), options);
  }
  // Flags and plan first, before any file is written.
  if (auto checked = BuildValidateCommand(options, env.value()); !checked.ok()) {
    return Refuse(err, checked.status(), options);
  }
  // The launch files go beside -o, else into a directory of their own,
  // removed after a run (kept after --dry-run: the printed command names them).
  std::string temp_dir;
  std::string prefix = options.output + ".";
  if (options.output.empty()) {
    char dir[] = "/tmp/foldplan-validate-XXXXXX";
    if (::mkdtemp(dir) == nullptr) {
      return Refuse(err, Status::Error(std::string("cannot create a directory under /tmp: ") + std::strerror(errno)),
                    options);
    }
    temp_dir = dir;
    prefix = temp_dir + "/";
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "localhost");
  auto files = PrepareLaunchFiles(options, prefix, host);
  auto clean = [&] {
    if (temp_dir.empty() || !files.ok()) return;
    for (const std::string& f : {files->rankfile, options.candidate ? files->plan : std::string()}) {
      if (!f.empty()) ::unlink(f.c_str());
    }
    ::rmdir(temp_dir.c_str());
  };
  if (!files.ok()) {
    if (!temp_dir.empty()) ::rmdir(temp_dir.c_str());
    return Refuse(err, files.status(), options);
  }
  err << files->notes;
  auto cmd = BuildValidateCommand(options, env.value(), &files.value());
  if (!cmd.ok()) {
    clean();
    return Refuse(err, cmd.status(), options);
  }
  const std::string line = ShellJoin(cmd.value());
  if (options.dry_run) {
    if (!temp_dir.empty() && (options.candidate || !files->rankfile.empty())) {
      err << "foldplan: the printed command's files are kept in " << temp_dir << "\n";
    } else if (!temp_dir.empty()) {
      ::rmdir(temp_dir.c_str());
    }
    if (!env->launcher_found) {
      err << "foldplan: warning: cannot run " << env->mpirun
          << " --version here, so no Open MPI flags were added\n";
    }
    out << line << "\n";
    return 0;
  }
  err << "running: " << line << "\n";
  out.flush();
  err.flush();
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  auto code = SpawnAndWait(cmd.value(), err);
  clean();
  if (!code.ok()) return Refuse(err, code.status(), options);
  return code.value();
}

}  // namespace foldplan
