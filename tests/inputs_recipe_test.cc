// Recipes (foldplan.recipe/v1): every shipped recipe loads and carries the
// settings of the public run it records (shared/reference/recipes.md
// section 2); the names it gives resolve; bad recipe files are refused
// with the file, the pointer and what was expected.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/json_check.h"
#include "inputs/loader.h"
#include "inputs/recipe.h"
#include "text_count.h"

using namespace foldplan;
using nlohmann::json;
using foldplan::testing::Contains;

namespace {

const std::string kSourceData = std::string(FOLDPLAN_SOURCE_DIR) + "/data";

std::vector<ShippedInput> ShippedRecipes() {
  auto list = ListShipped(InputKind::kRecipe);
  REQUIRE_MESSAGE(list.ok(), list.status().message());
  return list.value();
}

std::vector<std::string> ShippedNames(InputKind kind) {
  auto list = ListShipped(kind);
  REQUIRE_MESSAGE(list.ok(), list.status().message());
  std::vector<std::string> names;
  for (const auto& s : list.value()) names.push_back(s.name);
  return names;
}

bool IsShipped(InputKind kind, const std::string& name) {
  for (const std::string& n : ShippedNames(kind)) {
    if (n == name) return true;
  }
  return false;
}

json ShippedJson(const std::string& name) {
  auto j = ParseJsonFile(kSourceData + "/recipes/" + name + ".json");
  REQUIRE_MESSAGE(j.ok(), j.status().message());
  return j.value();
}

// The error of a shipped recipe after one edit; the file is named "edited.json".
std::string RecipeError(const std::string& name, const std::function<void(json&)>& edit) {
  json j = ShippedJson(name);
  edit(j);
  auto r = ParseRecipe(j, "edited.json");
  REQUIRE_FALSE(r.ok());
  return r.status().message();
}

// The layout text's key=value pairs. Parsing a layout is the planner's job
// (planner/layout.h); this only splits the text, to compare the recipe's
// layout with its job.
std::map<std::string, std::string> LayoutKeys(const std::string& text) {
  std::map<std::string, std::string> keys;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(start, end - start);
    const size_t eq = part.find('=');
    REQUIRE_MESSAGE(eq != std::string::npos, "layout part without '=': " << part);
    CHECK_MESSAGE(!keys.count(part.substr(0, eq)), "layout key given twice: " << part);
    keys[part.substr(0, eq)] = part.substr(eq + 1);
    start = end + 1;
  }
  return keys;
}

int IntKey(const std::map<std::string, std::string>& keys, const std::string& key, int absent) {
  auto it = keys.find(key);
  return it == keys.end() ? absent : std::stoi(it->second);
}

template <class T>
bool In(const std::vector<T>& list, const T& value) {
  for (const T& v : list) {
    if (v == value) return true;
  }
  return false;
}

// One row of recipes.md section 2, as the recipe must carry it.
struct Expected {
  const char* name;
  const char* cluster;
  int gpus;
  int gpus_per_domain;
  const char* model;
  int seq_len;
  int global_batch;
  const char* layout;  // the full layout text
  bool offloading;
};

