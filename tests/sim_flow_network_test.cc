// Max-min fair bandwidth sharing with rate caps (sim/flow_network.h). Each
// test states the progressive-filling arithmetic first, then checks the
// numbers. Units: bytes per second; GB/s = 10^9 bytes/s.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "sim/flow_network.h"

namespace foldplan {
namespace {

using ResourceId = FlowNetwork::ResourceId;
using FlowId = FlowNetwork::FlowId;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kGBps = 1e9;

TEST_CASE("flow network: one flow alone gets min(cap, capacity)") {
  // One resource of C = 100 and one flow of cap c: the level rises to
  // min(c, C); below C the cap binds, at or above C the resource does. A flow
  // with no route is limited by its cap alone.
  FlowNetwork net;
  const ResourceId link = net.AddResource(100);
  for (const double cap : {40.0, 100.0, 250.0, kInf}) {
    CAPTURE(cap);
    const FlowId f = net.AddFlow({link}, cap);
    CHECK(net.Rate(f) == std::min(cap, 100.0));
    CHECK(net.Load(link) == std::min(cap, 100.0));
    net.RemoveFlow(f);
  }
  const FlowId alone = net.AddFlow({}, 7);
  CHECK(net.Rate(alone) == 7);
  CHECK(net.Load(link) == 0);
  CHECK(net.active_flows() == 1);
}

TEST_CASE("flow network: n equal flows on one resource of capacity C get C/n each") {
  // n uncapped flows: the level C/n saturates the resource; all freeze
  // there, bit for bit the one quotient C/n.
  constexpr double kC = 50 * kGBps;
  for (int n = 1; n <= 9; ++n) {
    CAPTURE(n);
    FlowNetwork net;
    const ResourceId nic = net.AddResource(kC);
    std::vector<FlowId> flows;
    for (int i = 0; i < n; ++i) flows.push_back(net.AddFlow({nic}, kInf));
    for (FlowId f : flows) CHECK(net.Rate(f) == kC / n);
    CHECK(net.Load(nic) == doctest::Approx(kC).epsilon(1e-15));
  }
}

TEST_CASE("flow network: a capped flow frees bandwidth for the others") {
  // C = 100, caps 10, inf, inf: the resource's level is 100/3 = 33.3, so the
  // cap 10 comes first and that flow freezes at 10; the resource then has
  // 100 - 10 = 90 for 2 flows: 45 each, and it is saturated (10 + 45 + 45).
  FlowNetwork net;
  const ResourceId link = net.AddResource(100);
  const FlowId capped = net.AddFlow({link}, 10);
  const FlowId a = net.AddFlow({link}, kInf);
  const FlowId b = net.AddFlow({link}, kInf);
  CHECK(net.Rate(capped) == 10);
  CHECK(net.Rate(a) == 45);
  CHECK(net.Rate(b) == 45);
  CHECK(net.Load(link) == 100);
}

// The classic two-link example: link 1 (capacity 1) carries A and B, link 2
// (capacity 2) carries A and C.
struct TwoLinks {
  FlowNetwork net;
  ResourceId link1 = net.AddResource(1);
  ResourceId link2 = net.AddResource(2);
  FlowId a = net.AddFlow({link1, link2}, kInf);
  FlowId b = net.AddFlow({link1}, kInf);
  FlowId c = net.AddFlow({link2}, kInf);
};

TEST_CASE("flow network: the two-link example") {
  // Levels: link 1 at 1/2, link 2 at 2/2 = 1; link 1 saturates first and A
  // and B freeze at 0.5. Link 2 then has 2 - 0.5 = 1.5 for C alone.
  TwoLinks two;
  CHECK(two.net.Rate(two.a) == 0.5);
  CHECK(two.net.Rate(two.b) == 0.5);
  CHECK(two.net.Rate(two.c) == 1.5);
  CHECK(two.net.Load(two.link1) == 1);
  CHECK(two.net.Load(two.link2) == 2);
}

TEST_CASE("flow network: a NIC shared by an all-to-all and a pipeline send") {
  // GPU 0's NIC sends at 50 GB/s. Its all-to-all sends to 3 peers on other
  // nodes, one flow each over [nic0, peer's NIC], capped at 40 GB/s (the
  // algorithm's bandwidth alone); a pipeline send to the next stage goes
  // over [nic0, next stage's NIC], capped at 45 GB/s. Four flows on nic0:
  // level 50/4 = 12.5 GB/s, below every cap and below every receiving NIC's
  // level (50/1), so nic0 saturates and all four run at 12.5 GB/s.
  // When the all-to-all ends the send is alone: min(45, 50) = 45 GB/s, the
  // cap binding, and nic0 carries 45 of its 50.
  FlowNetwork net;
  const ResourceId nic0 = net.AddResource(50 * kGBps);
  std::vector<FlowId> all_to_all;
  for (int peer = 0; peer < 3; ++peer) {
    const ResourceId peer_nic = net.AddResource(50 * kGBps);
    all_to_all.push_back(net.AddFlow({nic0, peer_nic}, 40 * kGBps));
  }
  const ResourceId next_stage_nic = net.AddResource(50 * kGBps);
  const FlowId send = net.AddFlow({nic0, next_stage_nic}, 45 * kGBps);

  for (FlowId f : all_to_all) CHECK(net.Rate(f) == 12.5 * kGBps);
  CHECK(net.Rate(send) == 12.5 * kGBps);
  CHECK(net.Load(nic0) == 50 * kGBps);
  CHECK(net.Load(next_stage_nic) == 12.5 * kGBps);

  for (FlowId f : all_to_all) net.RemoveFlow(f);
  CHECK(net.Rate(send) == 45 * kGBps);
  CHECK(net.Load(nic0) == 45 * kGBps);
  CHECK(net.active_flows() == 1);
}

TEST_CASE("flow network: a leaf uplink shared by flows from several NICs") {
  // Three NICs of 50 GB/s under one leaf. NIC 0 and NIC 1 each send two
  // flows off the leaf (over [nic, uplink]); NIC 2 sends one off the leaf
  // and one to a GPU under the same leaf (over [nic2] only).
  // Uplink 100 GB/s (2:1 oversubscribed): levels NICs 50/2 = 25, uplink
  // 100/5 = 20; the uplink saturates first and its five flows freeze at 20.
  // NIC 2 then has 50 - 20 = 30 for its local flow. NICs 0 and 1 carry 40 of
  // their 50: the uplink, not the NIC, is their bottleneck.
  // Uplink 200 GB/s: the uplink's level 200/5 = 40 is above the NICs' 25,
  // so the NICs saturate first (lowest id first; the same level) and every
  // flow runs at 25; the uplink carries 5 x 25 = 125 of its 200.
  for (const double uplink_gbps : {100.0, 200.0}) {
    CAPTURE(uplink_gbps);
    FlowNetwork net;
    const ResourceId nic0 = net.AddResource(50 * kGBps);
    const ResourceId nic1 = net.AddResource(50 * kGBps);
    const ResourceId nic2 = net.AddResource(50 * kGBps);
    const ResourceId uplink = net.AddResource(uplink_gbps * kGBps);
    std::vector<FlowId> off_leaf;
    for (ResourceId nic : {nic0, nic0, nic1, nic1, nic2}) off_leaf.push_back(net.AddFlow({nic, uplink}, kInf));
    const FlowId local = net.AddFlow({nic2}, kInf);

    const bool oversubscribed = uplink_gbps == 100;
    for (FlowId f : off_leaf) CHECK(net.Rate(f) == (oversubscribed ? 20 : 25) * kGBps);
    CHECK(net.Rate(local) == (oversubscribed ? 30 : 25) * kGBps);
    CHECK(net.Load(nic0) == (oversubscribed ? 40 : 50) * kGBps);
    CHECK(net.Load(nic1) == (oversubscribed ? 40 : 50) * kGBps);
    CHECK(net.Load(nic2) == 50 * kGBps);
    CHECK(net.Load(uplink) == (oversubscribed ? 100 : 125) * kGBps);
  }
}

TEST_CASE("flow network: shares equal in exact arithmetic freeze together, bit for bit") {
  // Two disjoint resources: 0.3 shared by 3 flows and 0.1 carrying 1. Both
  // shares are 0.1 exactly, but in doubles 0.3 / 3 is one ulp below 0.1;
  // the resource at 0.1 is within the relative tolerance of the level 0.3 / 3
  // just reached, so it saturates there and all four rates are one number.
  REQUIRE(0.3 / 3 != 0.1);
  FlowNetwork net;
  const ResourceId shared = net.AddResource(0.3);
  const ResourceId single = net.AddResource(0.1);
  std::vector<FlowId> flows;
  for (int i = 0; i < 3; ++i) flows.push_back(net.AddFlow({shared}, kInf));
  flows.push_back(net.AddFlow({single}, kInf));
  for (FlowId f : flows) CHECK(net.Rate(f) == 0.3 / 3);
  CHECK(net.Load(single) <= 0.1);
}

TEST_CASE("flow network: remove restores the previous rates; ids are reused") {
  // The two-link example (A = B = 0.5, C = 1.5), then D over link 1 too:
  // link 1's level 1/3 is below link 2's 2/2, so A = B = D = 1/3 and C gets
  // 2 - 1/3. Removing D gives back exactly the three-flow rates, and D's id
  // goes to the next flow; with A and B removed (in that order) the next two
  // flows get B's id, then A's (the most recently removed first).
  TwoLinks two;
  FlowNetwork& net = two.net;
  const FlowId a = two.a, b = two.b, c = two.c;
  const std::vector<double> before = {net.Rate(a), net.Rate(b), net.Rate(c)};

  const FlowId d = net.AddFlow({two.link1}, kInf);
  CHECK(d == 3);
  CHECK(net.Rate(a) == 1.0 / 3);
  CHECK(net.Rate(b) == 1.0 / 3);
  CHECK(net.Rate(d) == 1.0 / 3);
  CHECK(net.Rate(c) == 2 - 1.0 / 3);

  net.RemoveFlow(d);
  CHECK(net.active_flows() == 3);
  CHECK(net.Rate(a) == before[0]);
  CHECK(net.Rate(b) == before[1]);
  CHECK(net.Rate(c) == before[2]);
  CHECK(net.AddFlow({two.link2}, kInf) == d);

  net.RemoveFlow(a);
  net.RemoveFlow(b);
  CHECK(net.AddFlow({two.link1}, kInf) == b);
  CHECK(net.AddFlow({two.link1}, kInf) == a);
  CHECK(net.AddFlow({two.link1}, kInf) == 4);
  CHECK(net.active_flows() == 5);
}

// What the test remembers of each flow, to check the network's rates.
struct FlowRecord {
  std::vector<ResourceId> route;
  double cap_bytes_per_s = 0;
  bool active = false;
};

// Max-min fairness by its bottleneck property, within 1e-9 relative: every
// resource carries at most its capacity; every flow runs in (0, cap], and a
// flow below its cap crosses a saturated resource on which no flow is faster.
void CheckMaxMinFair(FlowNetwork& net, const std::vector<double>& capacity,
                     const std::vector<FlowRecord>& flows) {
  constexpr double kRel = 1e-9;
  std::vector<double> fastest(capacity.size(), 0);
  for (FlowId f = 0; f < flows.size(); ++f) {
    if (!flows[f].active) continue;
    for (ResourceId r : flows[f].route) fastest[r] = std::max(fastest[r], net.Rate(f));
  }
  int over_capacity = 0, cap_broken = 0, no_bottleneck = 0;
  for (ResourceId r = 0; r < capacity.size(); ++r)
    if (net.Load(r) > capacity[r] * (1 + kRel)) ++over_capacity;
  for (FlowId f = 0; f < flows.size(); ++f) {
    if (!flows[f].active) continue;
    const double rate = net.Rate(f);
    if (!(rate > 0) || rate > flows[f].cap_bytes_per_s) ++cap_broken;
    if (rate >= flows[f].cap_bytes_per_s * (1 - kRel)) continue;  // at its cap
    bool bottlenecked = false;
    for (ResourceId r : flows[f].route)
      bottlenecked |= net.Load(r) >= capacity[r] * (1 - kRel) && rate >= fastest[r] * (1 - kRel);
    if (!bottlenecked) ++no_bottleneck;
  }
  CHECK(over_capacity == 0);
  CHECK(cap_broken == 0);
  CHECK(no_bottleneck == 0);
}

TEST_CASE("flow network: conservation and the bottleneck property on a random instance") {
  // 200 resources of 10..400 GB/s; 1000 flows over 0..6 distinct resources,
  // a third capped at 1..100 GB/s (every routeless flow capped). Checked:
  // the bottleneck property (CheckMaxMinFair), then again after removing
  // about half the flows and adding 300 (which take the removed ids), and a
  // second network built by the same calls gives the same rates bit for bit.
  std::mt19937_64 rng(20250611);
  std::uniform_real_distribution<double> capacity_gbps(10, 400), cap_gbps(1, 100);
  std::uniform_int_distribution<int> route_length(0, 6);
  std::uniform_int_distribution<ResourceId> resource(0, 199);

  FlowNetwork net, twin;
  std::vector<double> capacity;
  for (int r = 0; r < 200; ++r) {
    capacity.push_back(capacity_gbps(rng) * kGBps);
    CHECK(net.AddResource(capacity.back()) == ResourceId(r));
    twin.AddResource(capacity.back());
  }
  std::vector<FlowRecord> flows;
  auto add_flow = [&]() {
    FlowRecord record;
    const int length = route_length(rng);
    while (record.route.size() < size_t(length)) {
      const ResourceId r = resource(rng);
      if (std::find(record.route.begin(), record.route.end(), r) == record.route.end())
        record.route.push_back(r);
    }
    const bool capped = record.route.empty() || rng() % 3 == 0;
    record.cap_bytes_per_s = capped ? cap_gbps(rng) * kGBps : kInf;
    record.active = true;
    const FlowId id = net.AddFlow(record.route, record.cap_bytes_per_s);
    CHECK(twin.AddFlow(record.route, record.cap_bytes_per_s) == id);
    if (id >= flows.size()) flows.resize(id + 1);
    flows[id] = record;
    return id;
  };
  for (int i = 0; i < 1000; ++i) CHECK(add_flow() == FlowId(i));
  CHECK(net.active_flows() == 1000);
  CheckMaxMinFair(net, capacity, flows);

  int removed = 0;
  for (FlowId f = 0; f < 1000; ++f) {
    if (rng() % 2) continue;
    net.RemoveFlow(f);
    twin.RemoveFlow(f);
    flows[f].active = false;
    ++removed;
  }
  REQUIRE(removed >= 300);
  CHECK(net.active_flows() == size_t(1000 - removed));
  CheckMaxMinFair(net, capacity, flows);

  for (int i = 0; i < 300; ++i) CHECK(add_flow() < 1000);  // removed ids, reused
  CHECK(net.active_flows() == size_t(1300 - removed));
  CheckMaxMinFair(net, capacity, flows);

  int differ = 0;
  for (FlowId f = 0; f < flows.size(); ++f)
    if (flows[f].active && net.Rate(f) != twin.Rate(f)) ++differ;
  for (ResourceId r = 0; r < 200; ++r)
    if (net.Load(r) != twin.Load(r)) ++differ;
  CHECK(differ == 0);
}

}  // namespace
}  // namespace foldplan
