// A simulated step as a Perfetto-readable trace: Chrome trace-event JSON
// (the "JSON Object Format"), one process per simulated rank ("pipeline
// rank p"), one thread per stream (compute, tp, cp, ep, dp, pp), a complete
// ("X") event per task named "<pass> mb<m> L<layer> <op>" (pass F, B, W;
// "step" for the data-parallel and optimizer work), and a flow arrow from
// each pipeline send to the pass that waits for it. Timestamps are in
// microseconds with three decimals: the simulator's nanoseconds exactly.
// `otherData` carries the schema (core/formats.h kTraceSchema) and the
// layout. Output is deterministic: the same run gives the same bytes.
#pragma once

#include <string>
#include <vector>

#include "sim/simulate.h"

namespace foldplan {

// The trace of `result`, limited to the pipeline ranks in `ranks` (empty:
// all of them). `layout_text` goes into otherData.
std::string TraceJson(const SimResult& result, const std::vector<int>& ranks, const std::string& layout_text);

}  // namespace foldplan