// Section 2 of recipes.md: 11 rows. Row 1 ran with and without the EP
// all-to-all overlap (two recipes); the long-context row is one recipe per
// sequence length (four). 15 in all.
const std::vector<Expected>& Table() {
  static const std::vector<Expected> rows = {
      {"qwen3-235b-h100-tp2-pp8-vpp4-ep32", "h100-dgx-128n", 256, 0, "qwen3-235b-a22b", 4096, 2048,
       "tp=2,cp=1,pp=8,vpp=4,ep=32,etp=1,mbs=1,recompute=layernorm+moe_act,dispatcher=deepep,a2a_overlap=0,"
       "precision=bf16,fsdp=0",
       false},
      {"qwen3-235b-h100-tp2-pp8-vpp4-ep32-a2a-overlap", "h100-dgx-128n", 256, 0, "qwen3-235b-a22b", 4096, 2048,
       "tp=2,cp=1,pp=8,vpp=4,ep=32,etp=1,mbs=1,recompute=layernorm+moe_act,dispatcher=deepep,a2a_overlap=1,"
       "precision=bf16,fsdp=0",
       false},
      {"qwen3-235b-h100-tp2-ep8-fsdp", "h100-dgx-128n", 256, 0, "qwen3-235b-a22b", 4096, 2048,
       "tp=2,cp=1,pp=1,vpp=1,ep=8,etp=1,dp=128,edp=32,mbs=4,recompute=full,dispatcher=deepep,a2a_overlap=0,"
       "precision=bf16,fsdp=1",
       false},
      {"qwen3-235b-h100-tp2-pp32-vpp3-ep8", "h100-dgx-128n", 256, 0, "qwen3-235b-a22b", 4096, 2048,
       "tp=2,cp=1,pp=32,vpp=3,ep=8,etp=1,mbs=1,recompute=layernorm+moe_act,dispatcher=alltoall,a2a_overlap=0,"
       "precision=bf16,fsdp=0",
       false},
      {"qwen3-235b-h100-tp4-pp8-vpp4-ep8", "h100-dgx-128n", 256, 0, "qwen3-235b-a22b", 4096, 2048,
       "tp=4,cp=1,pp=8,vpp=4,ep=8,etp=1,mbs=1,recompute=none,dispatcher=deepep,a2a_overlap=0,precision=bf16,"
       "fsdp=0",
       false},
      {"qwen3-235b-h100-seq16k-tp4-cp1-pp8-vpp4-ep8", "h100-dgx-128n", 256, 0, "qwen3-235b-a22b", 16384, 256,
       "tp=4,cp=1,pp=8,vpp=4,ep=8,etp=1,mbs=1,recompute=moe,dispatcher=deepep,a2a_overlap=0,precision=bf16,"
       "fsdp=0",
       false},
      {"qwen3-235b-h100-seq32k-tp4-cp2-pp8-vpp4-ep8", "h100-dgx-128n", 256, 0, "qwen3-235b-a22b", 32768, 256,
       "tp=4,cp=2,pp=8,vpp=4,ep=8,etp=1,mbs=1,cp_style=ring,recompute=moe,dispatcher=deepep,a2a_overlap=0,"
       "precision=bf16,fsdp=0",
       false},
      {"qwen3-235b-h100-seq64k-tp4-cp4-pp8-vpp4-ep8", "h100-dgx-128n", 256, 0, "qwen3-235b-a22b", 65536, 256,
       "tp=4,cp=4,pp=8,vpp=4,ep=8,etp=1,mbs=1,cp_style=ring,recompute=moe,dispatcher=deepep,a2a_overlap=0,"
       "precision=bf16,fsdp=0",
       false},
      {"qwen3-235b-h100-seq128k-tp4-cp8-pp8-vpp4-ep8", "h100-dgx-128n", 256, 0, "qwen3-235b-a22b", 131072, 256,
       "tp=4,cp=8,pp=8,vpp=4,ep=8,etp=1,mbs=1,cp_style=ring,recompute=moe,dispatcher=deepep,a2a_overlap=0,"
       "precision=bf16,fsdp=0",
       false},
      {"qwen3-235b-gb200-tp1-pp8-ep8", "gb200-nvl72-4r", 256, 64, "qwen3-235b-a22b", 4096, 8192,
       "tp=1,cp=1,pp=8,vpp=1,ep=8,etp=1,mbs=1,recompute=none,dispatcher=hybridep,a2a_overlap=0,precision=bf16,"
       "fsdp=0,cuda_graphs=attn+moe_router+moe_preprocess",
       false},
      {"qwen3-235b-gb200-tp1-pp4-vpp6-ep64-mxfp8-offload", "gb200-nvl72-4r", 256, 64, "qwen3-235b-a22b", 4096,
       3072,
       "tp=1,cp=1,pp=4,vpp=6,ep=64,etp=1,mbs=3,recompute=none,dispatcher=hybridep,a2a_overlap=0,"
       "precision=mxfp8,fsdp=0,cuda_graphs=attn+moe_router+moe_preprocess",
       true},
      {"qwen3-235b-gb200-seq128k-tp4-cp4-pp4-vpp12-ep32-mxfp8", "gb200-nvl72-4r", 128, 64, "qwen3-235b-a22b",
       131072, 1024,
       "tp=4,cp=4,pp=4,vpp=12,ep=32,etp=1,mbs=1,cp_style=ring,recompute=moe,dispatcher=hybridep,a2a_overlap=0,"
       "precision=mxfp8,fsdp=0,cuda_graphs=attn+moe_router+moe_preprocess",
       false},
      {"qwen3-235b-gb300-tp1-pp1-ep64-mxfp8", "gb300-nvl72-4r", 64, 64, "qwen3-235b-a22b", 4096, 8192,
       "tp=1,cp=1,pp=1,vpp=1,ep=64,etp=1,mbs=1,recompute=none,dispatcher=hybridep,a2a_overlap=0,"
       "precision=mxfp8,fsdp=0,cuda_graphs=moe_router+moe_preprocess",
       false},
      {"deepseek-v3-gb200-tp1-pp8-vpp4-ep32-mxfp8", "gb200-nvl72-4r", 256, 64, "deepseek-v3", 4096, 2048,
       "tp=1,cp=1,pp=8,vpp=4,ep=32,etp=1,mbs=1,recompute=mla_up_proj+moe_act+layernorm,dispatcher=hybridep,a2a_overlap=0,"
       "precision=mxfp8,fsdp=0,pp_layout=Et|(tt|)*30L",
       false},
      {"mixtral-8x7b-h100-tp1-pp4-vpp8-ep8", "h100-dgx-128n", 64, 0, "mixtral-8x7b", 4096, 256,
       "tp=1,cp=1,pp=4,vpp=8,ep=8,etp=1,mbs=1,recompute=none,dispatcher=alltoall,a2a_overlap=0,"
       "precision=bf16,fsdp=0",
       false},
  };
  return rows;
}

