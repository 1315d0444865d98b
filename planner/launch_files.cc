#include "planner/launch_files.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "core/atomic_file.h"
#include "core/quoted_text.h"

namespace foldplan {
namespace {

std::string Str(long long v) { return std::to_string(v); }

std::string Join(const std::vector<int>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + Str(values[i]);
  return out;
}

// "0-5" for a consecutive run, else the list.
std::string RanksText(const std::vector<int>& ranks) {
  if (ranks.empty()) return "none";
  if (ranks.back() - ranks.front() + 1 == static_cast<int>(ranks.size())) {
    return ranks.size() == 1 ? Str(ranks.front()) : Str(ranks.front()) + "-" + Str(ranks.back());
  }
  return Join(ranks);
}

bool HostChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

std::string Trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// The per-node CUDA_VISIBLE_DEVICES lines every format's comment carries.
std::string NodeComments(const LaunchAssignment& a) {
  std::string out;
  for (const NodeLaunch& n : a.nodes) {
    out += "# node " + Str(n.node) + " " + n.host + ": ranks " + RanksText(n.ranks) +
           ", CUDA_VISIBLE_DEVICES=" + Join(n.visible_gpus) + "\n";
  }
  return out;
}

// The one CUDA_VISIBLE_DEVICES every node shares, or "" when they differ.
std::string SharedVisible(const LaunchAssignment& a) {
  for (const NodeLaunch& n : a.nodes) {
    if (n.visible_gpus != a.nodes.front().visible_gpus) return "";
  }
  return a.nodes.empty() ? "" : Join(a.nodes.front().visible_gpus);
}

std::string Header(const char* what, const LaunchAssignment& a, const LaunchPlacement& p) {
  return std::string("# ") + what + " from foldplan: layout " + p.layout_text + ", placement " + p.placement +
         ", " + Str(a.ranks.size()) + " ranks on " + Str(a.nodes.size()) + " nodes\n";
}

// " -x NAME=VALUE" per variable (mpirun passes them to every rank).
std::string MpirunEnvFlags(const std::vector<LaunchEnv>& env) {
  std::string out;
  for (const LaunchEnv& e : env) out += " -x " + e.name + "=" + e.value;
  return out;
}

// A comment line per variable the trainer needs: what and why.
std::string EnvComments(const std::vector<LaunchEnv>& env, const std::string& how) {
  std::string out;
  for (const LaunchEnv& e : env) out += "# " + e.name + "=" + e.value + " for every rank" + how + ": " + e.why + "\n";
  return out;
}

// How a rank reaches its GPU once the launcher has put it on its host.
std::string GpuComment(const LaunchAssignment& a, const char* local_rank_var) {
  std::string out = std::string("# GPU: a rank is local rank K on its node (") + local_rank_var +
                    ", ranks in rank order); with the node's CUDA_VISIBLE_DEVICES below (and\n"
                    "# CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi's numbering), CUDA device K is its planned GPU.\n"
                    "# `foldplan ranks --format env` writes a script that sets both per rank.\n";
  const std::string shared = SharedVisible(a);
  if (!shared.empty()) {
    out += "# Every node shows the same GPUs: -x CUDA_DEVICE_ORDER=PCI_BUS_ID -x CUDA_VISIBLE_DEVICES=" + shared +
           " does it too.\n";
  }
  return out + NodeComments(a);
}

std::string RankfileText(const LaunchAssignment& a, const LaunchPlacement& p) {
  std::string out = Header("Open MPI rankfile", a, p);
  out += "# mpirun --rankfile THIS_FILE -np " + Str(a.ranks.size()) + MpirunEnvFlags(p.env) +
         " ...; slot=K binds the rank to CPU core K of its host, K its local rank\n"
         "# (foldplan knows no CPU or NUMA layout: edit the slots to follow nvidia-smi topo -m if it matters).\n"
         "# Open MPI 5 deprecates --rankfile: there, mpirun --map-by rankfile:file=THIS_FILE does the same.\n";
  out += EnvComments(p.env, " (mpirun -x, or the env script)");
  out += GpuComment(a, "OMPI_COMM_WORLD_LOCAL_RANK");
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    out += "rank " + Str(r) + "=" + a.ranks[r].host + " slot=" + Str(a.ranks[r].local_rank) + "\n";
  }
  return out;
}

Result<std::string> HostfileText(const LaunchAssignment& a, const LaunchPlacement& p) {
  // By-slot mapping gives host i the next slots=N ranks: it reproduces the
  // placement only when each node holds the next consecutive run.
  int next = 0;
  for (const NodeLaunch& n : a.nodes) {
    for (int rank : n.ranks) {
      if (rank != next) {
        return Status::Error("a hostfile cannot express this placement: node " + Str(n.node) + " (" + n.host +
                             ") holds ranks " + RanksText(n.ranks) + ", not the next " + Str(n.ranks.size()) +
                             " from rank " + Str(next) + "; use --format openmpi-rankfile or slurm");
      }
      ++next;
    }
  }
  std::string out = Header("MPI hostfile (Open MPI syntax)", a, p);
  out += "# mpirun --hostfile THIS_FILE --map-by slot -np " + Str(a.ranks.size()) + MpirunEnvFlags(p.env) +
         " ...: each host takes the next slots=N ranks, in order.\n";
  out += EnvComments(p.env, " (mpirun -x, or the env script)");
  out += GpuComment(a, "OMPI_COMM_WORLD_LOCAL_RANK");
  for (const NodeLaunch& n : a.nodes) out += n.host + " slots=" + Str(n.ranks.size()) + "\n";
  return out;
}

// SLURM_HOSTFILE holds host names only: the srun line goes to LaunchHint.
std::string SlurmText(const LaunchAssignment& a) {
  std::string out;
  for (const RankLaunch& r : a.ranks) out += r.host + "\n";
  return out;
}

std::string EnvText(const LaunchAssignment& a, const LaunchPlacement& p) {
  std::string out = Header("Launch environment (POSIX sh)", a, p);
  out += "# Source it in every rank before the trainer starts, e.g.\n"
         "#   mpirun ... sh -c '. ./THIS_FILE && exec python train.py'\n"
         "# It reads the rank from OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK or RANK and exports\n"
         "# CUDA_DEVICE_ORDER=PCI_BUS_ID, CUDA_VISIBLE_DEVICES (its node's planned GPUs, in local-rank\n"
         "# order) and LOCAL_RANK (its index there): CUDA device $LOCAL_RANK is its planned GPU.\n"
         "# FOLDPLAN_HOST names the host the rank was planned on.\n";
  out += NodeComments(a);
  // The trainer's variables first: the same for every rank.
  for (const LaunchEnv& e : p.env) {
    out += "# " + e.name + "=" + e.value + ": " + e.why + "\nexport " + e.name + "=" + e.value + "\n";
  }
  out += "foldplan_rank=${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-${PMI_RANK:-${RANK:-}}}}\n";
  out += "case \"$foldplan_rank\" in\n";
  std::map<int, std::string> visible;  // node -> its CUDA_VISIBLE_DEVICES
  for (const NodeLaunch& n : a.nodes) visible[n.node] = Join(n.visible_gpus);
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    const RankLaunch& k = a.ranks[r];
    out += "  " + Str(r) + ") FOLDPLAN_HOST=" + k.host + " LOCAL_RANK=" + Str(k.local_rank) +
           " CUDA_VISIBLE_DEVICES=" + visible[k.node] + " ;;\n";
  }
  out += "  *) echo \"foldplan env: rank '$foldplan_rank' is not one of the plan's 0-" + Str(a.ranks.size() - 1) +
         "\" >&2; return 1 2>/dev/null || exit 1 ;;\n";
  out += "esac\nexport CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES LOCAL_RANK FOLDPLAN_HOST\n";
  return out;
}

}  // namespace

