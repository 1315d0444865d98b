// inputs/measurements.h reads back what foldbench writes. The fixtures are
// foldbench's own output (MPI backend, 8 and 16 ranks, tests/data/inputs/):
// every field is read, and a file that contradicts itself is refused by the
// pointer of the field to fix.
#include <doctest/doctest.h>

#include <string>

#include "core/json_check.h"
#include "inputs/measurements.h"

using foldplan::LoadMeasurements;
using foldplan::MeasurementSet;
using foldplan::ParseJsonFile;
using foldplan::ParseMeasurements;

namespace {

const std::string kRan = FOLDPLAN_TEST_DATA_DIR "/inputs/measurements_pp2_cp2_ep4.json";
const std::string kSkipped = FOLDPLAN_TEST_DATA_DIR "/inputs/measurements_rankmap_skipped.json";

nlohmann::json Fixture() { return ParseJsonFile(kRan).value(); }

std::string Refusal(const nlohmann::json& doc) {
  auto m = ParseMeasurements(doc, "m.json");
  REQUIRE(!m.ok());
  return m.status().message();
}

}  // namespace

TEST_CASE("foldbench's measurements of a folded plan are read whole") {
  auto m = LoadMeasurements(kRan);
  REQUIRE(m.ok());
  CHECK(m->ranks == 8);
  CHECK(m->world_size == 8);
  CHECK(m->backend == "mpi");
  CHECK(m->hosts.size() == 1);
  CHECK(m->plan_schema == "foldplan.plan/v1");
  REQUIRE(m->ops.size() == 3);
  CHECK(m->ops[0].op == "ulysses");
  CHECK(m->ops[0].group_kind == "cp");
  CHECK(m->ops[0].ran);
  CHECK(m->ops[0].group_size == 2);
  CHECK(m->ops[0].cases.size() == 4);
  CHECK(m->ops[1].op == "dispatch");
  CHECK(m->ops[2].op == "pack");
  for (const auto& op : m->ops) {
    CHECK(op.ranks_per_node.size() == static_cast<size_t>(op.group_count));
    for (const auto& c : op.cases) {
      CHECK(c.min_seconds <= c.median_seconds);
      CHECK(c.median_seconds <= c.max_seconds);
      CHECK(c.send_bytes_per_rank > 0);
      CHECK(c.wrong_elements == 0);
    }
  }
  CHECK(m->wrong_elements == 0);
}

TEST_CASE("an op foldbench skipped is read with its reason and no cases") {
  auto m = LoadMeasurements(kSkipped);
  REQUIRE(m.ok());
  CHECK(m->ranks == 16);
  REQUIRE(!m->ops.empty());
  CHECK(!m->ops[0].ran);
  CHECK(m->ops[0].skip_reason.rfind("skipped: ", 0) == 0);
  CHECK(m->ops[0].cases.empty());
}

TEST_CASE("a median outside [min, max] is refused at its time_s") {
  nlohmann::json doc = Fixture();
  doc["ops"][0]["sizes"][1]["time_s"]["min"] = 1.0;
  CHECK(Refusal(doc) == "m.json: /ops/0/sizes/1/time_s: expected min <= median <= max");
}

TEST_CASE("a total of wrong elements that is not the cases' sum is refused") {
  nlohmann::json doc = Fixture();
  doc["ops"][1]["sizes"][0]["wrong_elements"] = 3;
  CHECK(Refusal(doc) == "m.json: /wrong_elements: expected the sum of the cases' wrong_elements (3), found 0");
}

TEST_CASE("ranks that differ from the plan's world are refused") {
  nlohmann::json doc = Fixture();
  doc["environment"]["ranks"] = 4;
  CHECK(Refusal(doc) == "m.json: /environment/ranks: expected the plan's world_size (8), found 4");
}

TEST_CASE("bad measurement fields are each named by their pointer, all at once") {
  nlohmann::json doc = Fixture();
  doc["environment"]["backend"] = "gloo";
  doc["ops"][0]["sizes"][0]["element_bytes"] = 0;
  doc["ops"][0]["sizes"][2].erase("algbw_gb_per_s");
  doc["ops"][1]["placement"]["ranks_per_node"][0] = "x";
  doc["ops"][2]["sizes"] = 7;
  doc["extra"] = 1;
  const std::string m = Refusal(doc);
  CHECK(m.find("m.json: /environment/backend: expected one of \"mpi\", \"nccl\", found the string \"gloo\"") != std::string::npos);
  CHECK(m.find("m.json: /ops/0/sizes/0/element_bytes: expected an integer in [1, 16], found 0") != std::string::npos);
  CHECK(m.find("m.json: /ops/0/sizes/2/algbw_gb_per_s: missing") != std::string::npos);
  CHECK(m.find("m.json: /ops/1/placement/ranks_per_node/0: expected a list of integers, found the string \"x\"") != std::string::npos);
  CHECK(m.find("m.json: /ops/2/sizes: expected a list of objects, found 7") != std::string::npos);
  CHECK(m.find("m.json: /extra: unknown field") != std::string::npos);
}

TEST_CASE("a file of another format is one error naming the schema") {
  nlohmann::json doc = Fixture();
  doc["schema"] = "foldplan.plan/v1";
  CHECK(Refusal(doc) == "m.json: /schema: expected one of \"foldplan.measurements/v1\", found the string \"foldplan.plan/v1\"");
}

// Synthetic (no GPU has run foldbench's compute op yet): foldbench's output
// format with made-up times, tests/data/inputs/measurements_compute_synthetic.json.
TEST_CASE("a compute case's GEMM shape is read as batch x [m x k] x [k x n]") {
  auto m = LoadMeasurements(FOLDPLAN_TEST_DATA_DIR "/inputs/measurements_compute_synthetic.json");
  REQUIRE(m.ok());
  REQUIRE(m->ops.size() == 1);
  const auto& c = m->ops[0].cases.at(0);
  CHECK(c.name == "expert up-proj");
  REQUIRE(c.gemm.has_value());
  CHECK(c.gemm->batch == 8);
  CHECK(c.gemm->m == 4096);
  CHECK(c.gemm->n == 2048);
  CHECK(c.gemm->k == 2048);
  CHECK(*c.flops == doctest::Approx(2.0 * 8 * 4096 * 2048 * 2048));
  // Communication cases carry no shape.
  auto comm = LoadMeasurements(kRan);
  REQUIRE(comm.ok());
  CHECK(!comm->ops[0].cases[0].gemm.has_value());
}

TEST_CASE("a GEMM dimension outside [1, 2^40] is refused at its pointer") {
  auto doc = ParseJsonFile(FOLDPLAN_TEST_DATA_DIR "/inputs/measurements_compute_synthetic.json").value();
  doc["ops"][0]["sizes"][1]["gemm"]["k"] = 0;
  doc["ops"][0]["sizes"][2]["gemm"]["batch"] = int64_t{1} << 41;
  const std::string message = Refusal(doc);
  CHECK(message.find("m.json: /ops/0/sizes/1/gemm/k: expected an integer") != std::string::npos);
  CHECK(message.find("m.json: /ops/0/sizes/2/gemm/batch: expected an integer") != std::string::npos);
}

TEST_CASE("an op of a name foldbench does not measure is refused at its pointer") {
  nlohmann::json doc = Fixture();
  doc["ops"][0]["op"] = "ulyses";
  CHECK(Refusal(doc).find("m.json: /ops/0/op: expected one of \"ulysses\", \"dispatch\"") == 0);
}
