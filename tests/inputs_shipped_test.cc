// The shipped inputs: every file loads, by name and by path; names resolve;
// ListShipped; DataDir's override; GenericCluster; enum names.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "core/atomic_file.h"
#include "core/json_check.h"
#include "inputs/loader.h"
#include "text_count.h"

using namespace foldplan;
using foldplan::testing::Contains;

namespace {

const std::string kShippedData = std::string(FOLDPLAN_SOURCE_DIR) + "/data";

std::vector<ShippedInput> Shipped(InputKind kind) {
  auto list = ListShipped(kind);
  REQUIRE_MESSAGE(list.ok(), list.status().message());
  return list.value();
}

std::vector<std::string> NamesOf(const std::vector<ShippedInput>& list) {
  std::vector<std::string> names;
  for (const auto& s : list) names.push_back(s.name);
  return names;
}

// Sets FOLDPLAN_DATA_DIR for one scope.
class ScopedDataDir {
 public:
  explicit ScopedDataDir(const std::string& dir) { setenv("FOLDPLAN_DATA_DIR", dir.c_str(), 1); }
  ~ScopedDataDir() { unsetenv("FOLDPLAN_DATA_DIR"); }
};

std::string ReadJsonFieldsDoc() {
  auto text = ReadTextFile(std::string(FOLDPLAN_SOURCE_DIR) + "/doc/formats.md");
  REQUIRE_MESSAGE(text.ok(), text.status().message());
  return text.value();
}

// Object keys as documented: "nodes", "gpu.name", "moe.top_k".
std::vector<std::string> DottedFields(const nlohmann::json& j, const std::string& prefix) {
  std::vector<std::string> out;
  if (!j.is_object()) return out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string name = prefix + it.key();
    out.push_back(name);
    for (const auto& nested : DottedFields(*it, name + ".")) out.push_back(nested);
  }
  return out;
}

}  // namespace

TEST_CASE("the data directory is the source tree's data/ in a build") {
  unsetenv("FOLDPLAN_DATA_DIR");
  CHECK(DataDir() == kShippedData);
}

TEST_CASE("ListShipped lists the shipped inputs, sorted, with descriptions") {
  CHECK(NamesOf(Shipped(InputKind::kCluster)) ==
        std::vector<std::string>{"b200-dgx-32n", "b300-dgx-32n", "gb200-nvl72-4r", "gb300-nvl72-4r",
                                 "h100-dgx-128n", "h100-dgx-16n", "h200-dgx-1n", "h800-256n"});
  CHECK(NamesOf(Shipped(InputKind::kModel)) ==
        std::vector<std::string>{"deepseek-v3", "gpt3-175b", "llama3-70b", "mixtral-8x22b",
                                 "mixtral-8x7b", "olmoe-1b-7b", "qwen2-57b-a14b",
                                 "qwen3-235b-a22b", "qwen3-30b-a3b"});
  CHECK(NamesOf(Shipped(InputKind::kJob)) ==
        std::vector<std::string>{"default", "long-context-32k"});
  // inputs_recipe_test.cc checks the recipe names.
  for (InputKind kind : {InputKind::kCluster, InputKind::kModel, InputKind::kJob, InputKind::kRecipe}) {
    for (const ShippedInput& s : Shipped(kind)) {
      CAPTURE(s.path);
      CHECK(s.kind == kind);
      CHECK(s.path == kShippedData + "/" + Name(kind) + "s/" + s.name + ".json");
      CHECK_FALSE(s.description.empty());  // every shipped file names its sources
    }
  }
}

TEST_CASE("every shipped cluster loads, by name and by path, to the same spec") {
  for (const ShippedInput& s : Shipped(InputKind::kCluster)) {
    CAPTURE(s.name);
    auto by_name = LoadCluster(s.name);
    REQUIRE_MESSAGE(by_name.ok(), by_name.status().message());
    auto by_path = LoadCluster(s.path);
    REQUIRE_MESSAGE(by_path.ok(), by_path.status().message());
    CHECK(by_name->name == s.name);
    CHECK(by_path->name == s.name);
    CHECK(by_name->source == s.path);
    CHECK(by_name->description == s.description);
    CHECK(by_name->total_gpus() == by_path->total_gpus());
    CHECK(by_name->total_gpus() % by_name->nvlink_domain_gpus == 0);
  }
}

