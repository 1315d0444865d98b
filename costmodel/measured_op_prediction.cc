#include "costmodel/measured_op_prediction.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/median.h"
#include "costmodel/collective.h"
#include "costmodel/compute_profile.h"
#include "costmodel/compute_time.h"
#include "costmodel/dtype_bytes.h"
#include "planner/group_placement.h"

namespace foldplan {
namespace {

std::string Rate(double value, const char* unit) {
  char text[64];
  std::snprintf(text, sizeof text, "%.4g %s", value, unit);
  return text;
}

// A prediction in parts: seconds summed, what each part used joined by " + ".
struct Parts {
  double seconds = 0;
  std::string model;
  void Add(double s, const std::string& what) {
    seconds += s;
    model += (model.empty() ? "" : " + ") + what;
  }
};

class Predictor {
 public:
  Predictor(const CostModel& model, const LayoutPlacement& placement)
      : model_(model), profile_(model.profile()), placement_(placement) {}

  // One collective of `bytes` (nccl-tests conventions) on the worst group
  // of `kind`, with that kind's groups sharing links, exactly as the
  // communication plan times it (comm_plan.cc PlanBuilder::Add).
  void Collective(Parts& parts, Collective c, double bytes, GroupKind kind, const char* label) const {
    const GroupPlacement& g = placement_.of(kind);
    const CollectiveCost cost = CollectiveTime(c, bytes, g.span, model_.comm_params(), g.groups_sharing_links);
    parts.Add(cost.seconds, std::string(label) + " " + cost.algorithm);
  }
  // Bytes read + written at the profile's device-copy rate.
  void Copy(Parts& parts, double bytes_read_written, const char* label) const {
    parts.Add(bytes_read_written / (profile_.copy_gb_per_s() * 1e9),
              std::string(label) + " copy " + Rate(profile_.copy_gb_per_s(), "GB/s"));
  }
  // A Ulysses layout change of a tensor of `tensor_bytes`: the profile's
  // permute points are timed as bytes_moved = the tensor's size (tokens x
  // heads x d x 2 B) and gbps = bytes_moved / s, so t = bytes / rate(bytes).
  void Permute(Parts& parts, double tensor_bytes, const char* label) const {
    const double gbps = profile_.PermuteGbPerS(tensor_bytes);
    parts.Add(tensor_bytes / (gbps * 1e9), std::string(label) + " permute " + Rate(gbps, "GB/s"));
  }

  const CostModel& model() const { return model_; }
  const ComputeProfile& profile() const { return profile_; }
  const GroupPlacement& of(GroupKind kind) const { return placement_.of(kind); }

