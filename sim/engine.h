// The event loop: plays a TaskGraph out in integer nanoseconds. A task
// starts at the first instant its dependencies and stream predecessors have
// all ended; it ends when its work is done. Work runs at full rate, except:
//   - compute on a rank while communication kernels holding SMs run there:
//     at (N - n) / N, n the most SMs any of them holds;
//   - communication, when the graph has link rates: each member's NVLink
//     bytes, NIC bytes that stay in its scalable unit, and NIC bytes that
//     leave it (through its share of the leaf's uplinks too) are flows,
//     each capped at the rate it reaches alone (its bytes over its work_ns,
//     at most its links' rate); the flows on one link share it max-min
//     fairly (sim/flow_network.h);
//     a task ends when its slowest member's flows are done, for all members.
//     Alone, or with the links not full, a task takes its work_ns exactly.
// Rates are recomputed whenever a task starts or ends. Ties are broken by
// the order events were pushed, so a run is deterministic. Every task also
// records the dependency that released it last (its critical predecessor),
// from which the critical path is read.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "sim/task_graph.h"

namespace foldplan {

struct EngineRun {
  std::vector<SimNs> start_ns, end_ns;  // per task
  // The task whose end released this one (UINT32_MAX: none, it started at 0).
  std::vector<uint32_t> critical_pred;
  SimNs makespan_ns = 0;
  uint64_t events = 0;  // events processed (for the benchmark's rate)
  uint64_t peak_queued = 0;  // the most events queued at once (the queue's memory)
  uint64_t slowed_by_links = 0;  // communication tasks that ended later than their work_ns
  // With link rates: the bytes each rank's links carried, ranks x 3 (its
  // NVLink port, its NIC, its uplink share): the rates integrated over
  // time, which must come to the bytes the tasks sent (a conservation test).
  std::vector<double> link_bytes;
};

// Error when some task never starts (a dependency cycle: a bug in the graph
// builder, reported rather than hung on).
// `progress`, when set, is called every 2^16 events with the share of
// tasks ended.
Result<EngineRun> RunTaskGraph(const TaskGraph& graph, const std::function<void(double)>& progress = {});

}  // namespace foldplan
