// Megatron-LM command-line arguments for a layout. Megatron numbers ranks
// with one of two orders only (tp-cp-ep-dp-pp, or tp-cp-ep-pp-dp with
// --use-tp-pp-dp-mapping); a layout is exported when its groups equal the
// groups of one of them (size-1 axes may sit anywhere in the order).
#include <string>
#include <vector>

#include "planner/export_util.h"
#include "planner/rank_export.h"
#include "planner/rank_generator.h"

namespace foldplan {
namespace {

std::string Str(long long v) { return std::to_string(v); }

// Which Megatron order reproduces the map's groups: kDefaultOrder,
// kPpDpOrder, or "" for neither (then *why says how the default differs).
// Prefers the layout's own spelling when both match (pp == 1, or dp == edp == 1).
std::string MatchingMegatronOrder(const RankMap& map, std::string* why) {
  std::vector<std::string> candidates = {kDefaultOrder, kPpDpOrder};
  if (map.layout().order == kPpDpOrder) std::swap(candidates[0], candidates[1]);
  for (const std::string& order : candidates) {
    Layout megatron = map.layout();
    megatron.order = order;
    Result<GroupSet> theirs = BuildFoldedGroups(megatron);
    if (!theirs.ok()) {
      if (order == kDefaultOrder) *why = theirs.status().message();
      continue;
    }
    bool same = true;
    for (int k = 0; k < kGroupKindCount && same; ++k) {
      const auto kind = static_cast<GroupKind>(k);
      const Groups& ours = map.groups(kind);
      if (ours == (*theirs)[k]) continue;
      same = false;
      if (order == kDefaultOrder)
        *why = export_util::DescribeGroupMismatch(Name(kind), ours, (*theirs)[k], order);
    }
    if (same) return order;
  }
  return "";
}

bool AllEqual(const std::vector<int>& v, size_t begin, size_t end) {
  for (size_t i = begin + 1; i < end; ++i)
    if (v[i] != v[begin]) return false;
  return true;
}

// Megatron's --pipeline-model-parallel-layout: one '|'-separated entry per
// virtual stage (Megatron's order, virtual stage v*pp + p on pipeline rank
// p): E = embedding (first stage), t = decoder layer, m = MTP layer and
// L = loss (last stage).
std::string PipelineLayoutString(const std::vector<int>& stage_layers, int mtp_layers) {
  std::string out;
  for (size_t s = 0; s < stage_layers.size(); ++s) {
    if (s > 0) out += "|";
    if (s == 0) out += "E";
    out += std::string(stage_layers[s], 't');
    if (s + 1 == stage_layers.size()) out += std::string(mtp_layers, 'm') + "L";
  }
  return out;
}

// Arguments placing the decoder layers on stages; an error when vpp > 1
// and neither the stages nor the model say how many layers a chunk holds.
Result<std::vector<std::string>> PipelineArgs(const Layout& l, const ModelSpec* model) {
  std::vector<std::string> args;
  if (l.pp == 1) return args;
  const std::vector<int>& stages = l.stage_layers;
  if (!stages.empty() && static_cast<int>(stages.size()) != l.pp * l.vpp)
    return Status::Error("megatron: stage_layers has " + Str(stages.size()) +
                         " entries, expected pp*vpp = " + Str(l.pp * l.vpp));
  const int mtp = model ? model->mtp_layers : 0;
  const bool even = stages.empty() || AllEqual(stages, 0, stages.size());
  if (l.vpp > 1) {
    if (!even) {
      args.push_back("--pipeline-model-parallel-layout \"" + PipelineLayoutString(stages, mtp) + "\"");
      return args;
    }
    int per_chunk = stages.empty() ? 0 : stages[0];
    if (stages.empty() && model && model->layers % (l.pp * l.vpp) == 0)
      per_chunk = model->layers / (l.pp * l.vpp);
    if (per_chunk == 0)
      return Status::Error("megatron: vpp " + Str(l.vpp) +
                           " needs the layers per virtual stage "
                           "(--num-layers-per-virtual-pipeline-stage): give a model or stage layers");
    args.push_back("--num-layers-per-virtual-pipeline-stage " + Str(per_chunk));
    return args;
  }
  if (even) return args;
  // vpp == 1, uneven: Megatron's first/last flags spread the rest evenly
  // over the middle stages; anything else needs the explicit layout.
  const size_t n = stages.size();
  const bool middle_even = n <= 2 || AllEqual(stages, 1, n - 1);
  if (n == 2) {
    args.push_back("--decoder-first-pipeline-num-layers " + Str(stages[0]));
  } else if (middle_even) {
    if (stages[0] != stages[1]) args.push_back("--decoder-first-pipeline-num-layers " + Str(stages[0]));
    if (stages[n - 1] != stages[1])
      args.push_back("--decoder-last-pipeline-num-layers " + Str(stages[n - 1]));
  } else {
    args.push_back("--pipeline-model-parallel-layout \"" + PipelineLayoutString(stages, mtp) + "\"");
  }
  return args;
}

}  // namespace

Result<std::string> ExportMegatron(const RankMap& map, const ExportContext& ctx) {
  const Layout& l = map.layout();
  std::string why;
  const std::string order = MatchingMegatronOrder(map, &why);
  if (order.empty())
    return Status::Error("megatron cannot express this layout: it numbers ranks with " +
                         std::string(kDefaultOrder) + ", or " + kPpDpOrder +
                         " with --use-tp-pp-dp-mapping, and order '" + l.order +
                         "' gives groups neither produces for these degrees (" + why + ")");

  std::vector<std::string> args = {
      "--tensor-model-parallel-size " + Str(l.tp),
      "--pipeline-model-parallel-size " + Str(l.pp),
      "--context-parallel-size " + Str(l.cp),
  };
  if (l.cp > 1)
    args.push_back(std::string("--cp-comm-type ") + (l.cp_style == CpStyle::kUlysses ? "a2a" : "p2p"));
  args.push_back("--expert-model-parallel-size " + Str(l.ep));
  args.push_back("--expert-tensor-parallel-size " + Str(l.etp));
  if (l.tp > 1) args.push_back("--sequence-parallel");
  if (order == kPpDpOrder) args.push_back("--use-tp-pp-dp-mapping");
  Result<std::vector<std::string>> pipeline = PipelineArgs(l, ctx.model);
  if (!pipeline.ok()) return pipeline.status();
  args.insert(args.end(), pipeline->begin(), pipeline->end());
  args.push_back("--micro-batch-size " + Str(l.mbs));
  if (ctx.job) {
    args.push_back("--global-batch-size " + Str(ctx.job->global_batch));
    args.push_back("--seq-length " + Str(ctx.job->seq_len));
  }
  if (l.recompute.selective()) args.push_back("--recompute-granularity selective");
  if (l.recompute.full()) {
    args.push_back("--recompute-granularity full");
    args.push_back("--recompute-method uniform");
    args.push_back("--recompute-num-layers 1");
  }
  const bool moe = ctx.model ? ctx.model->is_moe() : true;
  if (moe) args.push_back(std::string("--moe-token-dispatcher-type ") + Name(l.dispatcher));

  std::string out = "# Megatron-LM parallelism arguments for " + FormatLayout(l) + "\n";
  out += "# world size " + Str(l.world) + " (dp " + Str(l.dp) + ", edp " + Str(l.edp) + " follow from it)\n";
  if (!ctx.job)
    out += std::string("# no job given: add --global-batch-size, --seq-length") +
           (moe ? " and --moe-token-dispatcher-type" : "") + "\n";

  out += export_util::PlacementNote(map, "#");
  for (size_t i = 0; i < args.size(); ++i) out += args[i] + (i + 1 < args.size() ? " \\\n" : "\n");
  return out;
}

}  // namespace foldplan