TEST_CASE("every shipped model and job loads by name and by path") {
  for (const ShippedInput& s : Shipped(InputKind::kModel)) {
    CAPTURE(s.name);
    auto by_name = LoadModel(s.name);
    REQUIRE_MESSAGE(by_name.ok(), by_name.status().message());
    auto by_path = LoadModel(s.path);
    REQUIRE_MESSAGE(by_path.ok(), by_path.status().message());
    CHECK(by_name->name == s.name);
    CHECK(by_name->total_params() == by_path->total_params());
  }
  for (const ShippedInput& s : Shipped(InputKind::kJob)) {
    CAPTURE(s.name);
    auto by_name = LoadJob(s.name);
    REQUIRE_MESSAGE(by_name.ok(), by_name.status().message());
    auto by_path = LoadJob(s.path);
    REQUIRE_MESSAGE(by_path.ok(), by_path.status().message());
    CHECK(by_name->name == s.name);
  }
}

TEST_CASE("the default inputs exist") {
  CHECK(LoadCluster(kDefaultCluster).ok());
  CHECK(LoadModel(kDefaultModel).ok());
  CHECK(LoadJob(kDefaultJob).ok());
}

TEST_CASE("h100-dgx-16n reads every field into the spec with units converted") {
  auto c = LoadCluster("h100-dgx-16n");
  REQUIRE(c.ok());
  CHECK(c->gpu.name == "H100 SXM5");
  CHECK(c->gpu.peak_bf16_flops == doctest::Approx(989e12));
  CHECK(c->gpu.peak_fp8_flops == doctest::Approx(1979e12));
  CHECK(c->gpu.hbm_gib == doctest::Approx(79.6));
  CHECK(c->gpu.hbm_tb_per_s == doctest::Approx(3.35));
  CHECK(c->nodes == 16);
  CHECK(c->gpus_per_node == 8);
  CHECK(c->total_gpus() == 128);
  CHECK(c->nvlink_domain_gpus == 8);
  CHECK(c->nvlink_gb_per_s == doctest::Approx(450));
  CHECK(c->nics_per_node == 8);
  CHECK(c->nic_gbit_per_s == doctest::Approx(400));
  CHECK(c->fabric.su_nodes == 32);
  CHECK(c->fabric.spine_oversubscription == doctest::Approx(1));
  CHECK(c->latency.nvlink_us == doctest::Approx(0.6));
  CHECK(c->calibration.empty());
}

TEST_CASE("gb200-nvl72-4r: 18 four-GPU trays per NVLink domain") {
  auto c = LoadCluster("gb200-nvl72-4r");
  REQUIRE(c.ok());
  CHECK(c->total_gpus() == 288);
  CHECK(c->nodes_per_domain() == 18);
  CHECK(c->domains() == 4);
}

// The Blackwell clusters against the datasheet figures their descriptions
// cite (tabulated in shared/reference/recipes.md section 3):
//   DGX B200: B200 dense BF16 2.25 PFLOP/s, FP8 4.5; 180 GB HBM3e usable
//     (192 nominal) at 8 TB/s; 8 GPUs per node on NVLink 5, 900 GB/s per
//     direction; 8 ConnectX-7 400 Gb/s NICs, one per GPU.
//   DGX B300: B300 dense BF16 2.25, FP8 4.5; 288 GB HBM3e at 8 TB/s; NVLink
//     5 at 900 GB/s per direction; 8 ConnectX-8 800 Gb/s, one per GPU.
//   GB300 NVL72: 360 PFLOP/s dense FP8 per 72-GPU rack = 5 per GPU, BF16
//     about 2.5; 288 GB HBM3e at 8 TB/s; 18 trays x 4 GPUs = one 72-GPU
//     NVLink domain at 900 GB/s per direction; one ConnectX-8 800 Gb/s per
//     GPU.
// hbm_gib is the datasheet GB scaled by the H200's driver ratio, 143771 MiB
// reported for 141 GB (the convention of gb200-nvl72-4r's 185.2 for 186 GB).
namespace {
double DriverGib(double datasheet_gb) { return datasheet_gb * 143771.0 / 1024.0 / 141.0; }
}  // namespace

TEST_CASE("gb200-nvl72-4r's hbm_gib follows the H200 driver ratio the Blackwell files use") {
  auto c = LoadCluster("gb200-nvl72-4r");
  REQUIRE(c.ok());
  CHECK(c->gpu.hbm_gib == doctest::Approx(DriverGib(186)).epsilon(0.0005));
}

