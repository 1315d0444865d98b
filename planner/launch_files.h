// Launcher inputs from a placed rank map: the files that start rank r on
// its planned node and GPU (doc/trainers.md "Launchers"). Host i of a host
// list is node i of the cluster. Every launcher numbers the ranks of a node
// in rank order (its local rank: OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID);
// a node's CUDA_VISIBLE_DEVICES lists its ranks' GPUs in that order, so CUDA
// device k of local rank k is its planned GPU and the GPUs no rank holds
// (packed placements leave some) are never visible.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "planner/rank_map.h"

namespace foldplan {

enum class LaunchFormat { kOpenMpiRankfile, kSlurm, kHostfile, kEnv };
inline constexpr const char* kLaunchFormatChoices = "openmpi-rankfile|slurm|hostfile|env";
const char* Name(LaunchFormat format);
std::optional<LaunchFormat> LaunchFormatNamed(std::string_view name);

// Where each rank runs: node and GPU index on that node (PhysicalPlace's).
struct RankSlot {
  int node = 0;
  int local_gpu = 0;
};

// An environment variable every rank must have when the trainer starts.
struct LaunchEnv {
  std::string name;   // "CUDA_DEVICE_MAX_CONNECTIONS"
  std::string value;  // "1"
  std::string why;    // one line, for the files' comments
};

// Megatron-LM asserts CUDA_DEVICE_MAX_CONNECTIONS=1 (arguments.py ~1474-1477,
// read at d98e8a64) on Hopper when tp > 1 or cp > 1, unless Megatron-FSDP or
// the EP overlap (--overlap-moe-expert-parallel-comm) is on (inferred, not
// read: one hardware queue keeps its TP/CP communication kernels ahead of the
// compute they overlap). The one home of that condition: every launcher
// output (through LaunchPlacement::env) and the megatron export ask it. The
// GPU is not asked (the launch files do not know it): the variable is set for
// every GPU, harmless where Megatron does not check it. With FSDP or the EP
// overlap Megatron does not ask for it and it stays unset (those overlaps run
// on several streams; that one queue would slow them is inferred).
bool NeedsOneCudaDeviceConnection(const Layout& layout);
// The variables the layout's trainer needs set (today: the one above, when
// NeedsOneCudaDeviceConnection), in the order the files write them.
std::vector<LaunchEnv> TrainerLaunchEnv(const Layout& layout);

struct LaunchPlacement {
  std::string layout_text;  // for the files' comments
  std::string placement;    // "linear" or "packed"
  std::vector<RankSlot> ranks;  // indexed by rank
  std::vector<LaunchEnv> env;   // set for every rank: the env script exports them, the others say how
};
// The map's placement and TrainerLaunchEnv(map.layout()).
LaunchPlacement LaunchPlacementOf(const RankMap& map);

// True when rank r sits on the cluster's GPU r for every r (what a launcher
// does unasked), given `gpus_per_node`.
bool IsLinearPlacement(const LaunchPlacement& placement, int gpus_per_node);
// Nodes the placement uses: 1 + the largest node index.
int NodesUsed(const LaunchPlacement& placement);

// The largest host list read: one name per node of the largest cluster.
inline constexpr int kMaxHosts = 1 << 20;
inline constexpr size_t kMaxHostNameChars = 253;  // a DNS name's limit

// A host list: one name per line, in node order; blank lines and '#'
// comments (to the end of the line) skipped, spaces around a name ignored.
// A name is letters, digits, '.', '-' and '_' (no ':' or '=', which the
// launchers' files use as separators), not starting with '-'. Errors name
// `file` and the line: a bad name, a name repeated (with its first line), no
// names at all.
Result<std::vector<std::string>> ParseHostList(const std::string& text, const std::string& file);
// ReadTextFile then ParseHostList.
Result<std::vector<std::string>> ReadHostList(const std::string& path);

// One rank as a launcher sees it.
struct RankLaunch {
  std::string host;
  int node = 0;
  int local_rank = 0;  // index among its node's ranks, in rank order
  int local_gpu = 0;
};
// The node's ranks and what it must make visible.
struct NodeLaunch {
  int node = 0;
  std::string host;
  std::vector<int> ranks;           // ascending
  std::vector<int> visible_gpus;    // local GPU of each of `ranks`, in that order
};
struct LaunchAssignment {
  std::vector<RankLaunch> ranks;  // indexed by rank
  std::vector<NodeLaunch> nodes;  // the nodes holding ranks, in node order
};
// Errors: fewer hosts than NodesUsed (naming `hosts_file`, the count, and
// the first node without a host), or two ranks on one GPU.
Result<LaunchAssignment> AssignHosts(const LaunchPlacement& placement, const std::vector<std::string>& hosts,
                                     const std::string& hosts_file);

// The file of `format` (doc/trainers.md "Launchers"). The hostfile format
// refuses a placement whose nodes do not hold consecutive runs of ranks in
// node order (a by-slot mapping could not reproduce it; the rankfile can).
Result<std::string> LaunchFileText(const LaunchAssignment& assignment, const LaunchPlacement& placement,
                                   LaunchFormat format);
// What to run with the file (for stderr, or a comment): the mpirun or srun
// line, with FILE for the file's path, passing `env` (mpirun -x, srun
// --export) besides sourcing the env script.
std::string LaunchHint(const LaunchAssignment& assignment, LaunchFormat format, const std::string& file,
                       const std::vector<LaunchEnv>& env = {});

}  // namespace foldplan
