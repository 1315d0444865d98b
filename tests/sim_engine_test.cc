// The event loop (sim/engine.h) on small graphs whose timeline follows by
// hand.
#include <doctest/doctest.h>

#include "sim/engine.h"

using namespace foldplan;

namespace {

SimTask Compute(SimNs ns) {
  SimTask t;
  t.work_ns = ns;
  return t;
}
SimTask Comm(SimNs ns, SimStream stream, uint16_t sms = 0) {
  SimTask t;
  t.work_ns = ns;
  t.kind = SimKind::kEp;
  t.stream = stream;
  t.sms = sms;
  return t;
}

}  // namespace

TEST_CASE("a stream runs its tasks in order; another stream runs beside it") {
  // Rank 0: compute 10 then compute 20 on the compute stream, and a 15 ns
  // transfer on the EP stream from 0: the computes end at 10 and 30, the
  // transfer at 15.
  TaskGraph g(1, 100);
  const uint32_t a = g.Add(Compute(10), {0});
  const uint32_t b = g.Add(Compute(20), {0});
  const uint32_t c = g.Add(Comm(15, SimStream::kEp), {0});
  auto run = RunTaskGraph(g);
  REQUIRE(run.ok());
  CHECK(run->end_ns[a] == 10);
  CHECK(run->start_ns[b] == 10);
  CHECK(run->end_ns[b] == 30);
  CHECK(run->start_ns[c] == 0);
  CHECK(run->end_ns[c] == 15);
  CHECK(run->makespan_ns == 30);
}

TEST_CASE("a collective starts when its last member reaches it and ends for all together") {
  // Rank 0 computes 10 ns, rank 1 30 ns, then a 5 ns collective on both:
  // it starts at 30 and ends at 35 on both; what follows on rank 0 starts at 35.
  TaskGraph g(2, 100);
  g.Add(Compute(10), {0});
  g.Add(Compute(30), {1});
  const uint32_t coll = g.Add(Comm(5, SimStream::kCompute), {0, 1});
  const uint32_t after = g.Add(Compute(1), {0});
  auto run = RunTaskGraph(g);
  REQUIRE(run.ok());
  CHECK(run->start_ns[coll] == 30);
  CHECK(run->end_ns[coll] == 35);
  CHECK(run->start_ns[after] == 35);
  // It waited for rank 1's compute, so that is its critical predecessor.
  CHECK(run->critical_pred[coll] == 1);
}

TEST_CASE("compute beside an SM-holding kernel runs at (N - n) / N") {
  // N = 100 SMs; a 100 ns compute from 0 beside a 50 ns kernel holding 50
  // SMs: half rate for 50 ns does 25 ns of work, the 75 ns left run at
  // full rate: the compute ends at 125.
  TaskGraph g(1, 100);
  const uint32_t c = g.Add(Compute(100), {0});
  g.Add(Comm(50, SimStream::kEp, 50), {0});
  auto run = RunTaskGraph(g);
  REQUIRE(run.ok());
  CHECK(run->end_ns[c] == 125);
  // Two kernels holding 20 and 50 SMs at once slow it by the larger: a
  // 60 ns compute beside both for 40 ns runs 20 ns of work, then 40 more.
  TaskGraph h(1, 100);
  const uint32_t d = h.Add(Compute(60), {0});
  h.Add(Comm(40, SimStream::kEp, 50), {0});
  h.Add(Comm(40, SimStream::kTp, 20), {0});
  auto run2 = RunTaskGraph(h);
  REQUIRE(run2.ok());
  CHECK(run2->end_ns[d] == 80);
}

TEST_CASE("dependencies across ranks hold, and a cycle is an error, not a hang") {
  // Rank 1's task waits for rank 0's 7 ns task.
  TaskGraph g(2, 100);
  const uint32_t a = g.Add(Compute(7), {0});
  const uint32_t b = g.Add(Compute(3), {1});
  g.Depend(b, a);
  auto run = RunTaskGraph(g);
  REQUIRE(run.ok());
  CHECK(run->start_ns[b] == 7);
  CHECK(run->end_ns[b] == 10);
  // b waits for a and a for b.
  g.Depend(a, b);
  auto cyclic = RunTaskGraph(g);
  REQUIRE_FALSE(cyclic.ok());
  CHECK(cyclic.status().message().find("cycle") != std::string::npos);
}

