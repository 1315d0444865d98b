#include "sim/sim_estimate.h"

#include <cstdio>

#include "core/text_table.h"
#include "costmodel/memory.h"
#include "sim/engine.h"
#include "sim/event_queue.h"

namespace foldplan {
namespace {

// Bytes each counted thing holds. A slot: its task (SimTask; a collective's
// members share one, so this is an upper bound there), its member entry,
// the engine's per-task arrays (start, end, critical predecessor, pending
// dependencies, version, successor offset) and the rank's list of its
// tasks; an edge: the graph's pair and the engine's successor entry; a
// pass: its record and its memory timeline point.
constexpr double kSlotBytes = sizeof(SimTask) + 4 + (8 + 8 + 4 + 4 + 4 + 4) + 4;
constexpr double kEdgeBytes = 8 + 4;
constexpr double kPassBytes = sizeof(PassRecord) + 16;
// The trace's text per task: trace.cc reserves 160 bytes for one event.
constexpr double kTraceBytesPerSlot = 160;

}  // namespace

SimEstimate EstimateFromBound(const StepGraphBound& bound, bool whole, long long ranks, long long microbatches,
                              bool trace) {
  SimEstimate e;
  e.whole = whole;
  e.ranks = ranks;
  e.microbatches = microbatches;
  e.task_slots = bound.task_slots;
  e.edges = bound.edges;
  e.passes = bound.passes;
  e.events = bound.task_slots * (1 + 16);
  e.bytes = e.task_slots * kSlotBytes + e.edges * kEdgeBytes + e.passes * kPassBytes +
            (trace ? e.task_slots * kTraceBytesPerSlot : 0);
  return e;
}

std::string EstimateText(const SimEstimate& e) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.1f M task slots (about %.1f GiB; %lld simulated ranks x %lld micro-batches)",
                e.task_slots / 1e6, e.bytes / kBytesPerGiB, e.ranks, e.microbatches);
  return buf;
}

Status CheckSimulationSize(const SimEstimate& e, long long max_task_slots) {
  if (e.task_slots <= double(max_task_slots)) return Status();
  return Status::Error("simulate: this step would need " + EstimateText(e) + ", above the limit of " +
                       WithCommas(static_cast<unsigned long long>(max_task_slots)) +
                       " task slots; raise it with --max-tasks N (at most " +
                       WithCommas(static_cast<unsigned long long>(kMostSimTaskSlots)) + ")" +
                       (e.whole ? ", or simulate fewer ranks (the whole path runs every rank)" : "") +
                       ", or ask for fewer micro-batches (a smaller --global-batch)");
}

}  // namespace foldplan
