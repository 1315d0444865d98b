// Reading a `foldplan.recipe/v1` file (doc/formats.md#recipe): the recipe's
// own fields, then the cluster, model and base job it names, loaded, and
// the job with the recipe's settings applied. Every error names the recipe
// file and the pointer of the recipe field to change; a job setting's error
// is the job format's own, under /job.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/json_check.h"
#include "inputs/loader.h"
#include "inputs/parse_common.h"
#include "inputs/recipe.h"

namespace foldplan {
namespace {

using inputs_internal::IntField;
using inputs_internal::LooksLikePath;
using nlohmann::json;

// A job field the recipe may not set, and why (another recipe field gives
// it, or it has no meaning here); nullptr for a field it may set.
const char* ReservedJobField(const std::string& key) {
  if (key == "schema") return "the recipe's job settings carry no schema (the base job's applies)";
  if (key == "description") return "describe the recipe in its own /description";
  if (key == "world_size") return "the world size is /cluster/gpus";
  if (key == "gpus_per_domain") return "the GPUs used per NVLink domain are /cluster/gpus_per_domain";
  return nullptr;
}

// A name stays a name; a relative path is relative to the recipe's folder.
std::string Locate(const std::string& name_or_path, const std::string& file) {
  if (!LooksLikePath(name_or_path) || std::filesystem::path(name_or_path).is_absolute()) {
    return name_or_path;
  }
  const std::filesystem::path dir = std::filesystem::path(file).parent_path();
  return dir.empty() ? name_or_path : (dir / name_or_path).string();
}

// A required string that must not be empty; `raw` is the object read.
std::string NonEmptyString(CheckedObject& object, const json& raw, const std::string& key,
                           const std::string& what) {
  std::string value = object.String(key);
  const auto it = raw.find(key);
  if (it != raw.end() && it->is_string() && value.empty()) {
    object.errors()->Add(object.Pointer(key), "expected " + what + ", found the string \"\"");
  }
  return value;
}

// The file a cluster, model or job name or path stands for, or nullopt with
// the error recorded at `pointer`.
std::optional<std::string> Resolve(InputKind kind, const std::string& name, const std::string& file,
                                   const std::string& pointer, JsonErrors& errors) {
  auto path = ResolveInput(kind, Locate(name, file));
  if (path.ok()) return path.value();
  const std::string k = Name(kind);
  errors.Add(pointer, "expected a shipped " + k + " name or a path to a " + k + " file, found \"" + name +
                          "\" (" + path.status().message() + ")");
  return std::nullopt;
}

template <class Spec>
std::optional<Spec> LoadAt(InputKind kind, const std::string& name, const std::string& file,
                           const std::string& pointer, JsonErrors& errors,
                           Result<Spec> (*load)(const std::string&)) {
  const auto path = Resolve(kind, name, file, pointer, errors);
  if (!path) return std::nullopt;
  auto spec = load(*path);
  if (spec.ok()) return std::move(spec).value();
  errors.Add(pointer, "expected a " + std::string(Name(kind)) + " that loads, found \"" + name +
                          "\", whose file has errors:\n" + spec.status().message());
  return std::nullopt;
}

void ReadCluster(std::optional<CheckedObject> object, const json& input, RecipeSpec& r) {
  if (!object) return;
  CheckedObject& cluster = *object;
  r.cluster_name = NonEmptyString(cluster, input.at("cluster"), "name", "a shipped cluster name or a path");
  r.gpus = IntField(cluster, "gpus", 1, int(kMaxWorldSize));
  r.gpus_per_domain = IntField(cluster, "gpus_per_domain", 0, int(kMaxWorldSize), 0);
  cluster.Finish();
}

// The job object: "base" and the job fields the recipe sets (checked later,
// by the job format's own reader).
bool ReadJob(std::optional<CheckedObject> object, const json& input, RecipeSpec& r, JsonErrors& errors) {
  if (!object) return false;
  CheckedObject& job = *object;
  const json& fields = input.at("job");
  r.job_base = job.String("base", "default");
  const auto base = fields.find("base");
  if (base != fields.end() && base->is_string() && r.job_base.empty()) {
    errors.Add(job.Pointer("base"), "expected a shipped job name or a path, found the string \"\"");
  }
  bool ok = base == fields.end() || (base->is_string() && !r.job_base.empty());
  for (auto it = fields.begin(); it != fields.end(); ++it) {
    if (it.key() == "base") continue;
    if (const char* why = ReservedJobField(it.key())) {
      errors.Add(job.Pointer(it.key()), std::string("not a job setting a recipe may give: ") + why);
      ok = false;
      continue;
    }
    r.job_settings[it.key()] = it.value();
  }
  return ok;
}

std::vector<std::string> ReadNotes(CheckedObject& root) {
  CheckedObject::StringListRules rules;
  rules.list_expected = "a non-empty list of strings";
  rules.item_expected = "a string";
  rules.valid_expected = "a non-empty string";
  rules.problem = [](const std::string& s) { return s.empty() ? std::string("empty") : std::string(); };
  return root.StringList("notes", rules, {});
}

// Layout keys (planner/layout.h's syntax); inputs/ cannot ask the planner,
// so the list is the layout keys a recipe can leave unstated.
std::vector<std::string> ReadInferred(CheckedObject& root) {
  CheckedObject::StringListRules rules;
  rules.list_expected = "a non-empty list of layout keys";
  rules.item_expected = "a layout key";
  rules.valid_expected = "a layout key such as \"recompute\"";
  rules.problem = [](const std::string& s) {
    static const char* const kKeys[] = {"tp", "cp", "pp", "ep", "etp", "vpp", "mbs", "order", "cp_style",
                                        "recompute", "placement", "dispatcher", "a2a_overlap", "precision",
                                        "fsdp", "tp_overlap", "cuda_graphs", "schedule", "stages", "pp_layout"};
    for (const char* k : kKeys)
      if (s == k) return std::string();
    return std::string("not a layout key");
  };
  return root.StringList("inferred", rules, {});
}

std::vector<RecipeFeature> ReadNotModelled(CheckedObject& root, JsonErrors& errors) {
  const std::vector<std::string> names = root.EnumList("not_modelled", {"activation_offloading"}, {});
  inputs_internal::CheckNoRepeats(names, "/not_modelled", &errors, &inputs_internal::DescribeString);
  std::vector<RecipeFeature> out;  // each once, in the file's order
  for (const std::string& name : names) {
    for (int f = 0; f < kRecipeFeatureCount; ++f) {
      const auto feature = RecipeFeature(f);
      if (name == Name(feature) && std::find(out.begin(), out.end(), feature) == out.end()) out.push_back(feature);
    }
  }
  return out;
}

// Moves each line of the merged job's errors under the recipe's /job. A
// line reads "<label>: POINTER: what"; the pointer starts with the key of
// one of the merged job's fields. A field the recipe does not set came from
// the base job, and the message says so.
void AddJobErrors(const Status& status, const std::string& label, const json& merged,
                  const RecipeSpec& r, JsonErrors& errors) {
  const std::string& text = status.message();
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.compare(0, label.size() + 2, label + ": ") != 0) {
      errors.Add("/job", line);  // not a JsonErrors line; keep it whole
      continue;
    }
    const std::string rest = line.substr(label.size() + 2);
    std::string pointer, what = rest, key;
    for (auto it = merged.begin(); it != merged.end(); ++it) {
      const std::string head = "/" + EscapePointerToken(it.key());
      if (rest.compare(0, head.size(), head) != 0) continue;
      if (rest.size() > head.size() && rest[head.size()] != ':' && rest[head.size()] != '/') continue;
      const size_t colon = rest.find(": ", head.size());
      if (colon == std::string::npos) continue;
      pointer = rest.substr(0, colon);
      what = rest.substr(colon + 2);
      key = it.key();
      break;
    }
    if (!key.empty() && !r.job_settings.contains(key)) {
      what += " (from base job \"" + r.job_base + "\"; set " + key + " in /job to change it)";
    } else if (key.empty() && rest.compare(0, 3, "/: ") == 0) {
      what = rest.substr(3);
    }
    errors.Add("/job" + pointer, what);
  }
}