TEST_CASE("same-time events keep the order they were pushed: two runs give the same timeline") {
  TaskGraph g(3, 132);
  for (int i = 0; i < 200; ++i) {
    const uint32_t t = g.Add(Compute(1 + i % 7), {i % 3});
    if (i >= 3) g.Depend(t, static_cast<uint32_t>(i - 3 + (i % 2)));
    g.Add(Comm(2 + i % 5, SimStream::kEp, static_cast<uint16_t>(i % 40)), {i % 3});
  }
  auto r1 = RunTaskGraph(g), r2 = RunTaskGraph(g);
  REQUIRE(r1.ok());
  REQUIRE(r2.ok());
  CHECK(r1->start_ns == r2->start_ns);
  CHECK(r1->end_ns == r2->end_ns);
  CHECK(r1->critical_pred == r2->critical_pred);
}

namespace {

// A communication task sending `share` of a 1e9 B/s NIC alone for `ns`:
// share x 1e9 B/s x ns bytes through the NIC.
SimTask NicTask(SimNs ns, double share, SimStream stream) {
  SimTask t = Comm(ns, stream);
  t.network_bytes = static_cast<float>(share * 1e9 * double(ns) * 1e-9);
  return t;
}

}  // namespace

TEST_CASE("tasks that fit on a link together take their own time") {
  // Two transfers each needing 40% of the NIC: 80% together, so neither is
  // slowed; both end at 1000 ns.
  TaskGraph g(1, 100);
  g.SetLinkRates(1e9, 1e9);
  const uint32_t a = g.Add(NicTask(1000, 0.4, SimStream::kEp), {0});
  const uint32_t b = g.Add(NicTask(1000, 0.4, SimStream::kDp), {0});
  auto run = RunTaskGraph(g);
  REQUIRE(run.ok());
  CHECK(run->end_ns[a] == 1000);
  CHECK(run->end_ns[b] == 1000);
  CHECK(run->slowed_by_links == 0);
}

TEST_CASE("tasks that overfill a link share it max-min fairly") {
  // Two transfers each needing 60% of the NIC (caps 0.6 C): 120% > C, so
  // each gets C / 2, 5/6 of its solo rate: 1000 ns of solo work take 1200.
  TaskGraph g(1, 100);
  g.SetLinkRates(1e9, 1e9);
  const uint32_t a = g.Add(NicTask(1000, 0.6, SimStream::kEp), {0});
  const uint32_t b = g.Add(NicTask(1000, 0.6, SimStream::kDp), {0});
  auto run = RunTaskGraph(g);
  REQUIRE(run.ok());
  CHECK(run->end_ns[a] == 1200);
  CHECK(run->end_ns[b] == 1200);
  CHECK(run->slowed_by_links == 2);
  // Without link rates each takes its own 1000 ns.
  TaskGraph h(1, 100);
  h.Add(NicTask(1000, 0.6, SimStream::kEp), {0});
  h.Add(NicTask(1000, 0.6, SimStream::kDp), {0});
  auto free = RunTaskGraph(h);
  REQUIRE(free.ok());
  CHECK(free->makespan_ns == 1000);
}

TEST_CASE("a transfer that starts later shares the link from then on") {
  // A (60%, 1000 ns) runs alone from 0 to 500: 500 ns of its work done.
  // B (60%, 1000 ns) starts at 500 after a 500 ns compute; both at 5/6:
  // A's 500 ns left take 600, A ends at 1100, by when B has done
  // 600 x 5/6 = 500; B's other 500 run alone at full rate: B ends at 1600.
  TaskGraph g(1, 100);
  g.SetLinkRates(1e9, 1e9);
  const uint32_t a = g.Add(NicTask(1000, 0.6, SimStream::kEp), {0});
  g.Add(Compute(500), {0});
  const uint32_t b = g.Add(NicTask(1000, 0.6, SimStream::kCompute), {0});
  auto run = RunTaskGraph(g);
  REQUIRE(run.ok());
  CHECK(run->start_ns[b] == 500);
  CHECK(run->end_ns[a] == 1100);
  CHECK(run->end_ns[b] == 1600);
}

