#include "sim/flow_network.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace foldplan {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr uint32_t kNotInHeap = std::numeric_limits<uint32_t>::max();

}  // namespace

FlowNetwork::ResourceId FlowNetwork::AddResource(double capacity_bytes_per_s) {
  assert(capacity_bytes_per_s > 0 && std::isfinite(capacity_bytes_per_s));
  capacity_bytes_per_s_.push_back(capacity_bytes_per_s);
  load_bytes_per_s_.push_back(0);
  return static_cast<ResourceId>(capacity_bytes_per_s_.size() - 1);
}

FlowNetwork::FlowId FlowNetwork::AddFlow(const std::vector<ResourceId>& resources,
                                         double cap_bytes_per_s) {
  assert(cap_bytes_per_s > 0);                           // also refuses NaN
  assert(!resources.empty() || std::isfinite(cap_bytes_per_s));  // else its rate is unbounded
#ifndef NDEBUG
  for (size_t i = 0; i < resources.size(); ++i) {
    assert(resources[i] < capacity_bytes_per_s_.size());
    for (size_t j = 0; j < i; ++j) assert(resources[j] != resources[i]);  // each at most once
  }
#endif
  FlowId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
    rate_bytes_per_s_.push_back(0);
  }
  Flow& flow = flows_[id];
  flow.route.assign(resources.begin(), resources.end());
  flow.cap_bytes_per_s = cap_bytes_per_s;
  flow.active = true;
  ++active_flows_;
  stale_ = true;
  return id;
}

void FlowNetwork::RemoveFlow(FlowId flow) {
  assert(flow < flows_.size() && flows_[flow].active);
  flows_[flow].active = false;
  flows_[flow].route.clear();
  rate_bytes_per_s_[flow] = 0;
  free_ids_.push_back(flow);
  --active_flows_;
  stale_ = true;
}

double FlowNetwork::Rate(FlowId flow) {
  assert(flow < flows_.size() && flows_[flow].active);
  if (stale_) Recompute();
  return rate_bytes_per_s_[flow];
}

double FlowNetwork::Load(ResourceId resource) {
  assert(resource < capacity_bytes_per_s_.size());
  if (stale_) Recompute();
  return load_bytes_per_s_[resource];
}

void FlowNetwork::Freeze(FlowId flow, double rate_bytes_per_s) {
  frozen_[flow] = 1;
  rate_bytes_per_s_[flow] = rate_bytes_per_s;
  for (ResourceId r : flows_[flow].route) {
    load_bytes_per_s_[r] += rate_bytes_per_s;
    --unfrozen_[r];
    if (!touched_[r]) {
      touched_[r] = 1;
      touched_list_.push_back(r);
    }
  }
}

bool FlowNetwork::Before(ResourceId a, ResourceId b) const {
  const double la = level_bytes_per_s_[a], lb = level_bytes_per_s_[b];
  return la != lb ? la < lb : a < b;  // ties to the lower id
}

void FlowNetwork::Place(size_t index, ResourceId r) {
  heap_[index] = r;
  heap_index_[r] = static_cast<uint32_t>(index);
}

void FlowNetwork::SiftUp(size_t index) {
  const ResourceId r = heap_[index];
  while (index > 0) {
    const size_t parent = (index - 1) / 2;
    if (!Before(r, heap_[parent])) break;
    Place(index, heap_[parent]);
    index = parent;
  }
  Place(index, r);
}

void FlowNetwork::SiftDown(size_t index) {
  const ResourceId r = heap_[index];
  for (;;) {
    size_t child = 2 * index + 1;
    if (child >= heap_.size()) break;
    if (child + 1 < heap_.size() && Before(heap_[child + 1], heap_[child])) ++child;
    if (!Before(heap_[child], r)) break;
    Place(index, heap_[child]);
    index = child;
  }
  Place(index, r);
}

void FlowNetwork::RemoveFromHeap(ResourceId r) {
  const size_t index = heap_index_[r];
  heap_index_[r] = kNotInHeap;
  const ResourceId last = heap_.back();
  heap_.pop_back();
  if (last == r) return;
  Place(index, last);
  SiftUp(index);
  SiftDown(heap_index_[last]);
}