 private:
  const CostModel& model_;
  const ComputeProfile& profile_;
  const LayoutPlacement& placement_;
};

void SetPrediction(CaseComparison& c, const Parts& parts) {
  c.predicted = true;
  c.predicted_s = parts.seconds;
  c.model = parts.model;
  c.relative_error = c.measured_s > 0 ? parts.seconds / c.measured_s - 1 : 0;
  if (!(c.measured_s > 0)) c.excluded = "measured time 0";
}

// Sweep: CollectiveTime(collective of the op's name, S) per case.
void PredictSweep(const Predictor& p, Collective collective, GroupKind kind, CaseComparison& c) {
  Parts parts;
  p.Collective(parts, collective, static_cast<double>(c.bytes), kind, "");
  parts.model = parts.model.substr(1);  // no label
  SetPrediction(c, parts);
}

// Ulysses (ops_ulysses.cc): pack into C blocks, all-to-all of S over cp,
// unpack; S is the per-rank tensor (elements x 2 B), which pack and unpack
// each move once.
void PredictUlysses(const Predictor& p, CaseComparison& c) {
  const double s = static_cast<double>(c.bytes);
  Parts parts;
  p.Permute(parts, s, "pack");
  p.Collective(parts, Collective::kAllToAll, s, GroupKind::kCp, "all_to_all");
  p.Permute(parts, s, "unpack");
  SetPrediction(c, parts);
}

// Dispatch (ops_dispatch.cc), from S = T K H 2 B (R = T K rows of H bf16):
//   count exchange: all-to-all of E int32 counts over ep, all-gather of
//     the etp x E received counts over etp;
//   permute (GatherRows, a source row read per copy): PermuteBytes(T, R,
//     2H, unfused) = 2 S read + written, at the copy rate;
//   all-to-all-v of S over ep; with etp > 1 all-gather-v of etp S (the
//     gathered output, R rows per rank on average) and reduce-scatter-v of
//     etp S over etp;
//   the expert function `term`: one cheap pass, not modelled;
//   all-to-all-v of S back over ep;
//   unpermute (CombineRows): R bf16 rows read, T f32 rows written, at the
//     copy rate.
// Uniform routing only: the skewed cases' receive imbalance is not in the
// model, nor are the expert GEMMs of --expert gemm.
void PredictDispatch(const Predictor& p, const MeasuredOp& op, CaseComparison& c) {
  const ModelSpec& model = *p.model().context().model;
  if (!model.moe) {
    c.model = "the plan's model has no experts";
    c.excluded = "not predicted";
    return;
  }
  const MoeSpec& moe = *model.moe;
  const int etp = p.of(GroupKind::kEtp).size;
  const double s = static_cast<double>(c.bytes);
  const double h = model.hidden;
  const double rows = s / (h * kBf16Bytes);
  const double tokens = rows / moe.top_k;
  const double count_bytes = sizeof(int32_t);  // foldbench's per-expert row counts
  Parts parts;
  p.Collective(parts, Collective::kAllToAll, moe.experts * count_bytes, GroupKind::kEp, "counts");
  if (etp > 1) {
    p.Collective(parts, Collective::kAllGather, etp * moe.experts * count_bytes, GroupKind::kEtp,
                 "counts");
  }
  p.Copy(parts, PermuteBytes(tokens, rows, h * kBf16Bytes, false), "permute");
  p.Collective(parts, Collective::kAllToAllV, s, GroupKind::kEp, "all_to_all_v");
  if (etp > 1) {
    p.Collective(parts, Collective::kAllGather, etp * s, GroupKind::kEtp, "all_gather");
    p.Collective(parts, Collective::kReduceScatter, etp * s, GroupKind::kEtp, "reduce_scatter");
  }
  p.Collective(parts, Collective::kAllToAllV, s, GroupKind::kEp, "all_to_all_v");
  p.Copy(parts, rows * h * kBf16Bytes + tokens * h * kFp32Bytes, "unpermute");
  SetPrediction(c, parts);
  c.model += " (expert function not modelled)";
  if (c.name.rfind("skewed", 0) == 0) {
    c.excluded = "skewed routing: the receivers' imbalance is not modelled";
  }
  for (const std::string& note : op.notes) {
    if (note.rfind("expert function: two bf16 GEMMs", 0) == 0) {
      c.excluded = "expert GEMMs (--expert gemm) are not modelled here";
    }
  }
}

// Pack (ops_pack.cc): S = read + written = twice the tensor. The copy
// reference at the copy rate (which counts read + written, as S does);
// pack and unpack are the Ulysses layout change of the S / 2 tensor.
void PredictPack(const Predictor& p, CaseComparison& c) {
  const double s = static_cast<double>(c.bytes);
  Parts parts;
  if (c.name.rfind("copy", 0) == 0) {
    p.Copy(parts, s, "");
  } else {
    p.Permute(parts, s / 2, "");
  }
  parts.model = parts.model.substr(1);
  SetPrediction(c, parts);
}

// Compute (ops_compute.cc): flops (2 batch m n k) / the bf16 rate at the
// case's shape: expert cases with batch > 1 are grouped GEMMs of `batch`
// experts of m tokens each; the rest (the attention QK^T and PV, batched
// over heads) are GEMMs of (m, n, k) at the plain GEMM rate, the batch
// taken as running at one problem's rate.
void PredictCompute(const Predictor& p, CaseComparison& c, const MeasuredCase& measured) {
  if (!c.gemm) {
    c.model = "no gemm shape in the file";
    c.excluded = "not predicted";
    return;
  }
  const MeasuredGemm& g = *c.gemm;
  const double flops = measured.flops.value_or(2.0 * g.batch * g.m * g.n * g.k);
  const bool grouped = c.name.rfind("expert", 0) == 0 && g.batch > 1;
  const double rate = grouped ? p.profile().GroupedGemmFlopsPerS(static_cast<int>(g.batch), g.m, g.k, g.n)
                              : p.profile().GemmFlopsPerS(g.m, g.n, g.k, Precision::kBF16);
  Parts parts;
  parts.Add(flops / rate, std::string(grouped ? "grouped GEMM " : "GEMM ") + Rate(rate / 1e12, "TFLOP/s"));
  SetPrediction(c, parts);
}

}  // namespace

ErrorSummary SummariseErrors(const std::vector<const CaseComparison*>& cases) {
  std::vector<double> errors;
  for (const CaseComparison* c : cases) {
    if (c->excluded.empty()) errors.push_back(std::fabs(c->relative_error));
  }
  ErrorSummary s;
  s.cases = static_cast<int>(errors.size());
  if (errors.empty()) return s;
  s.median_abs_relative_error = Median(errors);
  s.max_abs_relative_error = *std::max_element(errors.begin(), errors.end());
  return s;
}

Result<Comparison> CompareMeasurements(const MeasurementSet& measured, const Layout& layout,
                                       const CostModel& model) {
  auto placement = PlaceGroups(layout, *model.context().topology);
  if (!placement.ok()) return placement.status();
  const Predictor predictor(model, placement.value());
  Comparison out;
  for (const MeasuredOp& op : measured.ops) {
    OpComparison& o = out.ops.emplace_back();
    o.op = op.op;
    o.group_kind = op.group_kind;
    o.group_size = op.group_size;
    o.ran = op.ran;
    o.skip_reason = op.skip_reason;
    if (!op.ran) continue;
    const std::optional<Collective> collective = CollectiveNamed(op.op);
    const std::optional<GroupKind> kind = GroupKindNamed(op.group_kind);
    const bool is_compute = op.op == "compute";
    // The op's groups must be the layout's (compute runs on every rank alone).
    if (!is_compute) {
      const bool timed = kind && std::find(kTimedGroupKinds.begin(), kTimedGroupKinds.end(), *kind) !=
                                     kTimedGroupKinds.end();
      if (timed && predictor.of(*kind).size != op.group_size) {
        return Status::Error(measured.source + ": op " + op.op + " over " + op.group_kind + " groups of " +
                             std::to_string(op.group_size) + " ranks, but the layout's " + op.group_kind +
                             " groups have " + std::to_string(predictor.of(*kind).size));
      }
    }
    for (const MeasuredCase& mc : op.cases) {
      CaseComparison& c = o.cases.emplace_back();
      c.name = mc.name;
      c.bytes = mc.send_bytes_per_rank;
      c.gemm = mc.gemm;
      c.measured_s = mc.median_seconds;
      if (op.op == "ulysses") {
        PredictUlysses(predictor, c);
      } else if (op.op == "dispatch") {
        PredictDispatch(predictor, op, c);
      } else if (op.op == "pack") {
        PredictPack(predictor, c);
      } else if (is_compute) {
        PredictCompute(predictor, c, mc);
      } else if (collective && kind && predictor.of(*kind).size == op.group_size) {
        PredictSweep(predictor, *collective, *kind, c);
      } else {
        c.model = "no prediction for op " + op.op + " over " + op.group_kind;
        c.excluded = "not predicted";
      }
      if (mc.wrong_elements > 0) {
        c.excluded = std::to_string(mc.wrong_elements) + " wrong elements";
      }
    }
    std::vector<const CaseComparison*> cases;
    for (const CaseComparison& c : o.cases) cases.push_back(&c);
    o.summary = SummariseErrors(cases);
  }
  std::vector<const CaseComparison*> all;  // out.ops no longer grows
  for (const OpComparison& o : out.ops) {
    for (const CaseComparison& c : o.cases) all.push_back(&c);
  }
  out.summary = SummariseErrors(all);
  return out;
}

}  // namespace foldplan
