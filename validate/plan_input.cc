#include "validate/plan_input.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <string_view>

#include "core/atomic_file.h"
#include "core/formats.h"
#include "core/json_check.h"
#include "core/order_string.h"
#include "core/quoted_text.h"

namespace foldplan::validate {
namespace {

using nlohmann::json;

// Shapes (heads, head dims, experts, ...) are bounded as generously as the world.
constexpr int64_t kMaxShape = kMaxWorldSize;

// Group kinds whose groups partition the world (every rank in exactly one
// group). `embedding` and `position_embedding` hold only some ranks.
bool PartitionsWorld(const std::string& kind) {
  return kind != "embedding" && kind != "position_embedding";
}

void ReadGroups(const json& groups_json, const std::string& pointer, int world,
                JsonErrors* errors, BenchInput* out) {
  if (!groups_json.is_object()) {
    errors->Add(pointer, "expected an object of group lists, found " +
                             DescribeJsonValue(groups_json));
    return;
  }
  for (const auto& [kind, list] : groups_json.items()) {
    const std::string kind_pointer = pointer + "/" + EscapePointerToken(kind);
    if (!list.is_array() || list.empty()) {
      errors->Add(kind_pointer, "expected a non-empty array of groups, found " +
                                    DescribeJsonValue(list));
      continue;
    }
    GroupList groups;
    // The group that last listed each rank (-1: none yet).
    std::vector<int64_t> group_of(static_cast<size_t>(world), -1);
    bool ok = true;
    for (size_t g = 0; g < list.size() && ok; ++g) {
      const std::string group_pointer = kind_pointer + "/" + std::to_string(g);
      if (!list[g].is_array() || list[g].empty()) {
        errors->Add(group_pointer, "expected a non-empty array of ranks, found " +
                                       DescribeJsonValue(list[g]));
        ok = false;
        break;
      }
      std::vector<int> ranks;
      for (size_t i = 0; i < list[g].size(); ++i) {
        const json& r = list[g][i];
        const std::string rank_pointer = group_pointer + "/" + std::to_string(i);
        if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() >= world) {
          errors->Add(rank_pointer, "expected a rank in [0, " + std::to_string(world - 1) +
                                        "], found " + DescribeJsonValue(r));
          ok = false;
          break;
        }
        const int rank = r.get<int>();
        // A rank twice in one group would be two members of one communicator.
        if (group_of[rank] == static_cast<int64_t>(g)) {
          errors->Add(rank_pointer, "rank " + std::to_string(rank) + " is listed twice in " +
                                        "this " + kind + " group");
          ok = false;
          break;
        }
        if (group_of[rank] >= 0 && PartitionsWorld(kind)) {
          errors->Add(rank_pointer,
                      "rank " + std::to_string(rank) + " is in more than one " + kind + " group");
          ok = false;
          break;
        }
        group_of[rank] = static_cast<int64_t>(g);
        ranks.push_back(rank);
      }
      if (ok) groups.push_back(std::move(ranks));
    }
    if (!ok) continue;
    if (PartitionsWorld(kind)) {
      for (int r = 0; r < world; ++r) {
        if (group_of[r] < 0) {
          errors->Add(kind_pointer, "rank " + std::to_string(r) + " is in no " + kind + " group");
          ok = false;
          break;
        }
      }
      // Collectives are timed per group kind; groups of unequal size would
      // make one row of the report mean two different things.
      for (const auto& g : groups) {
        if (ok && g.size() != groups.front().size()) {
          errors->Add(kind_pointer, "groups of unequal size (" +
                                        std::to_string(groups.front().size()) + " and " +
                                        std::to_string(g.size()) + ")");
          ok = false;
        }
      }
    }
    if (ok) out->groups[kind] = std::move(groups);
  }
}

// The degrees whose product is the size of each kind's groups (Megatron's
// dense and expert views, doc/trainers.md). Kinds not listed (embedding,
// position_embedding, any a newer writer adds) are only range-checked.
// The degrees are also the axes a kind's groups vary in (doc/folding.md
// section 3), in the dense view (tp, cp, dp, pp) or the expert view (etp,
// ep, edp, pp).
struct KindDegrees {
  const char* kind;
  std::vector<const char*> degrees;
  bool expert_view = false;
};
const std::vector<KindDegrees>& KindsWithDegrees() {
  static const std::vector<KindDegrees> kinds = {
      {"tp", {"tp"}},           {"cp", {"cp"}},
      {"dp", {"dp"}},           {"dp_cp", {"dp", "cp"}},
      {"tp_cp", {"tp", "cp"}},  {"tp_dp", {"tp", "dp"}},
      {"tp_dp_cp", {"tp", "dp", "cp"}},
      {"mp", {"tp", "pp"}},     {"pp", {"pp"}},
      {"ep", {"ep"}, true},     {"etp", {"etp"}, true},
      {"tp_ep", {"etp", "ep"}, true}, {"tp_ep_pp", {"etp", "ep", "pp"}, true},
      {"edp", {"edp"}, true},
  };
  return kinds;
}

// Product of the named degrees, saturating just above the largest world so
// that nonsense degrees cannot overflow.
int64_t DegreeProduct(const BenchInput& in, const std::vector<const char*>& keys) {
  int64_t product = 1;
  for (const char* key : keys) product = std::min(product * in.degrees.at(key), kMaxWorldSize + 1);
  return product;
}

// "dp x cp = 2 x 2 = 4".
std::string ProductText(const BenchInput& in, const std::vector<const char*>& keys) {
  std::string names, values;
  for (const char* key : keys) {
    names += std::string(names.empty() ? "" : " x ") + key;
    values += (values.empty() ? "" : " x ") + std::to_string(in.degrees.at(key));
  }
  return names + " = " + values + " = " + std::to_string(DegreeProduct(in, keys));
}

// "/rank_map/degrees/cp = 2", or "/rank_map/degrees dp x cp = 2 x 2 = 4".
std::string DegreeText(const BenchInput& in, const std::vector<const char*>& keys,
                       const std::string& degrees_pointer) {
  if (keys.size() == 1) {
    return degrees_pointer + "/" + keys[0] + " = " + std::to_string(in.degrees.at(keys[0]));
  }
  return degrees_pointer + " " + ProductText(in, keys);
}

std::string Plural(int64_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// Each kind's groups against the degrees: an op sizes its buffers from the
// degrees and moves data over the groups, so the two must agree (a plan
// with ep 2 in its degrees and ep groups of 4 overran the dispatcher's
// count buffer).
void CheckDegrees(const std::string& map_pointer, JsonErrors* errors, BenchInput* out) {
  const std::string degrees_pointer = map_pointer + "/degrees";
  const int64_t world = out->world_size;
  for (const std::vector<const char*>& keys :
       {std::vector<const char*>{"tp", "cp", "dp", "pp"},
        std::vector<const char*>{"etp", "ep", "edp", "pp"}}) {
    if (DegreeProduct(*out, keys) != world) {
      errors->Add(degrees_pointer, ProductText(*out, keys) + ", but " + map_pointer +
                                       "/world_size is " + std::to_string(world));
    }
  }
  for (const KindDegrees& k : KindsWithDegrees()) {
    const auto it = out->groups.find(k.kind);
    if (it == out->groups.end()) continue;
    const int64_t size = DegreeProduct(*out, k.degrees);
    const int64_t found_size = static_cast<int64_t>(it->second.front().size());
    const int64_t found_count = static_cast<int64_t>(it->second.size());
    if (found_size == size && found_count * size == world) continue;
    std::string asks = world % size == 0 ? "asks for " + Plural(world / size, "group") + " of " +
                                               Plural(size, "rank")
                                         : "does not divide the world of " +
                                               Plural(world, "rank");
    errors->Add(map_pointer + "/groups/" + k.kind,
                Plural(found_count, "group") + " of " + Plural(found_size, "rank") + ", but " +
                    DegreeText(*out, k.degrees, degrees_pointer) + " " + asks);
  }
}

// Text from the file as a message may show it: as it is when short and
// printable, else quoted with its control bytes escaped and cut
// (core/quoted_text.h).
std::string SafeText(const std::string& text) {
  bool plain = text.size() <= 60;
  for (char c : text) plain = plain && c >= 0x20 && c < 0x7f;
  return plain ? text : Quoted(text, 60);
}

// The default order (Megatron's), for a rank map that names none.
constexpr const char* kDefaultOrder = "tp-cp-ep-dp-pp";

// One view's mixed-radix numbering (doc/folding.md section 3): each view
// axis's size and stride under the order.
struct ViewNumbering {
  std::vector<const char*> axes;  // degree names, e.g. tp cp dp pp
  std::vector<int64_t> sizes, strides;
  int64_t Coordinate(int64_t rank, size_t axis) const {
    return rank / strides[axis] % sizes[axis];
  }
};

// The degree each order token names in one view: the dense view has no ep
// axis and the expert view no cp (size 1: no stride).
const char* ViewAxis(std::string_view token, bool expert_view) {
  if (token == "tp") return expert_view ? "etp" : "tp";
  if (token == "cp") return expert_view ? nullptr : "cp";
  if (token == "ep") return expert_view ? "ep" : nullptr;
  if (token == "dp") return expert_view ? "edp" : "dp";
  return "pp";
}

// Builds both views' numbering from the order, or explains why the order
// cannot number this rank map (at `order_pointer`).
bool NumberViews(const BenchInput& in, const std::string& order, const std::string& order_pointer,
                 JsonErrors* errors, ViewNumbering* dense, ViewNumbering* expert) {
  const OrderString parsed = ParseOrderString(order);
  if (!parsed.ok()) {
    errors->Add(order_pointer, "expected an order of tp, cp, ep, dp and pp joined by '-' "
                               "(tp-cp-ep-dp-pp), found " + DescribeJsonValue(json(order)));
    return false;
  }
  for (bool expert_view : {false, true}) {
    ViewNumbering& view = expert_view ? *expert : *dense;
    int64_t stride = 1;
    auto add = [&](std::string_view token) {
      const char* axis = ViewAxis(token, expert_view);
      if (axis == nullptr) return;
      view.axes.push_back(axis);
      view.sizes.push_back(in.degrees.at(axis));
      view.strides.push_back(stride);
      stride *= in.degrees.at(axis);  // the product is the world, checked before
    };
    for (int i = 0; i < parsed.count; ++i) add(kOrderAxisNames[parsed.axes[i]]);
    for (int axis = 0; axis < static_cast<int>(kOrderAxisNames.size()); ++axis) {
      if (parsed.Has(axis)) continue;
      const char* name = ViewAxis(kOrderAxisNames[axis], expert_view);
      if (name != nullptr && in.degrees.at(name) > 1) {
        errors->Add(order_pointer, "\"" + order + "\" leaves out " +
                                       std::string(kOrderAxisNames[axis]) + ", whose degree " +
                                       name + " is " + std::to_string(in.degrees.at(name)));
        return false;
      }
      add(kOrderAxisNames[axis]);  // size 1: appended, as Megatron does
    }
  }
  return true;
}

size_t AxisIndex(const ViewNumbering& view, const char* axis) {
  for (size_t i = 0; i < view.axes.size(); ++i) {
    if (std::string_view(view.axes[i]) == axis) return i;
  }
  return view.axes.size();  // not reached: every view names its four axes
}

// "[0, 1, 2, 3]", at most 16 ranks shown.
std::string RankListText(const std::vector<int64_t>& ranks) {
  std::string text = "[";
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) {
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return text + (ranks.size() > 16 ? ", ...]" : "]");
}

// The groups must be those the layout's degrees and order generate
// (doc/folding.md): each kind's group holds the ranks that agree in every
// axis but the kind's own. With the sizes and partitions checked before,
// that is group equality (as sets: ops depend on membership, not on the
// order ranks are listed in). It implies what the folding asks: pp groups
// cross stages and no other kind does; tp x cp x dp and etp x ep x edp
// factor each stage. The first wrong group of each kind is named.
void CheckGroupsGenerated(const std::string& map_pointer, const std::string& order,
                          const std::string& order_pointer, JsonErrors* errors,
                          const BenchInput& in) {
  ViewNumbering dense, expert;
  if (!NumberViews(in, order, order_pointer, errors, &dense, &expert)) return;
  // Both views must give every rank the same pipeline stage.
  const size_t dense_pp = AxisIndex(dense, "pp"), expert_pp = AxisIndex(expert, "pp");
  for (int64_t r = 0; r < in.world_size; ++r) {
    if (dense.Coordinate(r, dense_pp) != expert.Coordinate(r, expert_pp)) {
      errors->Add(order_pointer,
                  "\"" + order + "\" puts rank " + std::to_string(r) + " in stage " +
                      std::to_string(dense.Coordinate(r, dense_pp)) + " of the dense view (tp x " +
                      "cp x dp) but stage " + std::to_string(expert.Coordinate(r, expert_pp)) +
                      " of the expert view (etp x ep x edp); each view must factor every stage");
      return;
    }
  }
  for (const KindDegrees& k : KindsWithDegrees()) {
    const auto it = in.groups.find(k.kind);
    if (it == in.groups.end()) continue;
    const ViewNumbering& view = k.expert_view ? expert : dense;
    std::vector<size_t> fixed;  // the axes a group of this kind holds constant
    for (size_t a = 0; a < view.axes.size(); ++a) {
      bool varies = false;
      for (const char* d : k.degrees) varies = varies || std::string_view(d) == view.axes[a];
      if (!varies) fixed.push_back(a);
    }
    const GroupList& groups = it->second;
    for (size_t g = 0; g < groups.size(); ++g) {
      const int64_t first = groups[g].front();
      for (int64_t r : groups[g]) {
        size_t bad = view.axes.size();
        for (size_t a : fixed) {
          if (view.Coordinate(r, a) != view.Coordinate(first, a)) {
            bad = a;
            break;
          }
        }
        if (bad == view.axes.size()) continue;
        std::vector<int64_t> expected;
        for (int64_t q = 0; q < in.world_size; ++q) {
          bool same = true;
          for (size_t a : fixed) same = same && view.Coordinate(q, a) == view.Coordinate(first, a);
          if (same) expected.push_back(q);
        }
        const std::string axis = view.axes[bad];
        std::string what = axis == "pp" ? "pipeline stages" : axis + " coordinates";
        errors->Add(map_pointer + "/groups/" + k.kind + "/" + std::to_string(g),
                    "ranks " + std::to_string(first) + " and " + std::to_string(r) + " are in " +
                        "different " + what + " (" +
                        std::to_string(view.Coordinate(first, bad)) + " and " +
                        std::to_string(view.Coordinate(r, bad)) + "), which a " + k.kind +
                        " group never spans" +
                        (axis == "pp" ? " (only pp groups cross stages)" : "") + "; order \"" +
                        order + "\" makes rank " + std::to_string(first) + "'s " + k.kind +
                        " group " + RankListText(expected));
        g = groups.size();  // the first wrong group of the kind is enough
        break;
      }
    }
  }
}

// The layout text ("tp=1,cp=2,...,order=...,world=8") must say what the
// rank map's degrees, order and world say: foldbench reads the degrees and
// groups, a reader of the file the text.
void CheckLayoutText(const std::string& map_pointer, const std::string& order,
                     const std::string& order_pointer, JsonErrors* errors, const BenchInput& in) {
  const std::string& text = in.layout_text;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    std::string rank_map_value, rank_map_field;
    if (key == "world") {
      rank_map_value = std::to_string(in.world_size);
      rank_map_field = map_pointer + "/world_size";
    } else if (key == "order") {
      rank_map_value = order;
      rank_map_field = order_pointer;
    } else if (in.degrees.contains(key)) {
      rank_map_value = std::to_string(in.degrees.at(key));
      rank_map_field = map_pointer + "/degrees/" + key;
    } else {
      continue;  // recipe keys (cp_style, placement, ...): not foldbench's
    }
    if (value != rank_map_value) {
      errors->Add(map_pointer + "/layout", "says " + key + "=" + SafeText(value) + " but " +
                                               rank_map_field + " is " + SafeText(rank_map_value));
    }
  }
}

// Reads the rank map fields foldbench uses from `value` at `pointer`
// ("" for a rank map file, "/rank_map" inside a plan). Unknown keys are
// ignored, as doc/trainers.md asks of a loader.
void ReadRankMap(const json& value, const std::string& pointer, JsonErrors* errors,
                 BenchInput* out) {
  CheckedObject map(value, pointer, errors);
  const std::string schema = map.String("schema");
  if (!schema.empty() && schema != kRankMapSchema) {
    errors->Add(map.Pointer("schema"), std::string("expected \"") + kRankMapSchema +
                                           "\", found \"" + schema + "\"");
    return;
  }
  out->layout_text = map.String("layout");
  out->world_size = static_cast<int>(map.Int("world_size", 1, kMaxWorldSize));
  CheckedObject degrees = map.Object("degrees");
  for (const char* key : {"pp", "vpp", "dp", "cp", "tp", "ep", "etp", "edp", "mbs"}) {
    out->degrees[key] = degrees.Int(key, 1, kMaxWorldSize);
  }
  if (!errors->empty()) return;  // group ranks are checked against world_size
  if (!map.Has("groups")) {
    errors->Add(map.Pointer("groups"), "missing; expected an object of group lists");
    return;
  }
  out->rank_map_pointer = pointer;
  ReadGroups(value.at("groups"), map.Pointer("groups"), out->world_size, errors, out);
  if (errors->empty()) CheckDegrees(pointer, errors, out);
  if (!errors->empty()) return;
  // The order: the rank map's own, else the layout text's, else Megatron's.
  std::string order_pointer = map.Pointer("order");
  if (map.Has("order")) {
    out->order = map.String("order");
  } else if (const size_t at = out->layout_text.find("order="); at != std::string::npos) {
    out->order = out->layout_text.substr(at + 6, out->layout_text.find(',', at) - (at + 6));
    order_pointer = map.Pointer("layout");
  } else {
    out->order = kDefaultOrder;
  }
  if (!errors->empty()) return;
  CheckLayoutText(pointer, out->order, order_pointer, errors, *out);
  if (errors->empty()) CheckGroupsGenerated(pointer, out->order, order_pointer, errors, *out);
}

void ReadPlan(const json& doc, JsonErrors* errors, BenchInput* out) {
  CheckedObject root(doc, "", errors);
  // The first candidate is the one the rank map belongs to.
  if (!doc.contains("candidates") || !doc["candidates"].is_array() ||
      doc["candidates"].empty()) {
    errors->Add("/candidates", "expected a non-empty array of candidates");
    return;
  }
  CheckedObject candidate(doc["candidates"][0], "/candidates/0", errors);
  CheckedObject layout = candidate.Object("layout");
  out->shapes.mbs = layout.Int("mbs", 1, kMaxShape);
  // What the candidate's layout says of the rank map, where it says it.
  std::map<std::string, int64_t> candidate_degrees;
  for (const char* key : {"tp", "cp", "dp", "pp", "vpp", "ep", "etp", "edp"}) {
    if (layout.Has(key)) candidate_degrees[key] = layout.Int(key, 1, kMaxWorldSize);
  }
  const std::string candidate_order = layout.Has("order") ? layout.String("order") : "";

  CheckedObject inputs = root.Object("inputs");
  CheckedObject model = inputs.Object("model").Object("spec");
  out->shapes.heads = model.Int("heads", 1, kMaxShape);
  out->shapes.kv_heads = model.Int("kv_heads", 1, kMaxShape);
  out->shapes.head_dim = model.Int("head_dim", 1, kMaxShape);
  out->shapes.hidden = model.Int("hidden", 1, int64_t{1} << 30);
  out->shapes.ffn_hidden = model.Int("ffn_hidden", 0, int64_t{1} << 30);
  if (std::optional<CheckedObject> moe = model.OptionalObject("moe")) {
    out->shapes.experts = moe->Int("experts", 1, kMaxShape);
    out->shapes.top_k = moe->Int("top_k", 1, kMaxShape);
    out->shapes.moe_ffn_hidden = moe->Int("ffn_hidden", 1, int64_t{1} << 30);
    if (out->shapes.top_k > out->shapes.experts) {
      errors->Add("/inputs/model/spec/moe/top_k", "is " + std::to_string(out->shapes.top_k) +
                                                      ", more than the " +
                                                      std::to_string(out->shapes.experts) +
                                                      " experts");
    }
  }
  CheckedObject job = inputs.Object("job").Object("spec");
  out->shapes.seq_len = job.Int("seq_len", 1, int64_t{1} << 30);

  if (!doc.contains("rank_map") || !doc["rank_map"].is_object()) {
    std::string why = "expected the first candidate's rank map";
    if (doc.contains("rank_map_error") && doc["rank_map_error"].is_string()) {
      why += "; the plan says: " + doc["rank_map_error"].get<std::string>();
    }
    errors->Add("/rank_map", why);
    return;
  }
  ReadRankMap(doc["rank_map"], "/rank_map", errors, out);
  // The dispatcher gives every EP rank experts / ep experts.
  if (errors->empty() && out->shapes.experts % out->degrees["ep"] != 0) {
    errors->Add("/inputs/model/spec/moe/experts",
                "is " + std::to_string(out->shapes.experts) +
                    ", which does not divide over /rank_map/degrees/ep = " +
                    std::to_string(out->degrees["ep"]));
  }
  if (errors->empty() && out->degrees["mbs"] != out->shapes.mbs) {
    errors->Add("/rank_map/degrees/mbs", "is " + std::to_string(out->degrees["mbs"]) +
                                             " but /candidates/0/layout/mbs is " +
                                             std::to_string(out->shapes.mbs));
  }
  if (errors->empty()) {
    for (const auto& [key, degree] : candidate_degrees) {
      if (degree != out->degrees.at(key)) {
        errors->Add("/candidates/0/layout/" + key,
                    "is " + std::to_string(degree) + " but /rank_map/degrees/" + key + " is " +
                        std::to_string(out->degrees.at(key)));
      }
    }
    if (!candidate_order.empty() && candidate_order != out->order) {
      errors->Add("/candidates/0/layout/order", "is " + DescribeJsonValue(json(candidate_order)) +
                                                    " but the rank map's groups are numbered by \"" +
                                                    out->order + "\"");
    }
  }
  out->has_shapes = errors->empty();
}

}  // namespace

