// A Python snippet building one jax.sharding.Mesh that realises both views
// of the folding, and the PartitionSpecs of attention weights, expert
// weights and activations on it.
//
// The mesh's axes are the rank's digits cut at every stride of both views
// (export_util::BuildFoldedMesh), slowest first, so the mesh element at
// row-major index i is rank i and every degree (tp, cp, dp, pp; ep, etp,
// edp) is the product of the axes it owns: the expert axis of a
// PartitionSpec is a tuple of mesh axes. A layout whose two views cut the
// rank at strides that do not nest has no such mesh and is refused. Devices
// come from mesh_utils.create_hybrid_device_mesh (ICI = an NVLink domain,
// DCN across) when the placement puts ranks on domains in rank order, else
// (and as a fallback the snippet checks) from the rank map's GPU order.
#include <algorithm>
#include <string>
#include <vector>

#include "planner/export_util.h"
#include "planner/rank_export.h"

namespace foldplan {
namespace {

using export_util::DenseAxis;
using export_util::ExpertAxis;
using export_util::FoldedMeshAxis;

std::string Str(long long v) { return std::to_string(v); }

Status Refuse(const std::string& why) { return Status::Error("jax cannot express this layout: " + why); }

std::string Tuple(const std::vector<int>& v) {
  std::string out = "(";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + Str(v[i]);
  return out + (v.size() == 1 ? ",)" : ")");
}

// A PartitionSpec entry: None, "axis" or ("a", "b") (major axis first).
template <typename Pred>
std::string SpecEntry(const std::vector<FoldedMeshAxis>& axes, Pred owns) {
  std::vector<std::string> names;
  for (const FoldedMeshAxis& a : axes)
    if (owns(a)) names.push_back(a.name);
  if (names.empty()) return "None";
  if (names.size() == 1) return "\"" + names[0] + "\"";
  std::string out = "(";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", \"" : "\"") + names[i] + "\"";
  return out + ")";
}

}  // namespace