// The base job with the recipe's settings applied, read by the job format's
// reader so that every setting is checked exactly as in a job file; sets
// r.job_base_source.
std::optional<JobSpec> ResolveJob(RecipeSpec& r, const std::string& file, JsonErrors& errors) {
  const auto path = Resolve(InputKind::kJob, r.job_base, file, "/job/base", errors);
  if (!path) return std::nullopt;
  r.job_base_source = *path;
  // Read once; the base job is checked alone first, so that its own errors
  // name its file.
  auto base_json = ParseJsonFile(*path);
  const Result<JobSpec> base = base_json.ok() ? ParseJob(base_json.value(), *path) : base_json.status();
  if (!base.ok()) {
    errors.Add("/job/base", "expected a job that loads, found \"" + r.job_base + "\", whose file has errors:\n" +
                                base.status().message());
    return std::nullopt;
  }
  json merged = base_json.value();
  for (auto it = r.job_settings.begin(); it != r.job_settings.end(); ++it) merged[it.key()] = it.value();
  const std::string label = "job of " + file;
  auto job = ParseJob(merged, label);
  if (!job.ok()) {
    AddJobErrors(job.status(), label, merged, r, errors);
    return std::nullopt;
  }
  JobSpec j = std::move(job).value();
  j.name = r.name;
  j.source = file;
  j.description = "recipe " + r.name + ": base job \"" + r.job_base + "\" with the recipe's settings";
  j.world_size = r.gpus;
  j.gpus_per_domain = r.gpus_per_domain;
  return j;
}

