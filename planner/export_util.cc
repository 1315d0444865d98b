#include "planner/export_util.h"

#include <algorithm>
#include <cstdint>
#include <sstream>

#include "core/order_string.h"
#include "planner/placement.h"

namespace foldplan::export_util {

std::string RankList(const std::vector<int>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

std::string GroupList(const Groups& groups) {
  std::string out = "[";
  for (size_t g = 0; g < groups.size(); ++g) out += (g ? ", " : "") + RankList(groups[g]);
  return out + "]";
}

std::string WrappedRankList(const std::vector<int>& ranks, int indent, int width) {
  std::string out = "[";
  size_t line_start = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    std::string item = std::to_string(ranks[i]) + (i + 1 < ranks.size() ? "," : "");
    if (i > 0) {
      if (out.size() - line_start + 1 + item.size() > static_cast<size_t>(width)) {
        out.append("\n").append(indent, ' ');
        line_start = out.size() - indent;
      } else {
        out += " ";
      }
    }
    out += item;
  }
  return out + "]";
}

Groups RowMajorMeshGroups(const std::vector<int>& shape, const std::vector<bool>& varying) {
  // Megatron's generator lists axes fastest first; a row-major mesh has its
  // last dim fastest, so reverse both and reuse it.
  std::vector<int> sizes(shape.rbegin(), shape.rend());
  std::vector<bool> mask(varying.rbegin(), varying.rend());
  return GenerateMaskedOrthogonalRankGroups(sizes, mask);
}

namespace {

Groups Canonical(Groups groups) {
  for (std::vector<int>& g : groups) std::sort(g.begin(), g.end());
  std::sort(groups.begin(), groups.end());
  return groups;
}

}  // namespace

std::string DescribeGroupMismatch(const std::string& kind, const Groups& ours, const Groups& theirs,
                                  const std::string& their_name) {
  const Groups a = Canonical(ours);
  const Groups b = Canonical(theirs);
  if (a == b) return "";
  const std::string head = kind + " groups differ: this layout has ";
  if (a.size() != b.size() || (!a.empty() && a[0].size() != b[0].size()))
    return head + std::to_string(a.size()) + " groups of " + std::to_string(a.empty() ? 0 : a[0].size()) +
           ", " + their_name + " has " + std::to_string(b.size()) + " of " +
           std::to_string(b.empty() ? 0 : b[0].size());
  for (size_t g = 0; g < a.size(); ++g)
    if (a[g] != b[g]) return head + RankList(a[g]) + ", " + their_name + " has " + RankList(b[g]);
  return kind + " groups differ";
}

namespace {

// Scalars that keep an array on one line: numbers, null, booleans, short
// strings. Long strings (sentences) get a line each.
bool IsShortScalar(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get_ref<const std::string&>().size() <= 24;
  return !v.is_array() && !v.is_object();
}

void Emit(const nlohmann::ordered_json& v, int indent, std::string* out) {
  const std::string pad(indent + 2, ' ');
  if (v.is_object()) {
    if (v.empty()) {
      *out += "{}";
      return;
    }
    *out += "{\n";
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) *out += ",\n";
      first = false;
      *out += pad + nlohmann::ordered_json(it.key()).dump() + ": ";
      Emit(it.value(), indent + 2, out);
    }
    *out += "\n" + std::string(indent, ' ') + "}";
    return;
  }
  if (v.is_array()) {
    const bool flat = std::all_of(v.begin(), v.end(), IsShortScalar);
    if (v.empty() || flat) {
      *out += "[";
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) *out += ", ";
        // Integers dominate (rank lists): format them without dump()'s allocations.
        if (v[i].is_number_integer())
          *out += std::to_string(v[i].get<int64_t>());
        else
          *out += v[i].dump();
      }
      *out += "]";
      return;
    }
    *out += "[\n";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) *out += ",\n";
      *out += pad;
      Emit(v[i], indent + 2, out);
    }
    *out += "\n" + std::string(indent, ' ') + "]";
    return;
  }
  *out += v.dump();
}

}  // namespace

std::string PrettyJson(const nlohmann::ordered_json& value) {
  std::string out;
  Emit(value, 0, &out);
  return out + "\n";
}

std::string PlacementNote(const RankMap& map, const std::string& comment) {
  if (map.layout().placement != Placement::kPacked) return "";
  bool moved = false;
  for (int r = 0; r < map.world() && !moved; ++r) moved = map.place(r).gpu != r;
  std::ostringstream out;
  if (!moved) {
    out << comment << " Placement 'packed' puts rank r on GPU r here (the heavy blocks of "
        << HeavyBlockRanks(map) << " ranks fill the NVLink domains exactly).\n";
    return out.str();
  }
  out << comment << " Placement 'packed': rank r must run on GPU gpu[r] of the rank map, not on GPU r\n"
      << comment << " (heavy blocks of " << HeavyBlockRanks(map) << " ranks kept inside NVLink domains, "
      << map.idle_gpus() << " GPUs idle). The launcher must place ranks per the rank map\n"
      << comment << " (the foldplan.rankmap/v1 export's placement.gpu array).\n";
  return out.str();
}