RecipeSpec MustLoadRecipe(const std::string& name) {
  auto r = LoadRecipe(name);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  return r.value();
}

}  // namespace

TEST_CASE("the recipe kind: name, folder, listing") {
  CHECK(std::string(Name(InputKind::kRecipe)) == "recipe");
  CHECK(std::string(Name(RecipeFeature::kActivationOffloading)) == "activation_offloading");
  std::vector<std::string> expected;
  for (const Expected& e : Table()) expected.push_back(e.name);
  std::sort(expected.begin(), expected.end());
  CHECK(ShippedNames(InputKind::kRecipe) == expected);
  for (const ShippedInput& s : ShippedRecipes()) {
    CAPTURE(s.name);
    CHECK(s.kind == InputKind::kRecipe);
    CHECK(s.path == kSourceData + "/recipes/" + s.name + ".json");
    CHECK_FALSE(s.description.empty());
  }
  auto p = ResolveInput(InputKind::kRecipe, "mixtral-8x7b-h100-tp1-pp4-vpp8-ep8");
  REQUIRE(p.ok());
  CHECK(p.value() == kSourceData + "/recipes/mixtral-8x7b-h100-tp1-pp4-vpp8-ep8.json");
}

TEST_CASE("an unknown recipe name lists the shipped recipes") {
  auto r = LoadRecipe("qwen3-235b");
  REQUIRE_FALSE(r.ok());
  CHECK(Contains(r.status().message(),
                 "unknown recipe \"qwen3-235b\"; shipped recipes: deepseek-v3-gb200-tp1-pp8-vpp4-ep32-mxfp8, "));
  auto q = LoadRecipe("no/such/recipe.json");
  REQUIRE_FALSE(q.ok());
  CHECK(q.status().message() == "no/such/recipe.json: no such recipe file");
}

