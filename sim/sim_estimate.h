// The size of a simulation, estimated from what was asked before any of it
// is built, and the limit above which a run is refused rather than started.
// The work grows with simulated ranks (pp on the fast path, the world on
// the whole path: --whole, --imbalance) x micro-batches x tasks per
// micro-batch; the estimate counts those from the step graph's own chains
// (BoundStepGraph), so it bounds what the run builds: its task slots (a
// task once per member), dependencies, passes and the engine's events.
// doc/simulator.md "How big a simulation may be" derives the figures.
#pragma once

#include <string>

#include "core/status.h"
#include "sim/step_graph.h"

namespace foldplan {

// The default limit on task slots. Measured on this project's machine, a
// run holds about 130 bytes per slot at its peak (8.77 M slots: 1.07 GiB
// peak RSS, 16 s; doc/simulator.md), so 2^24 slots stay near 2 GiB and half
// a minute, while every shipped example, the README's and the benchmark's
// largest (DeepSeek-V3 on 1,024 GPUs, every rank, 6.5 M tasks) fit.
inline constexpr long long kDefaultMaxSimTaskSlots = 1LL << 24;
// The most a user may raise it to (--max-tasks): task ids are 32-bit.
inline constexpr long long kMostSimTaskSlots = 1LL << 31;

struct SimEstimate {
  bool whole = false;           // every rank simulated
  long long ranks = 0;          // simulated ranks
  long long microbatches = 0;
  double task_slots = 0;        // bounds tasks and their members
  double edges = 0;             // dependencies, stream order included
  double passes = 0;            // passes x lanes (PassRecords, memory timeline points)
  // Events the engine may process: a task's end, plus re-timings when
  // running kernels change (at most 16 per slot: sim/engine.h).
  double events = 0;
  // The bytes of what the counts above hold at their final sizes: about
  // the heap the run holds at its peak (HeapBoundBytes bounds it).
  double bytes = 0;
};

// A bound on the heap a run holds at its peak, above what it held before:
// its structures are vectors, and one that doubles its capacity holds its
// old buffer beside the new one, twice the size (3 x bytes at worst); the
// part that does not grow with the run (the evaluation, the order's shape,
// the engine's fixed state) stays under 1 MiB. fuzz/sim_size_fuzz.cc
// checks it with ASan's allocator hooks.
inline constexpr double kSimHeapGrowthFactor = 3;
inline constexpr double kSimFixedHeapBytes = 1 << 20;
inline double HeapBoundBytes(const SimEstimate& e) { return kSimHeapGrowthFactor * e.bytes + kSimFixedHeapBytes; }

// What BoundStepGraph found, in the figures above; `trace`: the trace's
// text of every task too.
SimEstimate EstimateFromBound(const StepGraphBound& bound, bool whole, long long ranks, long long microbatches,
                              bool trace);

// Error when `estimate` exceeds `max_task_slots`: the estimate, the limit
// and the flag that raises it.
Status CheckSimulationSize(const SimEstimate& estimate, long long max_task_slots);

// "16.8 M task slots (about 2.1 GiB)".
std::string EstimateText(const SimEstimate& estimate);

}  // namespace foldplan