std::string CommentLines(const std::string& text, const std::string& comment, int width) {
  std::string out, line;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    size_t end = text.find(' ', i);
    if (end == std::string::npos) end = text.size();
    if (end == i) break;
    const std::string word = text.substr(i, end - i);
    if (!line.empty() && comment.size() + 1 + line.size() + 1 + word.size() > static_cast<size_t>(width)) {
      out += comment + " " + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    i = end;
  }
  if (!line.empty()) out += comment + " " + line + "\n";
  return out;
}

const char* TorchPipelineSchedule(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::k1F1B: return "1F1B";
    case PipelineSchedule::kInterleaved1F1B: return "Interleaved1F1B";
    case PipelineSchedule::kGPipe: return "GPipe";
    case PipelineSchedule::kDualPipeV: return "DualPipeV";
    case PipelineSchedule::kZeroBubbleH1: break;
  }
  return nullptr;
}

std::string NoTorchScheduleReason(PipelineSchedule schedule, const std::string& trainer) {
  std::string names;
  for (PipelineSchedule s : kAllPipelineSchedules) {
    if (const char* name = TorchPipelineSchedule(s)) names += (names.empty() ? "" : ", ") + std::string(name);
  }
  return std::string("its pipeline schedules are torch.distributed.pipelining's, and none runs ") + Name(schedule) +
         " with one stage per rank (its zero-bubble schedules, InterleavedZeroBubble and ZBVZeroBubble, run "
         "several); of foldplan's schedules " + trainer + " runs " + names;
}

}  // namespace foldplan::export_util