TEST_CASE("every shipped recipe loads, by name and by path, and what it names resolves") {
  for (const ShippedInput& s : ShippedRecipes()) {
    CAPTURE(s.name);
    const RecipeSpec r = MustLoadRecipe(s.name);
    const RecipeSpec by_path = MustLoadRecipe(s.path);
    CHECK(r.name == s.name);
    CHECK(by_path.name == s.name);
    CHECK(r.source == s.path);
    CHECK(r.description == s.description);
    CHECK(Contains(r.citation, "Megatron-MoE ModelZoo"));
    CHECK_FALSE(r.layout.empty());
    CHECK_FALSE(r.notes.empty());
    // Shipped names, each loaded.
    CHECK(IsShipped(InputKind::kCluster, r.cluster_name));
    CHECK(IsShipped(InputKind::kModel, r.model_name));
    CHECK(IsShipped(InputKind::kJob, r.job_base));
    CHECK(r.cluster.name == r.cluster_name);
    CHECK(r.model.name == r.model_name);
    CHECK(r.job_base == "default");
    // The job is the recipe's: its GPUs, its settings.
    CHECK(r.job.name == r.name);
    CHECK(r.job.world_size == r.gpus);
    CHECK(r.job.gpus_per_domain == r.gpus_per_domain);
    // The GPUs exist.
    ClusterSpec used = r.cluster;
    if (r.gpus_per_domain > 0) {
      auto part = UsingGpusPerDomain(r.cluster, r.gpus_per_domain);
      REQUIRE_MESSAGE(part.ok(), part.status().message());
      used = part.value();
    }
    CHECK(r.gpus <= used.total_gpus());
    CHECK(r.fully_modelled() == !r.Uses(RecipeFeature::kActivationOffloading));
  }
}

TEST_CASE("the shipped recipes carry recipes.md section 2, and section 4's CUDA graphs where a preset states them") {
  for (const Expected& e : Table()) {
    CAPTURE(e.name);
    const RecipeSpec r = MustLoadRecipe(e.name);
    CHECK(r.cluster_name == e.cluster);
    CHECK(r.gpus == e.gpus);
    CHECK(r.gpus_per_domain == e.gpus_per_domain);
    CHECK(r.model_name == e.model);
    CHECK(r.job.seq_len == e.seq_len);
    CHECK(r.job.global_batch == e.global_batch);
    CHECK(r.layout == e.layout);
    CHECK(r.Uses(RecipeFeature::kActivationOffloading) == e.offloading);
    CHECK(r.fully_modelled() == !e.offloading);
  }
  // Forced balance only where the source says so (long context on H100);
  // elsewhere the base job's working assumption. Every recipe is dropless.
  auto base = LoadJob("default");
  REQUIRE(base.ok());
  for (const Expected& e : Table()) {
    CAPTURE(e.name);
    const RecipeSpec r = MustLoadRecipe(e.name);
    const bool long_context_h100 = Contains(e.name, "-h100-seq");
    CHECK(r.job.routing_imbalance == doctest::Approx(long_context_h100 ? 1.0 : base->routing_imbalance));
    CHECK(r.job.capacity_factor == 0);
  }
}

TEST_CASE("a recipe's layout and job agree, and its degrees fill its GPUs") {
  for (const ShippedInput& s : ShippedRecipes()) {
    CAPTURE(s.name);
    const RecipeSpec r = MustLoadRecipe(s.name);
    const auto keys = LayoutKeys(r.layout);
    const JobSpec& j = r.job;
    // Each recipe option the layout pins is the job's only candidate, so
    // that `plan` with the recipe's job searches around the recipe.
    CHECK(j.micro_batch_sizes == std::vector<int>{IntKey(keys, "mbs", 0)});
    CHECK(j.vpp == std::vector<int>{IntKey(keys, "vpp", 0)});
    auto recompute = ParseRecompute(keys.at("recompute"));
    REQUIRE(recompute.ok());
    CHECK(j.recompute == std::vector<Recompute>{recompute.value()});
    CHECK(j.dispatchers == std::vector<Dispatcher>{*ParseDispatcher(keys.at("dispatcher"))});
    CHECK(j.precisions == std::vector<Precision>{*ParsePrecision(keys.at("precision"))});
    CHECK(j.a2a_overlap == std::vector<bool>{keys.at("a2a_overlap") == "1"});
    CHECK(j.fsdp == std::vector<bool>{keys.at("fsdp") == "1"});
    if (keys.count("cp_style")) {
      CHECK(j.cp_styles == std::vector<CpStyle>{keys.at("cp_style") == "ring" ? CpStyle::kRing : CpStyle::kUlysses});
    }
    // Dense view tp x cp x dp and expert view etp x ep x edp per stage.
    const int tp = IntKey(keys, "tp", 1), cp = IntKey(keys, "cp", 1), pp = IntKey(keys, "pp", 1);
    const int ep = IntKey(keys, "ep", 1), etp = IntKey(keys, "etp", tp);
    REQUIRE(r.gpus % pp == 0);
    const int stage = r.gpus / pp;
    CHECK(stage % (tp * cp) == 0);
    CHECK(stage % (etp * ep) == 0);
    if (keys.count("dp")) CHECK(IntKey(keys, "dp", 0) == stage / (tp * cp));
    if (keys.count("edp")) CHECK(IntKey(keys, "edp", 0) == stage / (etp * ep));
    // HybridEP runs inside one NVLink domain: the EP group must fit in the
    // GPUs used of one domain.
    if (keys.at("dispatcher") == "hybridep") {
      const int domain = r.gpus_per_domain > 0 ? r.gpus_per_domain : r.cluster.nvlink_domain_gpus;
      CHECK(etp * ep <= domain);
      CHECK(domain % (etp * ep) == 0);
    }
    // MXFP8 needs Blackwell.
    if (keys.at("precision") == "mxfp8") CHECK(r.cluster.gpu.architecture == GpuArchitecture::kBlackwell);
  }
}

