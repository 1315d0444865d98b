#include "planner/export_util.h"

#include <algorithm>
#include <cstdint>
#include <sstream>

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