TEST_CASE("b200-dgx-32n: 32 DGX B200, the DGX B200 datasheet figures") {
  auto c = LoadCluster("b200-dgx-32n");
  REQUIRE_MESSAGE(c.ok(), c.status().message());
  CHECK(c->gpu.name == "B200 SXM");
  CHECK(c->gpu.architecture == GpuArchitecture::kBlackwell);
  CHECK(c->gpu.sms == 148);
  CHECK(c->gpu.peak_bf16_flops == doctest::Approx(2.25e15));
  CHECK(c->gpu.peak_fp8_flops == doctest::Approx(4.5e15));
  CHECK(c->gpu.hbm_gib == doctest::Approx(DriverGib(180)).epsilon(0.0005));  // 179.2
  CHECK(c->gpu.hbm_tb_per_s == doctest::Approx(8.0));
  CHECK(c->nodes == 32);
  CHECK(c->gpus_per_node == 8);
  CHECK(c->total_gpus() == 256);
  CHECK(c->nvlink_domain_gpus == 8);
  CHECK(c->nvlink_gb_per_s == doctest::Approx(900));  // 1.8 TB/s bidirectional
  CHECK(c->nics_per_node == 8);                      // one per GPU
  CHECK(c->nic_gbit_per_s == doctest::Approx(400));  // ConnectX-7
  CHECK(c->fabric.su_nodes == 32);
  CHECK(c->fabric.spine_oversubscription == doctest::Approx(1));
  CHECK(Contains(c->description, "unverified"));
}

TEST_CASE("b300-dgx-32n: 32 DGX B300, the DGX B300 datasheet figures") {
  auto c = LoadCluster("b300-dgx-32n");
  REQUIRE_MESSAGE(c.ok(), c.status().message());
  CHECK(c->gpu.name == "B300 SXM");
  CHECK(c->gpu.architecture == GpuArchitecture::kBlackwell);
  CHECK(c->gpu.sms == 148);  // unverified for B300: the B200's count
  CHECK(c->gpu.peak_bf16_flops == doctest::Approx(2.25e15));
  CHECK(c->gpu.peak_fp8_flops == doctest::Approx(4.5e15));
  CHECK(c->gpu.hbm_gib == doctest::Approx(DriverGib(288)).epsilon(0.0005));  // 286.8
  CHECK(c->gpu.hbm_tb_per_s == doctest::Approx(8.0));
  CHECK(c->total_gpus() == 256);
  CHECK(c->gpus_per_node == 8);
  CHECK(c->nvlink_domain_gpus == 8);
  CHECK(c->nvlink_gb_per_s == doctest::Approx(900));
  CHECK(c->nics_per_node == 8);
  CHECK(c->nic_gbit_per_s == doctest::Approx(800));  // ConnectX-8
  CHECK(c->fabric.su_nodes == 32);
  CHECK(Contains(c->description, "sms 148 is the B200's count (unverified"));
}

TEST_CASE("gb300-nvl72-4r: 4 GB300 NVL72 racks, the GB300 NVL72 spec figures") {
  auto c = LoadCluster("gb300-nvl72-4r");
  REQUIRE_MESSAGE(c.ok(), c.status().message());
  CHECK(c->gpu.name == "B300 (GB300 superchip)");
  CHECK(c->gpu.architecture == GpuArchitecture::kBlackwell);
  CHECK(c->gpu.sms == 148);  // unverified for GB300: the B200's count
  CHECK(c->gpu.peak_fp8_flops * 72 == doctest::Approx(360e15));  // the rack's dense FP8
  CHECK(c->gpu.peak_bf16_flops == doctest::Approx(2.5e15));
  CHECK(c->gpu.hbm_gib == doctest::Approx(DriverGib(288)).epsilon(0.0005));
  CHECK(c->gpu.hbm_tb_per_s == doctest::Approx(8.0));
  CHECK(c->total_gpus() == 288);
  CHECK(c->gpus_per_node == 4);
  CHECK(c->nodes_per_domain() == 18);
  CHECK(c->domains() == 4);
  CHECK(c->nvlink_gb_per_s == doctest::Approx(900));
  CHECK(c->nics_per_node == 4);  // one per GPU
  CHECK(c->nic_gbit_per_s == doctest::Approx(800));
  CHECK(c->fabric.su_nodes == 144);  // 8 racks: these 4 in one SU
  // 16 of 18 trays per rack, as 64-GPU-per-rack jobs run.
  auto part = UsingGpusPerDomain(c.value(), 64);
  REQUIRE(part.ok());
  CHECK(part->total_gpus() == 256);
  CHECK(part->nvlink_domain_gpus == 64);
}