TEST_CASE("the GPUs of the section 2 recipes match their hardware") {
  for (const ShippedInput& s : ShippedRecipes()) {
    CAPTURE(s.name);
    const RecipeSpec r = MustLoadRecipe(s.name);
    if (Contains(s.name, "-h100")) CHECK(r.cluster.gpu.name == "H100 SXM5");
    if (Contains(s.name, "-gb200")) CHECK(r.cluster.gpu.name == "B200 (GB200 superchip)");
    if (Contains(s.name, "-gb300")) CHECK(r.cluster.gpu.name == "B300 (GB300 superchip)");
  }
  // 256 GB200 use 64 of each rack's 72: 16 of 18 trays on all 4 racks.
  const RecipeSpec gb200 = MustLoadRecipe("qwen3-235b-gb200-tp1-pp8-ep8");
  auto part = UsingGpusPerDomain(gb200.cluster, gb200.gpus_per_domain);
  REQUIRE(part.ok());
  CHECK(part->total_gpus() == 256);
  CHECK(part->domains() == 4);
}

TEST_CASE("the job is the base job with the recipe's settings") {
  const RecipeSpec r = MustLoadRecipe("qwen3-235b-h100-seq128k-tp4-cp8-pp8-vpp4-ep8");
  auto base = LoadJob("default");
  REQUIRE(base.ok());
  CHECK(r.job_settings.contains("seq_len"));
  CHECK_FALSE(r.job_settings.contains("base"));
  CHECK(r.job.seq_len == 131072);
  CHECK(r.job.routing_imbalance == doctest::Approx(1.0));
  CHECK(r.job.cp_styles == std::vector<CpStyle>{CpStyle::kRing});
  // What the recipe does not set is the base job's.
  CHECK(r.job.orders == base->orders);
  CHECK(r.job.distributed_optimizer == base->distributed_optimizer);
  CHECK(r.job.deepep_sms == base->deepep_sms);
  CHECK(r.job.moe_permute_fusion);
  CHECK_FALSE(r.job.mtp_layers.has_value());
  CHECK(r.job.source == r.source);
}

TEST_CASE("base defaults to \"default\"; not_modelled and notes are optional") {
  json j = ShippedJson("mixtral-8x7b-h100-tp1-pp4-vpp8-ep8");
  j["job"].erase("base");
  j.erase("notes");
  auto r = ParseRecipe(j, "edited.json");
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  CHECK(r->job_base == "default");
  CHECK(r->notes.empty());
  CHECK(r->not_modelled.empty());
  CHECK(r->name == "edited");
}

