// Flow-level bandwidth sharing: concurrent transfers that cross the same
// resources (a GPU's NIC, a rail, a leaf uplink, the spine, an NVLink port)
// share them max-min fairly, recomputed whenever a flow starts or ends. The
// engine keeps each flow's remaining bytes itself and asks for the rates
// after every change; this class knows no bytes, only rates.
//
// Units: capacities, caps, rates and loads in bytes per second.
//
// Max-min fairness with rate caps: an allocation of rates is max-min fair
// when no flow's rate can be raised without lowering the rate of a flow
// that is no faster. Equivalently (the bottleneck property) every flow
// either runs at its cap, or crosses a saturated resource on which no other
// flow is faster. A cap is the rate the transfer achieves alone (an
// algorithm's effective bandwidth below the line rate); +infinity means no
// cap, and a flow with an empty route is limited only by its cap.
//
// Progressive filling: every unfrozen flow's rate is one common level,
// raised from 0. The next event is the lowest of (a) the smallest cap of an
// unfrozen flow: that flow freezes at its cap, and (b) the lowest level
// (capacity - rates of its frozen flows) / (its unfrozen flows) of a
// resource: the resource saturates and every unfrozen flow on it freezes at
// that level. Repeat until every flow is frozen. Implemented with the caps
// sorted once and the resources with unfrozen flows in an indexed heap
// keyed by (level, id), each resource's entry moved in place when a freeze
// changes its level.
//
// Numerics and determinism: a resource whose level is within
// kEqualShareRelTolerance (relative) of the current level, or below it by
// rounding, saturates at the current level, so that shares that are equal
// in exact arithmetic come out bit for bit equal (0.3 / 3 and 0.1 freeze
// together). Ties are broken by the lower id (caps by flow id, levels by
// resource id) and rates are summed in a fixed order, so the same calls in
// the same order give the same rates bit for bit.
//
// Complexity of one recomputation, with F active flows, R resources and S
// the sum of the route lengths: O(R + S) to gather the flows of each
// resource, O(F log F) to sort the caps, O(S log R) for the heap (one
// update per resource per event that froze a flow over it).
// Rate() and Load() recompute lazily, once after any number of Add/Remove.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace foldplan {

class FlowNetwork {
 public:
  using ResourceId = uint32_t;
  using FlowId = uint32_t;

  // Why 1e-10: far above the rounding of a level (a sum of up to ~10^4
  // rates, ~1e-12 relative), far below any difference that shows in a
  // duration rounded to nanoseconds.
  static constexpr double kEqualShareRelTolerance = 1e-10;

  // capacity_bytes_per_s > 0 and finite. Ids are 0, 1, 2, ... in order.
  ResourceId AddResource(double capacity_bytes_per_s);

  // A flow over `resources` (each an existing id, at most once; may be
  // empty, then the cap must be finite), never faster than
  // `cap_bytes_per_s` (> 0; +infinity for none). Returns its id: the most
  // recently removed id if any, else the next new one.
  FlowId AddFlow(const std::vector<ResourceId>& resources, double cap_bytes_per_s);
  // `flow` must be active; its id may be reused by the next AddFlow.
  void RemoveFlow(FlowId flow);

  // The max-min fair rate of the active flow `flow` (see the top).
  double Rate(FlowId flow);
  size_t active_flows() const { return active_flows_; }
  // Bytes per second `resource` carries at the current rates: the sum of the
  // rates of the active flows over it (<= its capacity up to rounding).
  double Load(ResourceId resource);

 private:
  struct Flow {
    std::vector<ResourceId> route;
    double cap_bytes_per_s = 0;
    bool active = false;
  };
  void Recompute();
  void Freeze(FlowId flow, double rate_bytes_per_s);
  void UpdateTouchedLevels();
  // The indexed heap of resources: the lowest (level, id) at heap_[0].
  bool Before(ResourceId a, ResourceId b) const;
  void Place(size_t index, ResourceId r);
  void SiftUp(size_t index);
  void SiftDown(size_t index);
  void RemoveFromHeap(ResourceId r);

  std::vector<double> capacity_bytes_per_s_;  // by resource
  std::vector<Flow> flows_;                   // by flow id; inactive slots await reuse
  std::vector<FlowId> free_ids_;              // removed ids, the last removed at the back
  size_t active_flows_ = 0;
  bool stale_ = false;  // flows changed since the last Recompute

  // Results of the last Recompute.
  std::vector<double> rate_bytes_per_s_;  // by flow id
  std::vector<double> load_bytes_per_s_;  // by resource; also the frozen sum while filling

  // Recompute's working state, kept between calls to reuse the memory.
  std::vector<uint32_t> first_member_;  // by resource, R + 1: its flows in members_
  std::vector<FlowId> members_;         // the flows of each resource, by flow id
  std::vector<uint32_t> unfrozen_;      // by resource: flows over it not yet frozen
  std::vector<double> level_bytes_per_s_;  // by resource: where it saturates, while in the heap
  std::vector<uint32_t> heap_index_;       // by resource: its place in heap_, or kNotInHeap
  std::vector<uint8_t> touched_;        // by resource: in touched_list_
  std::vector<ResourceId> touched_list_;
  std::vector<uint8_t> frozen_;  // by flow id
  std::vector<FlowId> by_cap_;   // active flows with a finite cap, by (cap, id)
  std::vector<ResourceId> heap_;
};

}  // namespace foldplan