const char* Name(LaunchFormat format) {
  switch (format) {
    case LaunchFormat::kOpenMpiRankfile: return "openmpi-rankfile";
    case LaunchFormat::kSlurm: return "slurm";
    case LaunchFormat::kHostfile: return "hostfile";
    case LaunchFormat::kEnv: return "env";
  }
  return "?";
}

std::optional<LaunchFormat> LaunchFormatNamed(std::string_view name) {
  for (LaunchFormat f : {LaunchFormat::kOpenMpiRankfile, LaunchFormat::kSlurm, LaunchFormat::kHostfile,
                         LaunchFormat::kEnv}) {
    if (name == Name(f)) return f;
  }
  return std::nullopt;
}

bool NeedsOneCudaDeviceConnection(const Layout& l) {
  return (l.tp > 1 || l.cp > 1) && !l.fsdp && !l.a2a_overlap;
}

std::vector<LaunchEnv> TrainerLaunchEnv(const Layout& l) {
  std::vector<LaunchEnv> env;
  if (NeedsOneCudaDeviceConnection(l)) {
    env.push_back({"CUDA_DEVICE_MAX_CONNECTIONS", "1",
                   "Megatron-LM asserts it on Hopper when tp > 1 or cp > 1, without Megatron-FSDP or the EP overlap "
                   "(arguments.py, d98e8a64)"});
  }
  return env;
}

LaunchPlacement LaunchPlacementOf(const RankMap& map) {
  LaunchPlacement p;
  p.layout_text = FormatLayout(map.layout());
  p.placement = Name(map.layout().placement);
  p.env = TrainerLaunchEnv(map.layout());
  p.ranks.reserve(map.world());
  for (int r = 0; r < map.world(); ++r) p.ranks.push_back({map.place(r).node, map.place(r).local_gpu});
  return p;
}

bool IsLinearPlacement(const LaunchPlacement& placement, int gpus_per_node) {
  for (size_t r = 0; r < placement.ranks.size(); ++r) {
    const RankSlot& s = placement.ranks[r];
    if (static_cast<long long>(s.node) * gpus_per_node + s.local_gpu != static_cast<long long>(r)) return false;
  }
  return true;
}

int NodesUsed(const LaunchPlacement& placement) {
  int nodes = 0;
  for (const RankSlot& s : placement.ranks) nodes = std::max(nodes, s.node + 1);
  return nodes;
}