TEST_CASE("names inside a recipe may be paths, relative to the recipe's folder") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "foldplan_recipe_test";
  std::filesystem::create_directories(dir / "inputs");
  json cluster = ParseJsonFile(kSourceData + "/clusters/h100-dgx-16n.json").value();
  REQUIRE(WriteFileAtomically((dir / "inputs" / "my-cluster.json").string(), cluster.dump(2)).ok());
  json j = ShippedJson("mixtral-8x7b-h100-tp1-pp4-vpp8-ep8");
  j["cluster"]["name"] = "inputs/my-cluster.json";
  j["model"] = kSourceData + "/models/mixtral-8x7b.json";  // absolute
  j["job"]["base"] = "../" + dir.filename().string() + "/inputs/../../" + dir.filename().string() +
                     "/no-such-job.json";
  const std::string file = (dir / "my-recipe.json").string();
  REQUIRE(WriteFileAtomically(file, j.dump(2)).ok());
  auto bad = LoadRecipe(file);
  REQUIRE_FALSE(bad.ok());
  CHECK(Contains(bad.status().message(), file + ": /job/base: expected a shipped job name or a path to a job "
                                                "file, found \"../"));
  CHECK(Contains(bad.status().message(), "no-such-job.json: no such job file)"));
  j["job"]["base"] = kSourceData + "/jobs/default.json";
  REQUIRE(WriteFileAtomically(file, j.dump(2)).ok());
  auto r = LoadRecipe(file);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  CHECK(r->cluster.name == "my-cluster");
  CHECK(r->cluster.total_gpus() == 128);
  CHECK(r->model.name == "mixtral-8x7b");
  std::filesystem::remove_all(dir);
}