// The GPUs the recipe uses must exist in the cluster it names.
void CheckGpus(const RecipeSpec& r, JsonErrors& errors) {
  const ClusterSpec& c = r.cluster;
  int available = c.total_gpus();
  std::string part_used;  // which GPUs of each domain, when not all
  if (r.gpus_per_domain > 0) {
    Result<ClusterSpec> part = UsingGpusPerDomain(c, r.gpus_per_domain);
    if (!part.ok()) {
      errors.Add("/cluster/gpus_per_domain", "cluster " + c.name + ": " + part.status().message() +
                                                 ", found " + std::to_string(r.gpus_per_domain));
      return;
    }
    available = part->total_gpus();
    part_used = " with " + std::to_string(r.gpus_per_domain) + " of each " + std::to_string(c.nvlink_domain_gpus) +
                "-GPU NVLink domain";
  }
  if (r.gpus > available) {
    errors.Add("/cluster/gpus", "expected at most the " + std::to_string(available) + " GPUs of cluster " + c.name +
                                    part_used + ", found " + std::to_string(r.gpus));
  }
}

}  // namespace

Result<RecipeSpec> ParseRecipe(const json& input, const std::string& file) {
  JsonErrors errors(file);
  CheckedObject root(input, "", &errors);
  if (!inputs_internal::CheckSchema(root, kRecipeSchema)) return errors.status();

  RecipeSpec r;
  r.name = inputs_internal::StemOf(file);
  r.source = file;
  r.description = root.String("description", "");
  r.citation = NonEmptyString(root, input, "source", "a citation of where the recipe is published");
  ReadCluster(inputs_internal::RequiredObject(root, "cluster"), input, r);
  r.model_name = NonEmptyString(root, input, "model", "a shipped model name or a path");
  const bool job_ok = ReadJob(inputs_internal::RequiredObject(root, "job"), input, r, errors);
  r.layout = NonEmptyString(root, input, "layout", "a layout such as \"tp=2,pp=8,vpp=4,ep=32,etp=1\"");
  r.notes = ReadNotes(root);
  r.not_modelled = ReadNotModelled(root, errors);
  r.inferred = ReadInferred(root);
  root.Finish();

  // What the names stand for, each loaded and checked.
  if (!r.cluster_name.empty()) {
    if (auto c = LoadAt(InputKind::kCluster, r.cluster_name, file, "/cluster/name", errors, &LoadCluster)) {
      r.cluster = std::move(*c);
      CheckGpus(r, errors);
    }
  }
  if (!r.model_name.empty()) {
    if (auto m = LoadAt(InputKind::kModel, r.model_name, file, "/model", errors, &LoadModel)) {
      r.model = std::move(*m);
    }
  }
  if (job_ok) {
    if (auto j = ResolveJob(r, file, errors)) r.job = std::move(*j);
  }
  if (!errors.empty()) return errors.status();
  return r;
}

}  // namespace foldplan