Result<std::string> ExportJax(const RankMap& map, const ExportContext& ctx) {
  const Layout& l = map.layout();
  auto mesh = export_util::BuildFoldedMesh(l);
  if (!mesh.ok()) return Refuse(mesh.status().message());
  const std::vector<FoldedMeshAxis>& axes = mesh.value();
  std::vector<int> shape;
  for (const FoldedMeshAxis& a : axes) shape.push_back(a.size);

  // Every group kind along the mesh axes it owns, checked against the map.
  auto dense_in = [&axes](std::initializer_list<DenseAxis> kinds) {
    std::vector<bool> v;
    for (const FoldedMeshAxis& a : axes) v.push_back(std::find(kinds.begin(), kinds.end(), a.dense) != kinds.end());
    return v;
  };
  auto expert_in = [&axes](std::initializer_list<ExpertAxis> kinds) {
    std::vector<bool> v;
    for (const FoldedMeshAxis& a : axes)
      v.push_back(std::find(kinds.begin(), kinds.end(), a.expert) != kinds.end());
    return v;
  };
  const std::string mismatch = export_util::MeshGroupMismatch(
      map, shape,
      {{GroupKind::kTp, dense_in({DenseAxis::kTp})},
       {GroupKind::kCp, dense_in({DenseAxis::kCp})},
       {GroupKind::kDp, dense_in({DenseAxis::kDp})},
       {GroupKind::kDpCp, dense_in({DenseAxis::kDp, DenseAxis::kCp})},
       {GroupKind::kPp, dense_in({DenseAxis::kPp})},
       {GroupKind::kEp, expert_in({ExpertAxis::kEp})},
       {GroupKind::kEtp, expert_in({ExpertAxis::kEtp})},
       {GroupKind::kEdp, expert_in({ExpertAxis::kEdp})}},
      "the mesh");
  if (!mismatch.empty()) return Refuse("its mesh axes do not give the rank map's groups (a bug?): " + mismatch);

  auto split = export_util::SplitIciDcn(map, shape);
  std::string out = "# One JAX mesh for " + FormatLayout(l) + " (foldplan export).\n";
  out += "# Axes are rank digits, slowest first: mesh element at row-major index i is rank i, and\n";
  out += "# each degree is the product of its axes (checked: tp, cp, dp, dp_cp, pp, ep, etp, edp groups\n";
  out += "# equal the rank map's).\n";
  out += "# Run after jax.distributed.initialize(), one process per node owning its GPUs, nodes in order.\n";
  out += export_util::PlacementNote(map, "#");
  out += "import numpy as np\n";
  out += "import jax\n";
  out += "from jax.experimental import mesh_utils\n";
  out += "from jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n\n";

  out += "axis_names = (";
  for (size_t i = 0; i < axes.size(); ++i) out += (i ? ", \"" : "\"") + axes[i].name + "\"";
  out += axes.size() == 1 ? ",)\n" : ")\n";
  out += "mesh_shape = " + Tuple(shape) + "\n";
  out += "# Global GPU index of each rank (rank map placement.gpu).\n";
  std::vector<int> gpus;
  for (int r = 0; r < map.world(); ++r) gpus.push_back(map.place(r).gpu);
  out += "gpu_of_rank = " + export_util::WrappedRankList(gpus, 4) + "\n";
  out += "all_devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))\n";
  out += "rank_devices = [all_devices[g] for g in gpu_of_rank]\n";
  if (split.ok() && split.value().granules > 1) {
    const export_util::IciDcnSplit& s = split.value();
    out += "# ICI: inside an NVLink domain of " + Str(s.granule_ranks) + " ranks; DCN: across the " +
           Str(s.granules) + " domains.\n";
    out += "ici_shape = " + Tuple(s.ici) + "\n";
    out += "dcn_shape = " + Tuple(s.dcn) + "\n";
    out += std::string("devices = mesh_utils.create_hybrid_device_mesh(\n    ici_shape, dcn_shape, "
                       "devices=rank_devices, process_is_granule=") +
           (s.domain_is_node ? "True" : "False") + ")";
    out += s.domain_is_node ? "\n" : "  # granule = slice_index, the NVLink domain\n";
  } else if (split.ok()) {
    out += "# One NVLink domain holds every rank.\n";
    out += "devices = mesh_utils.create_device_mesh(mesh_shape, devices=rank_devices)\n";
  } else {
    out += "# No hybrid mesh: " + split.status().message() + ".\n";
    out += "devices = np.array(rank_devices).reshape(mesh_shape)\n";
  }
  out += "if [d.id for d in devices.flat] != [d.id for d in rank_devices]:\n";
  out += "    devices = np.array(rank_devices).reshape(mesh_shape)  # keep rank order: the groups depend on it\n";
  out += "mesh = Mesh(devices, axis_names)\n\n";

  auto dense = [&axes](DenseAxis k) {
    return SpecEntry(axes, [k](const FoldedMeshAxis& a) { return a.dense == k && a.size > 1; });
  };
  auto expert = [&axes](ExpertAxis k) {
    return SpecEntry(axes, [k](const FoldedMeshAxis& a) { return a.expert == k && a.size > 1; });
  };
  out += "# Both views as axis tuples (dense: pp dp cp tp; expert: pp edp ep etp).\n";
  out += "PP = " + dense(DenseAxis::kPp) + "\n";
  out += "DP = " + dense(DenseAxis::kDp) + "\n";
  out += "CP = " + dense(DenseAxis::kCp) + "\n";
  out += "TP = " + dense(DenseAxis::kTp) + "\n";
  out += "EDP = " + expert(ExpertAxis::kEdp) + "\n";
  out += "EP = " + expert(ExpertAxis::kEp) + "\n";
  out += "ETP = " + expert(ExpertAxis::kEtp) + "\n\n";
  out += "# Attention weights (per layer): heads over tp.\n";
  out += "qkv_proj = P(None, TP)  # [hidden, (q + k + v) heads * head_dim]\n";
  out += "out_proj = P(TP, None)  # [heads * head_dim, hidden]\n";
  if (ctx.model && ctx.model->is_moe() && ctx.model->moe->experts % l.ep == 0)
    out += "# Expert weights: " + Str(ctx.model->moe->experts) + " experts over ep (" +
           Str(ctx.model->moe->experts / l.ep) + " per rank), expert hidden over etp.\n";
  else
    out += "# Expert weights: experts over ep, expert hidden over etp.\n";
  out += "expert_w_in = P(EP, None, ETP)  # [experts, hidden, expert_hidden]\n";
  out += "expert_w_out = P(EP, ETP, None)  # [experts, expert_hidden, hidden]\n";
  out += "# Activations: batch over dp, sequence over cp";
  out += l.cp > 1 ? std::string(" (") + (l.cp_style == CpStyle::kRing ? "ring attention" : "Ulysses all-to-all") +
                        " inside attention)"
                  : "";
  out += "; dispatched tokens over ep x edp.\n";
  out += "activations = P(DP, CP, None)  # [batch, seq, hidden]\n";
  out += "expert_tokens = P(EP, EDP, None)  # [experts, tokens per expert, hidden]\n";
  out += "# Stacked layer weights [stages, ...] over pp; the pipeline schedule (" +
         std::string(Name(l.schedule_or_default())) + ") is the trainer's.\n";
  out += "stacked_layers = P(PP)\n";
  out += "shardings = {name: NamedSharding(mesh, spec) for name, spec in [\n";
  out += "    (\"qkv_proj\", qkv_proj), (\"out_proj\", out_proj), (\"expert_w_in\", expert_w_in),\n";
  out += "    (\"expert_w_out\", expert_w_out), (\"activations\", activations), (\"expert_tokens\", expert_tokens)]}\n";
  return out;
}

}  // namespace foldplan