TEST_CASE("bad recipes: the file, the pointer, what was expected") {
  const std::string recipe = "qwen3-235b-gb200-tp1-pp8-ep8";
  SUBCASE("wrong schema: that one error") {
    CHECK(RecipeError(recipe, [](json& j) { j["schema"] = "foldplan.job/v1"; }) ==
          "edited.json: /schema: expected one of \"foldplan.recipe/v1\", found the string \"foldplan.job/v1\"");
    CHECK(RecipeError(recipe, [](json& j) { j.erase("schema"); }) ==
          "edited.json: /schema: missing; expected one of \"foldplan.recipe/v1\"");
  }
  SUBCASE("not an object") {
    auto r = ParseRecipe(json::array(), "edited.json");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == "edited.json: /: expected an object, found an array []");
  }
  SUBCASE("unknown cluster name: the shipped names") {
    const std::string e = RecipeError(recipe, [](json& j) { j["cluster"]["name"] = "gb200-nvl72-5r"; });
    CHECK(Contains(e, "edited.json: /cluster/name: expected a shipped cluster name or a path to a cluster file, "
                      "found \"gb200-nvl72-5r\" (unknown cluster \"gb200-nvl72-5r\"; shipped clusters: "
                      "b200-dgx-32n, b300-dgx-32n, gb200-nvl72-4r, "));
  }
  SUBCASE("unknown model and base job") {
    CHECK(Contains(RecipeError(recipe, [](json& j) { j["model"] = "qwen3-236b"; }),
                   "edited.json: /model: expected a shipped model name or a path to a model file, found "
                   "\"qwen3-236b\" (unknown model \"qwen3-236b\"; shipped models: deepseek-v3, "));
    CHECK(Contains(RecipeError(recipe, [](json& j) { j["job"]["base"] = "defaults"; }),
                   "edited.json: /job/base: expected a shipped job name or a path to a job file, found "
                   "\"defaults\" (unknown job \"defaults\"; shipped jobs: default, long-context-32k"));
  }
  SUBCASE("missing layout, missing source, empty layout") {
    CHECK(RecipeError(recipe, [](json& j) { j.erase("layout"); }) ==
          "edited.json: /layout: missing; expected a string");
    CHECK(RecipeError(recipe, [](json& j) { j.erase("source"); }) ==
          "edited.json: /source: missing; expected a string");
    CHECK(RecipeError(recipe, [](json& j) { j["layout"] = ""; }) ==
          "edited.json: /layout: expected a layout such as \"tp=2,pp=8,vpp=4,ep=32,etp=1\", found the string "
          "\"\"");
    CHECK(RecipeError(recipe, [](json& j) { j["layout"] = 8; }) ==
          "edited.json: /layout: expected a string, found 8");
  }
  SUBCASE("unknown fields, at the top and inside") {
    CHECK(RecipeError(recipe, [](json& j) { j["layuot"] = "tp=1"; }) == "edited.json: /layuot: unknown field");
    CHECK(RecipeError(recipe, [](json& j) { j["cluster"]["nodes"] = 64; }) ==
          "edited.json: /cluster/nodes: unknown field");
  }
  SUBCASE("job settings are checked as the job format checks them, under /job") {
    CHECK(RecipeError(recipe, [](json& j) { j["job"]["seq_length"] = 4096; }) ==
          "edited.json: /job/seq_length: unknown field");
    CHECK(RecipeError(recipe, [](json& j) { j["job"]["seq_len"] = "4096"; }) ==
          "edited.json: /job/seq_len: expected an integer in [1, 16777216], found the string \"4096\"");
    CHECK(RecipeError(recipe, [](json& j) { j["job"]["dispatcher"] = "deep-ep"; }) ==
          "edited.json: /job/dispatcher: expected one of alltoall, allgather, deepep (alias flex), hybridep "
          "(not a dispatcher), found the string \"deep-ep\"");
    CHECK(RecipeError(recipe, [](json& j) { j["job"]["recompute"] = json::array({"layernorm+moe_act", "x"}); }) ==
          "edited.json: /job/recompute/1: expected none, selective, full or '+'-joined Megatron recompute "
          "modules, found the string \"x\" (" + ParseRecompute("x").status().message() + ")");
  }
  SUBCASE("a rule broken by a value of the base job says where it came from") {
    const std::string e = RecipeError(recipe, [](json& j) {
      j["job"].erase("micro_batch_sizes");
      j["job"]["global_batch"] = 1;
    });
    CHECK(e == "edited.json: /job/micro_batch_sizes/1: expected at most global_batch (1), found 2 (from base "
               "job \"default\"; set micro_batch_sizes in /job to change it)");
  }
  SUBCASE("job fields that other recipe fields give") {
    CHECK(RecipeError(recipe, [](json& j) { j["job"]["world_size"] = 256; }) ==
          "edited.json: /job/world_size: not a job setting a recipe may give: the world size is /cluster/gpus");
    CHECK(RecipeError(recipe, [](json& j) { j["job"]["gpus_per_domain"] = 64; }) ==
          "edited.json: /job/gpus_per_domain: not a job setting a recipe may give: the GPUs used per NVLink "
          "domain are /cluster/gpus_per_domain");
    CHECK(RecipeError(recipe, [](json& j) { j["job"]["schema"] = "foldplan.job/v1"; }) ==
          "edited.json: /job/schema: not a job setting a recipe may give: the recipe's job settings carry no "
          "schema (the base job's applies)");
  }
  SUBCASE("GPUs the cluster does not have") {
    CHECK(RecipeError(recipe, [](json& j) { j["cluster"]["gpus"] = 288; }) ==
          "edited.json: /cluster/gpus: expected at most the 256 GPUs of cluster gb200-nvl72-4r with 64 of each "
          "72-GPU NVLink domain, found 288");
    CHECK(RecipeError(recipe, [](json& j) {
            j["cluster"].erase("gpus_per_domain");
            j["cluster"]["gpus"] = 512;
          }) == "edited.json: /cluster/gpus: expected at most the 288 GPUs of cluster gb200-nvl72-4r, found 512");
    CHECK(RecipeError(recipe, [](json& j) { j["cluster"]["gpus_per_domain"] = 66; }) ==
          "edited.json: /cluster/gpus_per_domain: cluster gb200-nvl72-4r: 66 GPUs per NVLink domain: expected a "
          "multiple of the 4 GPUs per node, at most the domain's 72, found 66");
    CHECK(RecipeError(recipe, [](json& j) { j["cluster"]["gpus"] = 0; }) ==
          "edited.json: /cluster/gpus: expected an integer in [1, 1048576], found 0");
    CHECK(RecipeError(recipe, [](json& j) { j["cluster"].erase("gpus"); }) ==
          "edited.json: /cluster/gpus: missing; expected an integer in [1, 1048576]");
  }
  SUBCASE("not_modelled names a known feature, once") {
    CHECK(RecipeError(recipe, [](json& j) { j["not_modelled"] = json::array({"offloading"}); }) ==
          "edited.json: /not_modelled/0: expected one of \"activation_offloading\", found the string "
          "\"offloading\"");
    CHECK(RecipeError(recipe, [](json& j) {
            j["not_modelled"] = json::array({"activation_offloading", "activation_offloading"});
          }) == "edited.json: /not_modelled/1: expected no repeated values, found \"activation_offloading\" again");
  }
  SUBCASE("every error at once") {
    const std::string e = RecipeError(recipe, [](json& j) {
      j.erase("layout");
      j["cluster"]["name"] = "nope";
      j["job"]["vpp"] = json::array();
    });
    CHECK(Contains(e, "edited.json: /layout: missing"));
    CHECK(Contains(e, "edited.json: /cluster/name: expected a shipped cluster name"));
    CHECK(Contains(e, "edited.json: /job/vpp: expected a non-empty list of integers"));
  }
}