Result<std::vector<std::string>> ParseHostList(const std::string& text, const std::string& file) {
  std::vector<std::string> hosts;
  std::map<std::string, int> first_line;
  size_t start = 0;
  for (int line = 1; start < text.size(); ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string name = text.substr(start, end - start);
    start = end + 1;
    if (const auto hash = name.find('#'); hash != std::string::npos) name.resize(hash);
    name = Trim(name);
    if (name.empty()) continue;
    const std::string where = file + ":" + Str(line) + ": ";
    if (name.size() > kMaxHostNameChars || name[0] == '-' || !std::all_of(name.begin(), name.end(), HostChar)) {
      return Status::Error(where + Quoted(name) + ": expected one host name per line (letters, digits, "
                           "'.', '-' and '_', not starting with '-', at most " + Str(kMaxHostNameChars) +
                           " characters)");
    }
    if (const auto seen = first_line.find(name); seen != first_line.end()) {
      return Status::Error(where + "host " + name + " repeats line " + Str(seen->second) +
                           " (one line per node, in node order)");
    }
    if (static_cast<int>(hosts.size()) >= kMaxHosts) {
      return Status::Error(where + "more than " + Str(kMaxHosts) + " hosts");
    }
    first_line.emplace(name, line);
    hosts.push_back(name);
  }
  if (hosts.empty()) return Status::Error(file + ": no host names (one per line, in node order)");
  return hosts;
}

Result<std::vector<std::string>> ReadHostList(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseHostList(text.value(), path);
}

Result<LaunchAssignment> AssignHosts(const LaunchPlacement& placement, const std::vector<std::string>& hosts,
                                     const std::string& hosts_file) {
  const int nodes = NodesUsed(placement);
  if (static_cast<int>(hosts.size()) < nodes) {
    return Status::Error(hosts_file + ": " + Str(hosts.size()) + " hosts, but the placement uses " + Str(nodes) +
                         " nodes; node " + Str(hosts.size()) + " has no host (one host per line, in node order)");
  }
  LaunchAssignment a;
  std::map<int, NodeLaunch> by_node;
  std::map<std::pair<int, int>, int> holder;  // (node, local GPU) -> rank
  for (size_t r = 0; r < placement.ranks.size(); ++r) {
    const RankSlot& s = placement.ranks[r];
    if (const auto [it, fresh] = holder.emplace(std::make_pair(s.node, s.local_gpu), static_cast<int>(r)); !fresh) {
      return Status::Error("ranks " + Str(it->second) + " and " + Str(r) + " are both placed on node " +
                           Str(s.node) + " GPU " + Str(s.local_gpu));
    }
    NodeLaunch& n = by_node[s.node];
    n.node = s.node;
    n.host = hosts[s.node];
    a.ranks.push_back({hosts[s.node], s.node, static_cast<int>(n.ranks.size()), s.local_gpu});
    n.ranks.push_back(static_cast<int>(r));
    n.visible_gpus.push_back(s.local_gpu);
  }
  for (auto& entry : by_node) a.nodes.push_back(std::move(entry.second));
  return a;
}

Result<std::string> LaunchFileText(const LaunchAssignment& assignment, const LaunchPlacement& placement,
                                   LaunchFormat format) {
  switch (format) {
    case LaunchFormat::kOpenMpiRankfile: return RankfileText(assignment, placement);
    case LaunchFormat::kSlurm: return SlurmText(assignment);
    case LaunchFormat::kHostfile: return HostfileText(assignment, placement);
    case LaunchFormat::kEnv: return EnvText(assignment, placement);
  }
  return Status::Error("unknown launch format");
}

std::string LaunchHint(const LaunchAssignment& assignment, LaunchFormat format, const std::string& file,
                       const std::vector<LaunchEnv>& env) {
  const std::string np = Str(assignment.ranks.size());
  const std::string x = MpirunEnvFlags(env);
  std::string srun_export;  // --export=ALL,NAME=VALUE,...: the caller's environment plus the trainer's
  for (const LaunchEnv& e : env) srun_export += (srun_export.empty() ? " --export=ALL," : ",") + e.name + "=" + e.value;
  switch (format) {
    case LaunchFormat::kOpenMpiRankfile:
      return "mpirun --rankfile " + file + " -np " + np + x + " sh -c '. ./launch-env.sh && exec TRAINER'";
    case LaunchFormat::kSlurm:
      return "SLURM_HOSTFILE=" + file + " srun --distribution=arbitrary" + srun_export + " -n " + np +
             " sh -c '. ./launch-env.sh && exec TRAINER' (SLURM_LOCALID numbers a node's tasks in task order; "
             "launch-env.sh from --format env)";
    case LaunchFormat::kHostfile:
      return "mpirun --hostfile " + file + " --map-by slot -np " + np + x +
             " sh -c '. ./launch-env.sh && exec TRAINER'";
    case LaunchFormat::kEnv:
      return "mpirun ... sh -c '. " + file + " && exec TRAINER' (or under srun)";
  }
  return "";
}

}  // namespace foldplan
