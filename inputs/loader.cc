// Finding and loading shipped or user-given input files.
#include "inputs/loader.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "core/json_check.h"
#include "core/nearest_name.h"
#include "inputs/parse_common.h"
#include "inputs/recipe.h"

namespace foldplan {
namespace {

namespace fs = std::filesystem;
using inputs_internal::LooksLikePath;

const char* KindDir(InputKind kind) {
  switch (kind) {
    case InputKind::kCluster: return "clusters";
    case InputKind::kModel: return "models";
    case InputKind::kJob: return "jobs";
    case InputKind::kRecipe: return "recipes";
  }
  return "";
}

std::string ShippedDir(InputKind kind) { return (fs::path(DataDir()) / KindDir(kind)).string(); }

// Stems of the *.json files in the kind's shipped directory, sorted.
std::vector<std::string> ShippedNames(InputKind kind) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(ShippedDir(kind), ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() == ".json" && it->is_regular_file(ec)) names.push_back(p.stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none)" : out;
}

std::string DescriptionOf(const nlohmann::json& json) {
  if (!json.is_object()) return "";
  auto it = json.find("description");
  return it != json.end() && it->is_string() ? it->get<std::string>() : "";
}

template <class Spec>
Result<Spec> Load(InputKind kind, const std::string& name_or_path,
                  Result<Spec> (*parse)(const nlohmann::json&, const std::string&)) {
  auto path = ResolveInput(kind, name_or_path);
  if (!path.ok()) return path.status();
  auto json = ParseJsonFile(path.value());
  if (!json.ok()) return json.status();
  return parse(json.value(), path.value());
}

}  // namespace

const char* Name(InputKind kind) {
  switch (kind) {
    case InputKind::kCluster: return "cluster";
    case InputKind::kModel: return "model";
    case InputKind::kJob: return "job";
    case InputKind::kRecipe: return "recipe";
  }
  return "?";
}

std::string DataDir() {
  if (const char* env = std::getenv("FOLDPLAN_DATA_DIR"); env && *env) return env;
  std::error_code ec;
  if (fs::is_directory(FOLDPLAN_SOURCE_DATA_DIR, ec)) return FOLDPLAN_SOURCE_DATA_DIR;
  // An installed binary: <prefix>/bin/foldplan with data in <prefix>/share.
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return FOLDPLAN_SOURCE_DATA_DIR;  // nothing better to offer; errors will name it
  return (exe.parent_path() / ".." / "share" / "foldplan" / "data").lexically_normal().string();
}

Result<std::vector<ShippedInput>> ListShipped(InputKind kind) {
  const std::string dir = ShippedDir(kind);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::Error(dir + ": no shipped " + Name(kind) +
                         " directory (set FOLDPLAN_DATA_DIR to the data folder)");
  }
  std::vector<ShippedInput> out;
  for (const std::string& name : ShippedNames(kind)) {
    const std::string path = (fs::path(dir) / (name + ".json")).string();
    auto json = ParseJsonFile(path);
    if (!json.ok()) return json.status();
    out.push_back(ShippedInput{kind, name, path, DescriptionOf(json.value())});
  }
  return out;
}

Result<std::string> ResolveInput(InputKind kind, const std::string& name_or_path) {
  if (name_or_path.empty()) {
    return Status::Error(std::string("empty ") + Name(kind) + " name; shipped " + Name(kind) +
                         "s: " + Joined(ShippedNames(kind)));
  }
  std::error_code ec;
  if (LooksLikePath(name_or_path)) {
    // One that exists but is not a regular file (a FIFO, a device, a
    // directory) is refused by the reader, which says what it is.
    if (!fs::exists(fs::symlink_status(name_or_path, ec)) && !fs::exists(name_or_path, ec)) {
      return Status::Error(name_or_path + ": no such " + Name(kind) + " file");
    }
    return name_or_path;
  }
  const std::string path = (fs::path(ShippedDir(kind)) / (name_or_path + ".json")).string();
  if (fs::is_regular_file(path, ec)) return path;
  return Status::Error(std::string("unknown ") + Name(kind) + " \"" + name_or_path +
                       "\"; shipped " + Name(kind) + "s: " + Joined(ShippedNames(kind)) +
                       " (in " + ShippedDir(kind) + "); or give a path to a .json file" +
                       DidYouMean(name_or_path, ShippedNames(kind)));
}

Result<ClusterSpec> LoadCluster(const std::string& name_or_path) {
  return Load<ClusterSpec>(InputKind::kCluster, name_or_path, &ParseCluster);
}

Result<ModelSpec> LoadModel(const std::string& name_or_path) {
  return Load<ModelSpec>(InputKind::kModel, name_or_path, &ParseModel);
}

Result<JobSpec> LoadJob(const std::string& name_or_path) {
  return Load<JobSpec>(InputKind::kJob, name_or_path, &ParseJob);
}

Result<RecipeSpec> LoadRecipe(const std::string& name_or_path) {
  return Load<RecipeSpec>(InputKind::kRecipe, name_or_path, &ParseRecipe);
}

}  // namespace foldplan
