// One simulated step as a graph of tasks. A task is a piece of work on one
// or more simulated ranks (its members): a compute kernel on one rank, a
// collective on every member of its group, a pipeline send on its sender.
// It runs on one stream of each member (compute, or a communication stream
// per kind), and starts when
//   - every task it depends on has ended (data: a layer's input, a
//     micro-batch's activation from the previous stage), and
//   - on each member, the task before it on the same stream has ended
//     (streams run their tasks in the order they were added);
// a collective therefore starts when its last member reaches it, and ends
// for all of them together. What a task's time counts as (compute, or
// communication of a kind) is its `kind`, apart from the stream it occupies:
// a communication op that is not overlapped runs on the compute stream and
// blocks it, which is what "exposed" means.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "sim/sim_time.h"

namespace foldplan {

// One per SimKind, in the same order (a kind's own stream: StreamOfKind).
// The host stream is the rank's CPU thread: it issues the launches of the
// other streams' tasks (sim/step_graph.h).
enum class SimStream : uint8_t { kCompute, kTp, kCp, kEp, kDp, kPp, kHost };
inline constexpr int kSimStreamCount = 7;
const char* Name(SimStream stream);  // "compute", "tp", "cp", "ep", "dp", "pp", "host"

// What a task's time is: compute, communication of a parallelism, or the
// host's (launching, or the GPU waiting on a host sync).
enum class SimKind : uint8_t { kCompute, kTp, kCp, kEp, kDp, kPp, kHost };
inline constexpr int kSimKindCount = 7;
const char* Name(SimKind kind);  // "compute", "tp", "cp", "ep", "dp", "pp", "host"
inline SimStream StreamOfKind(SimKind kind) { return static_cast<SimStream>(kind); }

// The pass a task belongs to, for labels and memory.
enum class SimPass : uint8_t { kForward, kBackward, kWeightGrad, kStep };
const char* Name(SimPass pass);  // "F", "B", "W", "step"

struct SimTask {
  SimNs work_ns = 0;         // duration on the whole GPU
  SimKind kind = SimKind::kCompute;
  SimStream stream = SimStream::kCompute;
  // Compute beside a communication kernel that holds n of the GPU's N SMs
  // runs at (N - n) / N (DeepEP / HybridEP, as costmodel/schedule.h states).
  uint16_t sms = 0;          // SMs this communication kernel holds while it runs
  SimPass pass = SimPass::kStep;
  int32_t microbatch = -1;   // -1: not of a micro-batch
  int32_t layer = -1;        // decoder layer (0-based); -1: none
  int16_t chunk = -1;        // model chunk on its rank; -1: none
  uint32_t label = 0;        // TaskGraph::label(label): op or block name
  // Communication: what each member sends through its NVLink port and its
  // NIC while it runs (costmodel/collective.h RankTrafficOf). With the
  // graph's link rates set, concurrent tasks share those links (sim/engine.h).
  float nvlink_bytes = 0;
  float network_bytes = 0;
  float spine_bytes = 0;  // of network_bytes, those that leave the scalable unit
  // Set by TaskGraph::Add.
  uint32_t first_member = 0;
  uint32_t member_count = 0;
};

class TaskGraph {
 public:
  TaskGraph(int ranks, int gpu_sms);

  // Adds a task on `members` (simulated ranks, at least one); it follows the
  // last task added on the same stream of each member. Returns its index.
  uint32_t Add(const SimTask& task, std::initializer_list<int32_t> members);
  uint32_t Add(const SimTask& task, const std::vector<int32_t>& members);
  // `task` starts only after `before` has ended.
  void Depend(uint32_t task, uint32_t before);
  // A label index for `name` (the same index for the same name).
  uint32_t Label(const std::string& name);

  // Per simulated rank: its NVLink port's and its NIC share's achieved
  // bytes per second, shared by the communication running on it; 0 (the
  // default): every task takes its work_ns whatever runs beside it.
  // The third, its share of its leaf's uplinks (its NIC share over the
  // spine oversubscription: every GPU of a unit sends alike), carries the
  // bytes that leave the unit, which pass its NIC too.
  void SetLinkRates(double nvlink_bytes_per_s, double nic_bytes_per_s, double spine_bytes_per_s = 0) {
    nvlink_bytes_per_s_ = nvlink_bytes_per_s;
    nic_bytes_per_s_ = nic_bytes_per_s;
    spine_bytes_per_s_ = spine_bytes_per_s;
  }
  double nvlink_bytes_per_s() const { return nvlink_bytes_per_s_; }
  double nic_bytes_per_s() const { return nic_bytes_per_s_; }
  double spine_bytes_per_s() const { return spine_bytes_per_s_; }

  int ranks() const { return ranks_; }
  int gpu_sms() const { return gpu_sms_; }
  size_t size() const { return tasks_.size(); }
  const SimTask& task(uint32_t i) const { return tasks_[i]; }
  const int32_t* members(uint32_t i) const { return &members_[tasks_[i].first_member]; }
  const std::string& label(uint32_t i) const { return labels_[i]; }
  // Edges (before, task), stream order included, in the order added.
  const std::vector<std::pair<uint32_t, uint32_t>>& edges() const { return edges_; }
  uint64_t edge_count() const { return edges_.size(); }

 private:
  uint32_t Push(const SimTask& task, const int32_t* members, size_t count);

  int ranks_;
  int gpu_sms_;
  double nvlink_bytes_per_s_ = 0, nic_bytes_per_s_ = 0, spine_bytes_per_s_ = 0;
  std::vector<SimTask> tasks_;
  std::vector<int32_t> members_;
  std::vector<std::pair<uint32_t, uint32_t>> edges_;
  std::vector<uint32_t> last_on_stream_;  // ranks x kSimStreamCount; UINT32_MAX: none yet
  std::vector<std::string> labels_;
};

}  // namespace foldplan