TEST_CASE("hostile edits of every shipped recipe never crash, and errors name the file and a pointer") {
  const std::vector<json> hostile = {json(nullptr),
                                     json(true),
                                     json(-1),
                                     json(0),
                                     json(0.5),
                                     json(1e300),
                                     json(std::numeric_limits<int64_t>::max()),
                                     json(std::numeric_limits<uint64_t>::max()),
                                     json(""),
                                     json("x"),
                                     json("../x.json"),
                                     json::array(),
                                     json::array({1, "a", nullptr}),
                                     json::object(),
                                     json::object({{"unexpected", 1}})};
  for (const ShippedInput& s : ShippedRecipes()) {
    const json original = ShippedJson(s.name);
    std::vector<json::json_pointer> pointers;
    std::function<void(const json&, const json::json_pointer&)> collect = [&](const json& j,
                                                                             const json::json_pointer& at) {
      if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it) {
          pointers.push_back(at / it.key());
          collect(*it, at / it.key());
        }
      } else if (j.is_array()) {
        for (size_t i = 0; i < j.size(); ++i) {
          pointers.push_back(at / i);
          collect(j[i], at / i);
        }
      }
    };
    collect(original, json::json_pointer());
    auto check = [&](const json& edited, const std::string& what) {
      auto r = ParseRecipe(edited, "edited.json");
      if (r.ok()) return;
      const std::string& text = r.status().message();
      size_t start = 0;
      while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(start, end - start);
        start = end + 1;
        CAPTURE(s.name);
        CAPTURE(what);
        CHECK_MESSAGE(line.rfind("edited.json: /", 0) == 0, line);
      }
    };
    for (const auto& p : pointers) {
      for (const json& v : hostile) {
        json edited = original;
        edited[p] = v;
        check(edited, p.to_string() + " = " + v.dump());
      }
      json removed = original;
      removed[p.parent_pointer()].erase(removed[p.parent_pointer()].is_object()
                                            ? removed[p.parent_pointer()].find(p.back())
                                            : removed[p.parent_pointer()].begin() + std::stoi(p.back()));
      check(removed, "without " + p.to_string());
    }
  }
}

TEST_CASE("doc/formats.md documents every field the shipped recipes use") {
  auto text = ReadTextFile(std::string(FOLDPLAN_SOURCE_DIR) + "/doc/formats.md");
  REQUIRE(text.ok());
  CHECK(Contains(text.value(), "| `foldplan.recipe/v1` |"));
  for (const ShippedInput& s : ShippedRecipes()) {
    CAPTURE(s.name);
    const json j = ShippedJson(s.name);
    for (auto it = j.begin(); it != j.end(); ++it) {
      CHECK_MESSAGE(Contains(text.value(), "| `" + it.key() + "` |"), it.key());
      if (it.key() == "cluster") {
        for (auto c = it->begin(); c != it->end(); ++c) {
          CHECK_MESSAGE(Contains(text.value(), "| `cluster." + c.key() + "` |"), c.key());
        }
      }
    }
    CHECK(Contains(text.value(), "| `job.base` |"));
    // The other job keys are job fields, documented in the Job section.
    for (auto k = j["job"].begin(); k != j["job"].end(); ++k) {
      if (k.key() == "base") continue;
      CHECK_MESSAGE(Contains(text.value(), "| `" + k.key() + "` |"), k.key());
    }
    CHECK(Contains(text.value(), "`" + s.name + "`"));  // the shipped list names it
  }
}
