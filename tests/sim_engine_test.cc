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
