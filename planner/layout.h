// A layout: how one training job is folded onto W ranks, and the recipe it
// runs. The dense view factors each pipeline stage's G = W / pp ranks as
// tp x cp x dp, the expert view as etp x ep x edp (doc/folding.md); the
// recipe options (recompute, dispatcher, overlaps, precision, FSDP, the
// pipeline layout) are what Megatron's flags of the same names choose. The
// command-line syntax is
//   tp=2,cp=1,pp=8,ep=8,etp=1[,dp=N][,edp=N][,vpp=N][,mbs=N]
//   [,order=tp-cp-ep-dp-pp][,cp_style=ulysses|ring][,recompute=R]
//   [,placement=linear|packed][,dispatcher=alltoall|allgather|deepep|hybridep]
//   [,a2a_overlap=0|1][,precision=P][,fsdp=0|1][,tp_overlap=0|1][,cuda_graphs=G]
//   [,schedule=S][,stages=4/8/.../5 | pp_layout=Et|(tt|)*30L][,world=N]
// with dp and edp derived from the world size when omitted (R: none,
// selective, full or '+'-joined modules; P: inputs/job.h's recipes; G:
// none, layer, full_iteration or '+'-joined CUDA graph modules; S:
// inputs/pipeline_schedule.h's names, the implied one when omitted).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "inputs/job.h"

namespace foldplan {

// How logical ranks map to physical GPUs.
//  kLinear: rank r on GPU r (what launchers do by default).
//  kPacked: ranks are placed in blocks of the heavy-group block size (the
//           contiguous rank block holding every TP, CP, EP and ETP group),
//           as many whole blocks per NVLink domain as fit, leaving the rest
//           of a domain idle, so that no heavy group straddles domains.
enum class Placement { kLinear, kPacked };
const char* Name(Placement p);  // "linear", "packed"

inline constexpr const char* kDefaultOrder = "tp-cp-ep-dp-pp";
inline constexpr const char* kPpDpOrder = "tp-cp-ep-pp-dp";  // --use-tp-pp-dp-mapping

struct Layout {
  int world = 0;  // ranks used (W); may be fewer than the cluster's GPUs
  int pp = 1;
  int vpp = 1;    // virtual pipeline chunks per stage
  int dp = 1;
  int cp = 1;
  int tp = 1;
  int ep = 1;
  int etp = 1;
  int edp = 1;
  int mbs = 1;    // micro-batch size, sequences
  CpStyle cp_style = CpStyle::kUlysses;
  Recompute recompute;
  std::string order = kDefaultOrder;  // Megatron order string, fastest axis first
  Placement placement = Placement::kLinear;
  Dispatcher dispatcher = Dispatcher::kAllToAll;
  bool a2a_overlap = false;  // --overlap-moe-expert-parallel-comm
  Precision precision = Precision::kBF16;
  bool fsdp = false;         // --use-megatron-fsdp (else the distributed optimizer)
  bool tp_overlap = false;   // --tp-comm-overlap
  CudaGraphs cuda_graphs;    // --cuda-graph-impl / --cuda-graph-modules; none: eager
  // The pipeline schedule named (schedule=, or the job's first candidate
  // that runs the layout's pp and vpp); unset: the implied one,
  // DefaultSchedule(vpp).
  std::optional<PipelineSchedule> schedule;
  // Decoder layers per virtual pipeline stage, pp * vpp entries in model
  // order (the pipeline rank of each: planner/pipeline.h's PipelineRankOf).
  // Filled from the pipeline description (planner/pipeline.h) or by
  // enumeration; may be empty until then.
  std::vector<int> stage_layers;
  // MTP layers per virtual stage, given by a pp_layout with m; empty: every
  // MTP layer on the last stage, before the loss.
  std::vector<int> stage_mtp;
  // True when the stages were given (stages= or pp_layout=) rather than derived.
  bool explicit_stages = false;
  bool pp_layout_given = false;  // given as pp_layout= (printed back so)

  int stage_size() const { return tp * cp * dp; }  // G
  // The schedule the layout runs: the one named, else the implied one.
  PipelineSchedule schedule_or_default() const { return schedule.value_or(DefaultSchedule(vpp)); }
  // The schedule when it is named and is not the implied one, else unset:
  // the canonical text and the layout JSON print only this, so a layout
  // that names no schedule (or its implied one) prints as it always has.
  std::optional<PipelineSchedule> non_default_schedule() const;
  // Layers held by pipeline rank p (sum over its virtual stages).
  int layers_on_stage(int p) const;
  bool operator==(const Layout&) const = default;
};

// The keys a layout text gives, each checked on its own (values in range,
// names known, a pp_layout that parses) but not against each other. A full
// layout derives the rest (ParseLayout); `plan --fix` searches only the
// layouts that agree with every key given.
struct LayoutPins {
  std::optional<int> world, pp, vpp, dp, cp, tp, ep, etp, edp, mbs;
  std::optional<std::string> order;
  std::optional<CpStyle> cp_style;
  std::optional<Recompute> recompute;
  std::optional<Placement> placement;
  std::optional<Dispatcher> dispatcher;
  std::optional<bool> a2a_overlap;
  std::optional<Precision> precision;
  std::optional<bool> fsdp;
  std::optional<bool> tp_overlap;
  std::optional<CudaGraphs> cuda_graphs;
  std::optional<PipelineSchedule> schedule;
  std::optional<std::vector<int>> stages;      // stages=: decoder layers per virtual stage
  std::optional<std::vector<int>> stage_mtp;   // pp_layout=: MTP layers per virtual stage
  bool pp_layout = false;                      // the stages came from pp_layout=
  bool empty() const;
};
// The text on its own: key=value items, none empty, each value in its
// range, and every product of the degrees given (pp*tp*cp*dp, pp*etp*ep*edp
// with etp defaulting to tp, pp*vpp) within the largest world
// (core/formats.h). An error here means the text is not a layout at all.
Result<LayoutPins> ParseLayoutPins(const std::string& text);

// Parses the command-line syntax above. dp/edp are derived from `world`
// when omitted (world from the string's world=N, else `default_world`).
// Recipe options and mbs, vpp, order and cp_style left out take `job`'s
// first candidate when a job is given, else the defaults above. Unknown
// keys, non-integers and degrees that do not divide are errors.
Result<Layout> ParseLayout(const std::string& text, int default_world, const JobSpec* job = nullptr);
// ParseLayout's second half: the pins against the world and the job. An
// error here means the text is a layout, but not one this world can run.
Result<Layout> LayoutFromPins(const LayoutPins& pins, int default_world, const JobSpec* job = nullptr);

// Canonical text form, accepted back by ParseLayout.
std::string FormatLayout(const Layout& layout);
// Short form for tables: "tp2 cp1 dp8 pp8 | ep8 etp1 edp2" (pp8x2 with vpp 2).
std::string ShortDegrees(const Layout& layout);
// The recipe options that differ from the defaults, for tables:
// "dualpipev deepep a2a-overlap mxfp8 fsdp tp-overlap graphs:attn" (the schedule when
// it is not the implied one); "" when none does.
std::string ShortRecipe(const Layout& layout);

}  // namespace foldplan
