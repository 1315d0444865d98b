// A layout: how one training job is folded onto W ranks. The dense view
// factors each pipeline stage's G = W / pp ranks as tp x cp x dp, the expert
// view as etp x ep x edp (doc/folding.md).
// The command-line syntax is
//   tp=2,cp=1,pp=8,ep=8,etp=1[,dp=N][,edp=N][,vpp=N][,mbs=N]
//   [,order=tp-cp-ep-dp-pp][,cp_style=ulysses][,recompute=selective]
//   [,placement=linear|packed][,stages=4/8/8/.../5][,world=N]
// with dp and edp derived from the world size when omitted.
#pragma once

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
  Recompute recompute = Recompute::kNone;
  std::string order = kDefaultOrder;  // Megatron order string, fastest axis first
  Placement placement = Placement::kLinear;
  // Decoder layers per virtual pipeline stage, pp * vpp entries in Megatron's
  // order (virtual stage v*pp + p runs on pipeline rank p). Filled from the
  // pipeline description (planner/pipeline.h) or by enumeration; may be
  // empty until then.
  std::vector<int> stage_layers;
  // True when stage_layers was given explicitly (stages=...) rather than derived.
  bool explicit_stages = false;

  int stage_size() const { return tp * cp * dp; }  // G
  // Layers held by pipeline rank p (sum over its virtual stages).
  int layers_on_stage(int p) const;
  bool operator==(const Layout&) const = default;
};

// Parses the command-line syntax above. dp/edp are derived from `world`
// when omitted (world from the string's world=N, else `default_world`).
// Unknown keys, non-integers and degrees that do not divide are errors.
Result<Layout> ParseLayout(const std::string& text, int default_world);

// Canonical text form, accepted back by ParseLayout.
std::string FormatLayout(const Layout& layout);
// Short form for tables: "tp2 cp1 dp8 pp8 | ep8 etp1 edp2" (pp8x2 with vpp 2).
std::string ShortDegrees(const Layout& layout);

}  // namespace foldplan