TEST_CASE("every Blackwell cluster runs NVLink 5 and names its unverified figures") {
  for (const char* name : {"gb200-nvl72-4r", "b200-dgx-32n", "b300-dgx-32n", "gb300-nvl72-4r"}) {
    CAPTURE(name);
    auto c = LoadCluster(name);
    REQUIRE(c.ok());
    CHECK(c->gpu.architecture == GpuArchitecture::kBlackwell);
    CHECK(c->nvlink_gb_per_s == doctest::Approx(900));
    CHECK(c->gpu.hbm_tb_per_s == doctest::Approx(8.0));
    CHECK(c->nics_per_node == c->gpus_per_node);  // one NIC per GPU
    CHECK(Contains(c->description, "(unverified"));
  }
}

TEST_CASE("default job reads every field") {
  auto j = LoadJob("default");
  REQUIRE(j.ok());
  CHECK(j->seq_len == 4096);
  CHECK(j->global_batch == 1024);
  CHECK(j->micro_batch_sizes == std::vector<int>{1, 2});
  CHECK(j->precisions == std::vector<Precision>{Precision::kBF16});
  CHECK(j->recompute ==
        std::vector<Recompute>{Recompute::None(), Recompute::Selective(), Recompute::Full()});
  CHECK(j->cp_styles == std::vector<CpStyle>{CpStyle::kUlysses, CpStyle::kRing});
  CHECK(j->vpp == std::vector<int>{1, 2, 4});
  CHECK(j->pipeline_schedules.empty());  // the implied ones: 1f1b, interleaved-1f1b
  CHECK(j->orders == std::vector<std::string>{"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"});
  // No dispatcher named: the cluster's (JobForCluster); alltoall until then.
  CHECK_FALSE(j->dispatchers_named);
  CHECK(j->dispatchers == std::vector<Dispatcher>{Dispatcher::kAllToAll});
  CHECK(j->a2a_overlap == std::vector<bool>{false, true});
  CHECK(j->fsdp == std::vector<bool>{false, true});
  CHECK(j->tp_overlap == std::vector<bool>{false, true});
  CHECK(j->capacity_factor == 0);
  CHECK(j->routing_imbalance == doctest::Approx(1.2));
  CHECK(j->distributed_optimizer);
  CHECK_FALSE(j->ulysses_kv_replication);
  CHECK(j->world_size == 0);
}

TEST_CASE("an unknown shipped name lists the shipped names") {
  auto c = LoadCluster("h100-dgx-17n");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message() ==
        "unknown cluster \"h100-dgx-17n\"; shipped clusters: b200-dgx-32n, b300-dgx-32n, gb200-nvl72-4r, "
        "gb300-nvl72-4r, h100-dgx-128n, h100-dgx-16n, h200-dgx-1n, h800-256n (in " + kShippedData +
            "/clusters); or give a path to a .json file; did you mean \"h100-dgx-16n\"?");
  auto m = LoadModel("mixtral");
  REQUIRE_FALSE(m.ok());
  CHECK(Contains(m.status().message(), "unknown model \"mixtral\"; shipped models: deepseek-v3, "));
  auto j = LoadJob("");
  REQUIRE_FALSE(j.ok());
  CHECK(Contains(j.status().message(), "empty job name; shipped jobs: default, long-context-32k"));
}

TEST_CASE("a path that does not exist is reported as such") {
  auto c = LoadCluster("no/such/cluster.json");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message() == "no/such/cluster.json: no such cluster file");
  auto m = LoadModel("missing.json");  // a .json suffix makes it a path
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().message() == "missing.json: no such model file");
}

TEST_CASE("ResolveInput maps names to shipped paths and leaves paths alone") {
  auto p = ResolveInput(InputKind::kModel, "olmoe-1b-7b");
  REQUIRE(p.ok());
  CHECK(p.value() == kShippedData + "/models/olmoe-1b-7b.json");
  const std::string path = kShippedData + "/jobs/default.json";
  auto q = ResolveInput(InputKind::kJob, path);
  REQUIRE(q.ok());
  CHECK(q.value() == path);
}