// The levels of the resources whose flows froze in the last event, updated
// once per event (not once per frozen flow). A level rises as its flows
// freeze, but rounding may lower it by an ulp: the entry moves either way.
void FlowNetwork::UpdateTouchedLevels() {
  for (ResourceId r : touched_list_) {
    touched_[r] = 0;
    if (heap_index_[r] == kNotInHeap) continue;
    if (unfrozen_[r] == 0) {  // drained: never saturates again
      RemoveFromHeap(r);
      continue;
    }
    level_bytes_per_s_[r] = (capacity_bytes_per_s_[r] - load_bytes_per_s_[r]) / unfrozen_[r];
    SiftUp(heap_index_[r]);
    SiftDown(heap_index_[r]);
  }
  touched_list_.clear();
}

void FlowNetwork::Recompute() {
  stale_ = false;
  const size_t num_resources = capacity_bytes_per_s_.size();
  const size_t num_slots = flows_.size();

  // The flows of each resource, in flow-id order (a counting sort).
  first_member_.assign(num_resources + 1, 0);
  for (const Flow& flow : flows_)
    for (ResourceId r : flow.route) ++first_member_[r + 1];  // inactive routes are empty
  for (size_t r = 0; r < num_resources; ++r) first_member_[r + 1] += first_member_[r];
  members_.resize(first_member_[num_resources]);
  unfrozen_.assign(num_resources, 0);  // the fill position first, then the count
  for (FlowId f = 0; f < num_slots; ++f)
    for (ResourceId r : flows_[f].route) members_[first_member_[r] + unfrozen_[r]++] = f;

  load_bytes_per_s_.assign(num_resources, 0.0);
  touched_.assign(num_resources, 0);
  touched_list_.clear();
  frozen_.assign(num_slots, 0);

  by_cap_.clear();
  for (FlowId f = 0; f < num_slots; ++f)
    if (flows_[f].active && std::isfinite(flows_[f].cap_bytes_per_s)) by_cap_.push_back(f);
  std::sort(by_cap_.begin(), by_cap_.end(), [this](FlowId a, FlowId b) {
    const double ca = flows_[a].cap_bytes_per_s, cb = flows_[b].cap_bytes_per_s;
    return ca != cb ? ca < cb : a < b;
  });

  level_bytes_per_s_.resize(num_resources);
  heap_index_.assign(num_resources, kNotInHeap);
  heap_.clear();
  for (ResourceId r = 0; r < num_resources; ++r) {
    if (unfrozen_[r] == 0) continue;
    level_bytes_per_s_[r] = capacity_bytes_per_s_[r] / unfrozen_[r];
    heap_.push_back(r);
  }
  for (size_t i = 0; i < heap_.size(); ++i) heap_index_[heap_[i]] = static_cast<uint32_t>(i);
  for (size_t i = heap_.size() / 2; i-- > 0;) SiftDown(i);  // heapify, O(R)

  double level = 0;  // the common rate of the unfrozen flows; only rises
  size_t next_cap = 0;
  for (;;) {
    while (next_cap < by_cap_.size() && frozen_[by_cap_[next_cap]]) ++next_cap;
    const bool caps_left = next_cap < by_cap_.size();
    if (!caps_left && heap_.empty()) break;
    const double cap = caps_left ? flows_[by_cap_[next_cap]].cap_bytes_per_s : kInf;
    if (heap_.empty() || cap <= level_bytes_per_s_[heap_[0]]) {
      // A cap comes first (ties too: a flow alone at its cap gets exactly
      // its cap). Every cap left is above every level passed so far.
      level = cap;
      Freeze(by_cap_[next_cap], cap);
    } else {
      const ResourceId r = heap_[0];
      if (level_bytes_per_s_[r] > level * (1 + kEqualShareRelTolerance))
        level = level_bytes_per_s_[r];  // else equal to the current level, or below by rounding
      for (uint32_t i = first_member_[r]; i < first_member_[r + 1]; ++i)
        if (!frozen_[members_[i]]) Freeze(members_[i], level);  // r is then drained, off the heap
    }
    UpdateTouchedLevels();
  }
}

}  // namespace foldplan
