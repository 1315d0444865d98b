// The cluster as a graph of GPUs, NVSwitch domains, NICs on rails, leaf and
// spine switches (a Boost.Graph adjacency list, kept in topology.cc), and the
// questions the planner and cost model ask of it: what a set of GPUs spans
// and which link tiers its traffic crosses, each with bandwidth and latency.
//
// Model (rail-optimised fat tree, as on DGX SuperPODs): every GPU has an
// NVLink port into its domain's NVSwitch fabric; NIC k of a node sits on
// rail k (local GPU g uses NIC g % nics_per_node); NIC k of every node in a
// scalable unit (SU) meets the others at the SU's leaf switch k; leaves meet
// at the spine. Traffic between two nodes of one SU crosses a single leaf
// (NCCL's PXN moves it onto the destination's rail over NVLink first), and
// traffic between SUs crosses the spine.
#pragma once

#include <algorithm>
#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "inputs/cluster.h"

namespace foldplan {

enum class LinkTier { kNvlink, kNetwork, kSpine };
const char* Name(LinkTier tier);  // "nvlink", "network", "spine"

struct TierInfo {
  LinkTier tier;
  double gb_per_s = 0;   // per GPU, per direction, 10^9 bytes/s, on the path's bottleneck link
  double latency_us = 0; // one-way, end to end along that tier's path
  int hops = 0;          // switch hops on the path
  bool operator==(const TierInfo&) const = default;
};

// The tiers a span's traffic uses, fastest first: at most one of each
// LinkTier, so they are held in place. A span is copied with every group
// placement a search keeps (planner/group_placement.h), and copying it must
// not allocate. A vector's interface, as far as spans use one.
class SpanTiers {
 public:
  static constexpr size_t kCapacity = 3;  // nvlink, network, spine

  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  const TierInfo& operator[](size_t i) const { return items_[i]; }
  TierInfo& operator[](size_t i) { return items_[i]; }
  const TierInfo* begin() const { return items_.data(); }
  const TierInfo* end() const { return items_.data() + count_; }
  TierInfo* begin() { return items_.data(); }
  TierInfo* end() { return items_.data() + count_; }
  const TierInfo& back() const { return items_[count_ - 1]; }
  void reserve(size_t) {}  // the capacity is fixed
  void push_back(const TierInfo& tier) {
    assert(count_ < kCapacity && "a span has one tier of each kind at most");
    if (count_ < kCapacity) items_[count_++] = tier;
  }
  void clear() { count_ = 0; }
  // The tiers held, not the slots past them.
  bool operator==(const SpanTiers& o) const { return std::equal(begin(), end(), o.begin(), o.end()); }

 private:
  std::array<TierInfo, kCapacity> items_{};
  uint8_t count_ = 0;
};

// What a set of GPUs spans.
struct GroupSpan {
  int gpus = 0;
  int nodes = 0;
  int domains = 0;                // NVLink domains touched
  int rails = 0;                  // distinct rails (NICs by local index) touched
  int scalable_units = 0;
  int min_per_domain = 0;         // GPUs of the set in its emptiest touched domain
  int max_per_domain = 0;
  bool inside_one_domain = false; // all traffic can stay on NVLink
  bool crosses_spine = false;
  // Tiers the group's all-to-all traffic uses, fastest first: nvlink when two
  // members share a domain, network when members sit in different domains,
  // spine when they sit in different scalable units.
  SpanTiers tiers;
  bool operator==(const GroupSpan&) const = default;
};

class Topology {
 public:
  static Result<Topology> Build(const ClusterSpec& cluster);
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;
  ~Topology();

  const ClusterSpec& cluster() const;
  int gpus() const;
  int node_of(int gpu) const;
  int domain_of(int gpu) const;
  int rail_of(int gpu) const;
  int su_of(int gpu) const;

  // GPU indices must be in [0, gpus()); duplicates are ignored.
  GroupSpan Span(std::span<const int> gpus) const;
  // Bottleneck of the path between two GPUs, found on the graph.
  TierInfo PathBetween(int gpu_a, int gpu_b) const;
  // What Span reports as tier `tier` when it picks (gpu_a, gpu_b) as that
  // tier's representative pair: the path of the pair's route class, found
  // once at Build (no graph search). The GPUs must be distinct and in range;
  // TierInfo{tier} (no bandwidth) for a class the cluster has no pair of.
  TierInfo TierBetween(int gpu_a, int gpu_b, LinkTier tier) const;

  // Counts of graph elements for summaries.
  struct Counts {
    int gpus = 0, nvswitch_domains = 0, nics = 0, leaf_switches = 0, spine_switches = 0;
    int vertices = 0, edges = 0;
  };
  Counts counts() const;

 private:
  struct Impl;
  explicit Topology(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Text summary for `foldplan topo`, and the same as JSON (schema
// foldplan.topology/v1) for --json.
std::string TopologySummaryText(const Topology& topo);
std::string TopologySummaryJson(const Topology& topo);

}  // namespace foldplan
