#include "validate/plan_input.h"

#include <optional>
#include <set>

#include "core/formats.h"
#include "core/json_check.h"

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
    const std::string kind_pointer = pointer + "/" + kind;
    if (!list.is_array() || list.empty()) {
      errors->Add(kind_pointer, "expected a non-empty array of groups, found " +
                                    DescribeJsonValue(list));
      continue;
    }
    GroupList groups;
    std::vector<int> seen(world, 0);
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
        if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() >= world) {
          errors->Add(group_pointer + "/" + std::to_string(i),
                      "expected a rank in [0, " + std::to_string(world - 1) + "], found " +
                          DescribeJsonValue(r));
          ok = false;
          break;
        }
        const int rank = r.get<int>();
        if (++seen[rank] > 1 && PartitionsWorld(kind)) {
          errors->Add(group_pointer + "/" + std::to_string(i),
                      "rank " + std::to_string(rank) + " is in more than one " + kind + " group");
          ok = false;
          break;
        }
        ranks.push_back(rank);
      }
      if (ok) groups.push_back(std::move(ranks));
    }
    if (!ok) continue;
    if (PartitionsWorld(kind)) {
      for (int r = 0; r < world; ++r) {
        if (seen[r] == 0) {
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

// Reads the rank map fields foldbench uses from `value` at `pointer`
// ("" for a rank map file, "/rank_map" inside a plan). Unknown keys are
// ignored, as doc/rankmap.md asks of a loader.
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
  ReadGroups(value.at("groups"), map.Pointer("groups"), out->world_size, errors, out);
  if (errors->empty() && !out->groups.contains("cp")) {
    errors->Add(map.Pointer("groups") + "/cp", "missing; expected the context-parallel groups");
  }
  if (errors->empty() &&
      static_cast<int64_t>(out->groups["cp"].front().size()) != out->degrees["cp"]) {
    errors->Add(map.Pointer("groups") + "/cp",
                "groups of " + std::to_string(out->groups["cp"].front().size()) +
                    " ranks, but /degrees/cp is " + std::to_string(out->degrees["cp"]));
  }
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
  if (errors->empty() && out->degrees["mbs"] != out->shapes.mbs) {
    errors->Add("/rank_map/degrees/mbs", "is " + std::to_string(out->degrees["mbs"]) +
                                             " but /candidates/0/layout/mbs is " +
                                             std::to_string(out->shapes.mbs));
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
  if (out.schema == kPlanSchema) {
    ReadPlan(doc, &errors, &out);
  } else if (out.schema == kRankMapSchema) {
    ReadRankMap(doc, "", &errors, &out);
  } else {
    errors.Add("/schema", std::string("expected \"") + kPlanSchema + "\" or \"" +
                              kRankMapSchema + "\", found \"" + out.schema + "\"");
  }
  if (!errors.empty()) return errors.status();
  return out;
}

Result<BenchInput> ReadBenchInput(const std::string& path) {
  auto doc = ParseJsonFile(path);
  if (!doc.ok()) return doc.status();
  return ParseBenchInput(doc.value(), path);
}

Status CheckWorldSize(const BenchInput& input, int mpi_world_size) {
  if (input.world_size == mpi_world_size) return Status();
  return Status::Error(input.file + ": the plan is for " + std::to_string(input.world_size) +
                       " ranks but MPI started " + std::to_string(mpi_world_size) +
                       "; run with -np " + std::to_string(input.world_size));
}

}  // namespace foldplan::validate