TEST_CASE("loading a file of another kind reports only the schema") {
  auto c = LoadCluster(kShippedData + "/models/mixtral-8x7b.json");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message() == kShippedData +
                                    "/models/mixtral-8x7b.json: /schema: expected one of "
                                    "\"foldplan.cluster/v1\", found the string "
                                    "\"foldplan.model/v1\"");
}

TEST_CASE("FOLDPLAN_DATA_DIR replaces the data directory") {
  const std::string dir = std::string(FOLDPLAN_TEST_DATA_DIR) + "/inputs/datadir";
  ScopedDataDir scoped(dir);
  CHECK(DataDir() == dir);
  CHECK(NamesOf(Shipped(InputKind::kCluster)) == std::vector<std::string>{"tiny"});
  CHECK(LoadCluster("tiny").ok());
  auto missing = LoadCluster("h100-dgx-16n");
  REQUIRE_FALSE(missing.ok());
  CHECK(Contains(missing.status().message(), "shipped clusters: tiny (in " + dir));
  auto models = ListShipped(InputKind::kModel);  // this data dir has no models/
  REQUIRE_FALSE(models.ok());
  CHECK(models.status().message() ==
        dir + "/models: no shipped model directory (set FOLDPLAN_DATA_DIR to the data folder)");
}

TEST_CASE("GenericCluster: 8-GPU H100 nodes when the count allows, else one node") {
  ClusterSpec c = GenericCluster(64);
  CHECK(c.nodes == 8);
  CHECK(c.gpus_per_node == 8);
  CHECK(c.nvlink_domain_gpus == 8);
  CHECK(c.nics_per_node == 8);
  CHECK(c.gpu.peak_bf16_flops == doctest::Approx(989e12));
  c = GenericCluster(4);
  CHECK(c.nodes == 1);
  CHECK(c.gpus_per_node == 4);
  CHECK(c.nvlink_domain_gpus == 4);
  CHECK(c.nics_per_node == 4);
  c = GenericCluster(12);  // not a multiple of 8: one node of 12
  CHECK(c.nodes == 1);
  CHECK(c.gpus_per_node == 12);
  CHECK(c.total_gpus() == 12);
  CHECK(c.domains() == 1);
  c = GenericCluster(0);  // clamped rather than empty
  CHECK(c.total_gpus() == 1);
}

TEST_CASE("enum names") {
  CHECK(std::string(Name(InputKind::kCluster)) == "cluster");
  CHECK(std::string(Name(InputKind::kModel)) == "model");
  CHECK(std::string(Name(InputKind::kJob)) == "job");
  CHECK(std::string(Name(InputKind::kRecipe)) == "recipe");
  CHECK(std::string(Name(Precision::kBF16)) == "bf16");
  CHECK(std::string(Name(Precision::kFP8Tensorwise)) == "fp8-tensorwise");
  CHECK(std::string(Name(Recompute::None())) == "none");
  CHECK(std::string(Name(Recompute::Selective())) == "selective");
  CHECK(std::string(Name(Recompute::Full())) == "full");
  CHECK(std::string(Name(CpStyle::kUlysses)) == "ulysses");
  CHECK(std::string(Name(CpStyle::kRing)) == "ring");
  CHECK(std::string(Name(Dispatcher::kAllToAll)) == "alltoall");
  CHECK(std::string(Name(Dispatcher::kAllGather)) == "allgather");
  CHECK(std::string(Name(Dispatcher::kDeepEP)) == "deepep");
  CHECK(std::string(Name(Dispatcher::kHybridEP)) == "hybridep");
}

TEST_CASE("doc/formats.md documents every field the shipped files use") {
  auto text = ReadJsonFieldsDoc();
  for (InputKind kind : {InputKind::kCluster, InputKind::kModel, InputKind::kJob}) {
    for (const ShippedInput& s : Shipped(kind)) {
      auto json = ParseJsonFile(s.path);
      REQUIRE(json.ok());
      for (const std::string& field : DottedFields(json.value(), "")) {
        CAPTURE(s.name);
        CHECK_MESSAGE(Contains(text, "| `" + field + "` |"), field << " is not in doc/formats.md");
      }
    }
  }
}
