// foldbench's measured cases (inputs/measurements.h) set beside what the
// cost model predicts for each, on the plan's cluster: the library half of
// `foldplan compare`. Every prediction is a call into the cost model's own
// functions (CollectiveTime on the cost model's group placement, the
// compute profile's rates), derived from what foldbench times
// (doc/validate.md, "foldplan compare" has the derivation per op):
//   sweep ops (all_to_all, all_to_all_v, all_gather, reduce_scatter,
//     all_reduce, send_recv): CollectiveTime(collective, S) on the kind's
//     worst group span with the kind's groups sharing links, as the
//     communication plan times it (planner/group_placement.h PlaceGroups);
//   ulysses: all-to-all of S over cp + pack and unpack, each the tensor's
//     S bytes at PermuteGbPerS(S);
//   dispatch: count exchange, permute and unpermute (copy rate),
//     all-to-all-v there and back over ep, all-gather-v and
//     reduce-scatter-v over etp (etp > 1); the expert function not modelled;
//   pack: the copy reference at the copy rate, pack / unpack at the permute rate;
//   compute: FLOPs / the GEMM rate at the case's shape (grouped GEMM for
//     expert cases with batch > 1).
// A case that cannot be predicted honestly (skewed routing, expert GEMMs,
// no shape), or one with wrong elements, is listed with the reason and
// left out of the summary.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "costmodel/evaluate.h"
#include "inputs/measurements.h"
#include "planner/layout.h"

namespace foldplan {

struct CaseComparison {
  std::string name;                 // foldbench's case name
  int64_t bytes = 0;                // S (nccl-tests conventions)
  std::optional<MeasuredGemm> gemm; // compute cases
  double measured_s = 0;            // median
  bool predicted = false;
  double predicted_s = 0;           // when predicted
  double relative_error = 0;        // predicted / measured - 1, when predicted
  // What the prediction used: the algorithm ("ring/Simple", "calibrated"),
  // the rates (GB/s, TFLOP/s), or why there is none.
  std::string model;
  // Why the case is not in the summary ("" when it is): not predicted,
  // wrong elements, a part not modelled.
  std::string excluded;
};

struct ErrorSummary {
  int cases = 0;                     // cases in the summary
  double median_abs_relative_error = 0;
  double max_abs_relative_error = 0;
};

struct OpComparison {
  std::string op;           // "ulysses", "dispatch", "pack", "compute", or a collective
  std::string group_kind;
  int group_size = 0;
  bool ran = false;
  std::string skip_reason;  // when not ran
  std::vector<CaseComparison> cases;
  ErrorSummary summary;     // over this op's summarised cases
};

struct Comparison {
  std::vector<OpComparison> ops;
  ErrorSummary summary;     // over every op's summarised cases
};

// The median (mean of the middle two for an even count) and the largest
// |relative error| of the cases with an empty `excluded`.
ErrorSummary SummariseErrors(const std::vector<const CaseComparison*>& cases);

// Every op and case of `measured` against `model` for `layout` (the plan's
// best layout, on the model's cluster). An error: the layout does not fit
// the model's topology, or an op's group size differs from the layout's.
Result<Comparison> CompareMeasurements(const MeasurementSet& measured, const Layout& layout,
                                       const CostModel& model);

}  // namespace foldplan