namespace foldplan::export_util {

namespace {

constexpr const char* kDenseNames[] = {"pp", "dp", "cp", "tp"};
constexpr const char* kExpertNames[] = {"pp", "edp", "ep", "etp"};

struct Digit {
  int index;  // DenseAxis or ExpertAxis value
  int size;
  int stride;
};

}  // namespace

Result<std::vector<FoldedMeshAxis>> BuildFoldedMesh(const Layout& layout) {
  auto gens = MakeFoldedGenerators(layout);
  if (!gens.ok()) return gens.status();
  const RankGenerator& d = gens.value().dense;
  const RankGenerator& e = gens.value().expert;
  const std::vector<Digit> dense = {{0, d.Size("pp"), d.Stride("pp")},
                                    {1, d.Size("dp"), d.Stride("dp")},
                                    {2, d.Size("cp"), d.Stride("cp")},
                                    {3, d.Size("tp"), d.Stride("tp")}};
  const std::vector<Digit> expert = {{0, e.Size("pp"), e.Stride("pp")},
                                     {1, e.Size("dp"), e.Stride("dp")},
                                     {2, e.Size("ep"), e.Stride("ep")},
                                     {3, e.Size("tp"), e.Stride("tp")}};
  // Every stride where a digit of either view starts or ends.
  std::vector<std::pair<long long, std::string>> cuts = {{1, "rank"}, {layout.world, "world"}};
  auto add_cuts = [&cuts](const std::vector<Digit>& digits, const char* const* names) {
    for (const Digit& g : digits) {
      if (g.size <= 1) continue;
      cuts.push_back({g.stride, names[g.index]});
      cuts.push_back({static_cast<long long>(g.stride) * g.size, names[g.index]});
    }
  };
  add_cuts(dense, kDenseNames);
  add_cuts(expert, kExpertNames);
  std::sort(cuts.begin(), cuts.end());
  for (size_t i = 1; i < cuts.size(); ++i) {
    if (cuts[i].first % cuts[i - 1].first != 0)
      return Status::Error("a mesh needs every degree of both views to be a product of mesh axes, but " +
                           cuts[i - 1].second + "'s digit boundary at rank stride " +
                           std::to_string(cuts[i - 1].first) + " and " + cuts[i].second +
                           "'s at stride " + std::to_string(cuts[i].first) +
                           " do not nest (neither divides the other): the " + "expert view's ep/etp/edp "
                           "cut across the dense view's tp/cp/dp (or the other way round)");
  }
  auto owner = [](const std::vector<Digit>& digits, long long stride) {
    for (const Digit& g : digits)
      if (g.size > 1 && g.stride <= stride && stride < static_cast<long long>(g.stride) * g.size) return g.index;
    return 0;
  };
  std::vector<FoldedMeshAxis> axes;
  for (size_t i = 1; i < cuts.size(); ++i) {
    if (cuts[i].first == cuts[i - 1].first) continue;
    FoldedMeshAxis a;
    a.stride = static_cast<int>(cuts[i - 1].first);
    a.size = static_cast<int>(cuts[i].first / cuts[i - 1].first);
    a.dense = static_cast<DenseAxis>(owner(dense, a.stride));
    a.expert = static_cast<ExpertAxis>(owner(expert, a.stride));
    a.name = a.dense == DenseAxis::kPp
                 ? "pp"
                 : std::string(kDenseNames[static_cast<int>(a.dense)]) + "_" + kExpertNames[static_cast<int>(a.expert)];
    axes.push_back(a);
  }
  if (axes.empty()) axes.push_back(FoldedMeshAxis{"pp", 1, 1, DenseAxis::kPp, ExpertAxis::kPp});  // world 1
  std::reverse(axes.begin(), axes.end());  // slowest first
  return axes;
}

std::string MeshGroupMismatch(const RankMap& map, const std::vector<int>& shape,
                              const std::vector<std::pair<GroupKind, std::vector<bool>>>& varying,
                              const std::string& their_name) {
  for (const auto& kv : varying) {
    const std::string m =
        DescribeGroupMismatch(Name(kv.first), map.groups(kv.first), RowMajorMeshGroups(shape, kv.second), their_name);
    if (!m.empty()) return m;
  }
  return "";
}

Result<IciDcnSplit> SplitIciDcn(const RankMap& map, const std::vector<int>& shape) {
  const int w = map.world();
  // Granules: the NVLink domains in the order their ranks come.
  int granule_ranks = 0;
  while (granule_ranks < w && map.place(granule_ranks).domain == map.place(0).domain) ++granule_ranks;
  if (w % granule_ranks != 0)
    return Status::Error("its NVLink domains hold unequal numbers of ranks (" + std::to_string(granule_ranks) +
                         " in the first, world " + std::to_string(w) + ")");
  for (int r = 0; r < w; ++r) {
    const PhysicalPlace& p = map.place(r);
    const PhysicalPlace& first = map.place(r - r % granule_ranks);
    if (p.domain != first.domain || (r % granule_ranks && p.gpu <= map.place(r - 1).gpu) ||
        (r >= granule_ranks && r % granule_ranks == 0 && p.domain <= map.place(r - 1).domain))
      return Status::Error("rank " + std::to_string(r) + " (GPU " + std::to_string(p.gpu) + ", NVLink domain " +
                           std::to_string(p.domain) + ") breaks the device order a hybrid mesh assumes: blocks of " +
                           std::to_string(granule_ranks) + " consecutive ranks per domain, in GPU order");
  }
  auto split = SplitIciDcnOf(shape, granule_ranks, w / granule_ranks);
  if (!split.ok()) return split.status();
  // One process per node: the granule is a process exactly when a domain's
  // ranks share a node (else JAX's slice_index names the domain).
  split.value().domain_is_node = map.place(0).node == map.place(granule_ranks - 1).node;
  return split;
}

Result<IciDcnSplit> SplitIciDcnOf(const std::vector<int>& shape, int granule_ranks, int granules) {
  long long size = 1;
  for (int n : shape) size *= n;
  if (granule_ranks < 1 || granules < 1 || static_cast<long long>(granule_ranks) * granules != size)
    return Status::Error(std::to_string(granules) + " granules of " + std::to_string(granule_ranks) +
                         " ranks do not hold the mesh's " + std::to_string(size) + " ranks");
  IciDcnSplit split;
  split.granule_ranks = granule_ranks;
  split.granules = granules;
  split.ici.assign(shape.size(), 1);
  split.dcn = shape;
  long long rest = granule_ranks;  // ranks still to place in the ICI part, innermost axes first
  for (int k = static_cast<int>(shape.size()) - 1; k >= 0 && rest > 1; --k) {
    if (rest % shape[k] == 0) {
      split.ici[k] = shape[k];
      rest /= shape[k];
    } else if (shape[k] % rest == 0) {
      split.ici[k] = static_cast<int>(rest);
      rest = 1;
    } else {
      return Status::Error("an NVLink domain holds " + std::to_string(granule_ranks) +
                           " ranks, which is no product of the mesh's innermost axes (an axis of " +
                           std::to_string(shape[k]) + " cuts it)");
    }
    split.dcn[k] = shape[k] / split.ici[k];
  }
  return split;
}

std::vector<int> MaxTextMeshShape(const Layout& l) {
  if (l.ep < 1 || l.dp % l.ep != 0) return {};
  const int rest = l.dp / l.ep;
  bool on_data = !l.fsdp;
  if (l.pp > 1 && rest > 1) {
    // data is outside stage and fsdp inside it: the order decides.
    const OrderString order = ParseOrderString(l.order);
    int dp_at = -1, pp_at = -1;
    for (int i = 0; i < order.count; ++i) {
      const std::string_view name = kOrderAxisNames[static_cast<size_t>(order.axes[static_cast<size_t>(i)])];
      if (name == "dp") dp_at = i;
      if (name == "pp") pp_at = i;
    }
    on_data = dp_at > pp_at && pp_at >= 0;
  }
  std::vector<int> shape(kMaxTextAxisCount, 1);
  shape[kMaxTextStage] = l.pp;
  shape[on_data ? kMaxTextData : kMaxTextFsdp] = rest;
  shape[kMaxTextContext] = l.cp;
  shape[kMaxTextTensor] = l.tp;
  shape[kMaxTextExpert] = l.ep;
  return shape;
}

}  // namespace foldplan::export_util
