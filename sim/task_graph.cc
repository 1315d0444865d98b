#include "sim/task_graph.h"

#include <cassert>
#include <limits>

namespace foldplan {
namespace {
constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
}  // namespace

// The streams are named after the kinds of work they carry (the same order).
const char* Name(SimStream stream) { return Name(static_cast<SimKind>(stream)); }

const char* Name(SimKind kind) {
  switch (kind) {
    case SimKind::kCompute: return "compute";
    case SimKind::kTp: return "tp";
    case SimKind::kCp: return "cp";
    case SimKind::kEp: return "ep";
    case SimKind::kDp: return "dp";
    case SimKind::kPp: return "pp";
    case SimKind::kHost: return "host";
  }
  return "?";
}

const char* Name(SimPass pass) {
  switch (pass) {
    case SimPass::kForward: return "F";
    case SimPass::kBackward: return "B";
    case SimPass::kWeightGrad: return "W";
    case SimPass::kStep: return "step";
  }
  return "?";
}

TaskGraph::TaskGraph(int ranks, int gpu_sms)
    : ranks_(ranks), gpu_sms_(gpu_sms), last_on_stream_(static_cast<size_t>(ranks) * kSimStreamCount, kNone) {
  labels_.push_back("");
}

uint32_t TaskGraph::Add(const SimTask& task, std::initializer_list<int32_t> members) {
  return Push(task, members.begin(), members.size());
}
uint32_t TaskGraph::Add(const SimTask& task, const std::vector<int32_t>& members) {
  return Push(task, members.data(), members.size());
}

uint32_t TaskGraph::Push(const SimTask& task, const int32_t* members, size_t count) {
  assert(count > 0 && tasks_.size() < kNone);
  const uint32_t id = static_cast<uint32_t>(tasks_.size());
  SimTask& t = tasks_.emplace_back(task);
  t.first_member = static_cast<uint32_t>(members_.size());
  t.member_count = static_cast<uint32_t>(count);
  for (size_t i = 0; i < count; ++i) {
    const int32_t r = members[i];
    assert(r >= 0 && r < ranks_);
    members_.push_back(r);
    uint32_t& last = last_on_stream_[static_cast<size_t>(r) * kSimStreamCount + static_cast<size_t>(task.stream)];
    if (last != kNone) edges_.emplace_back(last, id);
    last = id;
  }
  return id;
}

void TaskGraph::Depend(uint32_t task, uint32_t before) {
  assert(before < tasks_.size() && task < tasks_.size() && before != task);
  edges_.emplace_back(before, task);
}

uint32_t TaskGraph::Label(const std::string& name) {
  for (size_t i = 0; i < labels_.size(); ++i) {
    if (labels_[i] == name) return static_cast<uint32_t>(i);
  }
  labels_.push_back(name);
  return static_cast<uint32_t>(labels_.size() - 1);
}

}  // namespace foldplan