TEST_CASE("a collective ends when its slowest member's link is done, for every member") {
  // Ranks 0 and 1 run a collective needing 60% of each NIC for 1000 ns;
  // rank 0 also runs another 60% transfer then. Rank 0's flows get 5/6 of
  // their rate, rank 1's their full rate: the collective ends at 1200 on
  // both, when rank 0's share is through.
  TaskGraph g(2, 100);
  g.SetLinkRates(1e9, 1e9);
  const uint32_t coll = g.Add(NicTask(1000, 0.6, SimStream::kEp), {0, 1});
  const uint32_t other = g.Add(NicTask(1000, 0.6, SimStream::kDp), {0});
  const uint32_t after = g.Add(Compute(1), {1});
  g.Depend(after, coll);
  auto run = RunTaskGraph(g);
  REQUIRE(run.ok());
  CHECK(run->end_ns[coll] == 1200);
  CHECK(run->end_ns[other] == 1200);
  CHECK(run->start_ns[after] == 1200);
}

TEST_CASE("bytes are conserved: each rank's links carry what its tasks sent") {
  // Rates integrated over time must come to the bytes each task sent
  // through each link (a transfer whose bytes exceed its link's rate over
  // its time is capped at the link's rate: sent = min(bytes, rate x time)),
  // however the tasks overlap: a seeded jumble of transfers on 3 ranks.
  TaskGraph g(3, 100);
  g.SetLinkRates(2e9, 1e9);
  std::vector<double> sent(9, 0.0);
  uint64_t state = 11;
  for (int i = 0; i < 300; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const int rank = static_cast<int>((state >> 33) % 3);
    const SimNs ns = 100 + static_cast<SimNs>((state >> 20) % 900);
    const double share = 0.1 + double((state >> 40) % 80) / 100;  // of each link alone
    SimTask t = Comm(ns, static_cast<SimStream>(1 + (state >> 50) % 5));
    t.nvlink_bytes = static_cast<float>(share * 2e9 * double(ns) * 1e-9);
    t.network_bytes = static_cast<float>(share * 1e9 * double(ns) * 1e-9);
    if (i % 7 == 0) g.Add(Compute(static_cast<SimNs>((state >> 10) % 500)), {rank});
    g.Add(t, {rank});
    sent[size_t(rank) * 3] += t.nvlink_bytes;
    sent[size_t(rank) * 3 + 1] += t.network_bytes;
  }
  auto run = RunTaskGraph(g);
  REQUIRE(run.ok());
  CHECK(run->slowed_by_links > 0);
  for (size_t i = 0; i < sent.size(); ++i) {
    CAPTURE(i);
    CHECK(run->link_bytes[i] == doctest::Approx(sent[i]).epsilon(1e-6));
  }
}

TEST_CASE("bytes that leave the unit share the leaf's uplinks, and the NIC too") {
  // NIC 1e9 B/s, the GPU's uplink share 0.25e9 (oversubscription 4). Two
  // transfers each sending 20% of the NIC's rate alone, all of it across
  // the spine: 0.4e9 > 0.25e9, so each gets 0.125e9, 5/8 of its rate:
  // 1000 ns take 1600. Kept inside the unit they fit on the NIC: 1000.
  for (bool across : {true, false}) {
    CAPTURE(across);
    TaskGraph g(1, 100);
    g.SetLinkRates(1e9, 1e9, 0.25e9);
    SimTask t = NicTask(1000, 0.2, SimStream::kEp);
    if (across) t.spine_bytes = t.network_bytes;
    const uint32_t a = g.Add(t, {0});
    t.stream = SimStream::kDp;
    const uint32_t b = g.Add(t, {0});
    auto run = RunTaskGraph(g);
    REQUIRE(run.ok());
    CHECK(run->end_ns[a] == (across ? 1600 : 1000));
    CHECK(run->end_ns[b] == (across ? 1600 : 1000));
    // Conservation: the NIC carried both, the uplink share what crossed.
    CHECK(run->link_bytes[1] == doctest::Approx(2 * 200.0));
    CHECK(run->link_bytes[2] == doctest::Approx(across ? 400.0 : 0.0));
  }
}