Result<BenchInput> ParseBenchInput(const json& doc, const std::string& file) {
  JsonErrors errors(file);
  BenchInput out;
  out.file = file;
  if (!doc.is_object() || !doc.contains("schema") || !doc["schema"].is_string()) {
    errors.Add("/schema", std::string("missing; expected \"") + kPlanSchema + "\" or \"" +
                              kRankMapSchema + "\"");
    return errors.status();
  }
  out.schema = doc["schema"].get<std::string>();
  // Every access above is checked; this only turns a slip into an error
  // rather than a crash on every rank.
  try {
    if (out.schema == kPlanSchema) {
      ReadPlan(doc, &errors, &out);
    } else if (out.schema == kRankMapSchema) {
      ReadRankMap(doc, "", &errors, &out);
    } else {
      errors.Add("/schema", std::string("expected \"") + kPlanSchema + "\" or \"" +
                                kRankMapSchema + "\", found \"" + out.schema + "\"");
    }
  } catch (const std::exception& e) {
    return Status::Error(file + ": cannot read the plan: " + e.what());
  }
  if (!errors.empty()) return errors.status();
  return out;
}

Result<BenchInput> ReadPlanText(const std::string& text, const std::string& file_name) {
  auto doc = ParseJsonText(text, file_name);
  if (!doc.ok()) return doc.status();
  return ParseBenchInput(doc.value(), file_name);
}

Result<BenchInput> ReadBenchInput(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ReadPlanText(text.value(), path);
}

Status CheckWorldSize(const BenchInput& input, int mpi_world_size) {
  if (input.world_size == mpi_world_size) return Status();
  return Status::Error(input.file + ": the plan is for " + std::to_string(input.world_size) +
                       " ranks but MPI started " + std::to_string(mpi_world_size) +
                       "; run with -np " + std::to_string(input.world_size));
}

}  // namespace foldplan::validate
