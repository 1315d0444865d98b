// costmodel/compute_calibration.h: foldbench's compute cases become profile
// points, and measured points replace the shipped ones at their shapes.
// The fixture, tests/data/inputs/measurements_compute_synthetic.json, is
// SYNTHETIC: foldbench's exact output format (NCCL backend, OLMoE-1B-7B at
// ep 8: 8 local experts of 4096 rows, 16 attention heads per rank) with
// made-up times; no GPU has run foldbench's compute op yet.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/json_check.h"
#include "costmodel/compute_calibration.h"
#include "costmodel_compute_fixtures.h"
#include "inputs/loader.h"
#include "inputs/measurements.h"

using namespace foldplan;
using foldplan::testing::Close;
using foldplan::testing::H200;

namespace {

const std::string kFixture = FOLDPLAN_TEST_DATA_DIR "/inputs/measurements_compute_synthetic.json";

// The fixture's two expert cases, as written: 8 x [4096 x 2048] x [2048 x
// 2048] in 0.45 ms and 8 x [4096 x 1024] x [1024 x 2048] in 0.26 ms.
constexpr double kUpTflops = 610.8397932088889;    // 2 x 8 x 4096 x 2048 x 2048 / 0.45 ms
constexpr double kDownTflops = 528.6113595076923;  // 2 x 8 x 4096 x 2048 x 1024 / 0.26 ms
// The shipped H200 rate of OLMoE's grouped up-proj, 8 experts of 4096 tokens.
constexpr double kShippedUpTflops = 712.7393709951873;

nlohmann::json FixtureJson() { return ParseJsonFile(kFixture).value(); }

MeasurementSet Read(const nlohmann::json& doc, const std::string& file) {
  auto m = ParseMeasurements(doc, file);
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  return m.value();
}

// The fixture with case `index` taking `seconds` (its rate following).
nlohmann::json WithTime(nlohmann::json doc, int index, double seconds) {
  nlohmann::json& c = doc["ops"][0]["sizes"][index];
  c["time_s"] = {{"median", seconds}, {"min", seconds}, {"max", seconds}};
  c["tflops_per_s"] = c["flops"].get<double>() / seconds / 1e12;
  return doc;
}

nlohmann::json Section(const std::vector<MeasurementSet>& sets) {
  auto s = ComputePointsFromMeasurements(sets);
  REQUIRE_MESSAGE(s.ok(), s.status().message());
  return s.value();
}

GpuSpec Gpu(const char* cluster) {
  auto c = LoadCluster(cluster);
  REQUIRE_MESSAGE(c.ok(), c.status().message());
  return c->gpu;
}

std::string Refusal(const nlohmann::json& section) {
  auto p = CalibratedComputeProfile(H200(), section, "cal.json", Gpu("h200-dgx-1n"));
  REQUIRE(!p.ok());
  return p.status().message();
}

}  // namespace

TEST_CASE("expert cases become grouped GEMM points and attention is left out") {
  const nlohmann::json s = Section({Read(FixtureJson(), "m.json")});
  CHECK(s["gpu"] == "NVIDIA H200");
  CHECK(s["points_from"] == nlohmann::json::array({"m.json"}));
  CHECK(s["gemm_bf16"].empty());  // the attention GEMMs are not plain-GEMM points
  REQUIRE(s["grouped_gemm_bf16"].size() == 2);
  // Sorted by shape: (8, 4096, K 1024, N 2048) first.
  const nlohmann::json& down = s["grouped_gemm_bf16"][0];
  CHECK(down["experts"] == 8);
  CHECK(down["tokens_per_expert"] == 4096);
  CHECK(down["K"] == 1024);
  CHECK(down["N"] == 2048);
  CHECK(down["s"].get<double>() == 2.6e-4);
  CHECK(down["tflops"].get<double>() == kDownTflops);
  const nlohmann::json& up = s["grouped_gemm_bf16"][1];
  CHECK(up["K"] == 2048);
  CHECK(up["tflops"].get<double>() == kUpTflops);
}

TEST_CASE("a shape measured in several files gets the median time and rate") {
  const nlohmann::json doc = FixtureJson();
  const nlohmann::json s = Section({Read(WithTime(doc, 0, 5.0e-4), "a.json"),
                                    Read(WithTime(doc, 0, 4.0e-4), "b.json"),
                                    Read(doc, "c.json")});
  const nlohmann::json& up = s["grouped_gemm_bf16"][1];
  CHECK(up["s"].get<double>() == 4.5e-4);
  CHECK(up["tflops"].get<double>() == kUpTflops);
  CHECK(s["points_from"].size() == 3);
}

TEST_CASE("an expert case with one local expert is a plain GEMM point") {
  // The same model at ep 64: one expert of 32768 rows per rank.
  nlohmann::json doc = FixtureJson();
  doc["ops"][0]["sizes"][0]["gemm"] = {{"batch", 1}, {"m", 32768}, {"n", 2048}, {"k", 2048}};
  doc["ops"][0]["sizes"][0]["flops"] = 2.0 * 32768 * 2048 * 2048;
  const nlohmann::json s = Section({Read(WithTime(doc, 0, 4.0e-4), "m.json")});
  REQUIRE(s["gemm_bf16"].size() == 1);
  const nlohmann::json& g = s["gemm_bf16"][0];
  CHECK(g["M"] == 32768);
  CHECK(g["K"] == 2048);
  CHECK(g["N"] == 2048);
  CHECK(g["tflops"].get<double>() == Close(2.0 * 32768 * 2048 * 2048 / 4.0e-4 / 1e12));
  CHECK(s["grouped_gemm_bf16"].size() == 1);
}

TEST_CASE("a case with wrong elements is refused by file and case") {
  nlohmann::json doc = FixtureJson();
  doc["ops"][0]["sizes"][1]["wrong_elements"] = 3;
  doc["wrong_elements"] = 3;
  auto s = ComputePointsFromMeasurements({Read(FixtureJson(), "good.json"), Read(doc, "bad.json")});
  REQUIRE(!s.ok());
  CHECK(s.status().message() ==
        "bad.json: /ops/0/sizes/1: compute case \"expert down-proj\" has 3 wrong element(s); "
        "refused, its time is not used");
}

TEST_CASE("times of a shared GPU, and of two GPUs at once, are refused") {
  nlohmann::json shared = FixtureJson();
  shared["environment"]["devices"][2] = "ranks per GPU: 8";
  auto s = ComputePointsFromMeasurements({Read(shared, "shared.json")});
  REQUIRE(!s.ok());
  CHECK(s.status().message().find("shared.json: /environment/devices: 8 ranks share each GPU") == 0);

  nlohmann::json other = FixtureJson();
  other["environment"]["devices"][0] =
      "GPU 0 of 8 (node-local rank 0): NVIDIA B200, compute capability 10.0, 178.4 GiB, 148 SMs";
  s = ComputePointsFromMeasurements({Read(FixtureJson(), "h200.json"), Read(other, "b200.json")});
  REQUIRE(!s.ok());
  CHECK(s.status().message() ==
        "b200.json: /environment/devices: measured on NVIDIA B200, but h200.json on NVIDIA "
        "H200; calibrate one GPU at a time");
}

TEST_CASE("a measured point replaces the shipped rate at exactly its shape") {
  const nlohmann::json section = Section({Read(FixtureJson(), "m.json")});
  CHECK(H200().GroupedGemmFlopsPerS(8, 4096, 2048, 2048) == Close(kShippedUpTflops * 1e12));
  auto p = CalibratedComputeProfile(H200(), section, "cal.json", Gpu("h200-dgx-1n"));
  REQUIRE_MESSAGE(p.ok(), p.status().message());
  CHECK(p->GroupedGemmFlopsPerS(8, 4096, 2048, 2048) == Close(kUpTflops * 1e12));
  // The down-proj shape (K 1024) is new: added, and now the nearest one.
  CHECK(p->GroupedGemmFlopsPerS(8, 4096, 1024, 2048) == Close(kDownTflops * 1e12));
  // Shapes not measured keep the shipped rates.
  CHECK(p->GroupedGemmFlopsPerS(8, 1024, 2048, 2048) == H200().GroupedGemmFlopsPerS(8, 1024, 2048, 2048));
  CHECK(p->GemmFlopsPerS(4096, 28672, 4096, Precision::kBF16) ==
        H200().GemmFlopsPerS(4096, 28672, 4096, Precision::kBF16));
  const AttentionKernel k{4096, 16, 16, 128, 128, true};
  for (AttentionBackend b : {AttentionBackend::kTeCudnn, AttentionBackend::kFlash2, AttentionBackend::kFlash3}) {
    CHECK(p->AttentionFlopsPerS(b, k, true) == H200().AttentionFlopsPerS(b, k, true));
  }
}

TEST_CASE("on another GPU the shipped rates are scaled and the measured ones are not") {
  // As if the fixture had been measured on the B200 (the caller checks the
  // GPU; here only the scaling is under test).
  const nlohmann::json section = Section({Read(FixtureJson(), "m.json")});
  const GpuSpec b200 = Gpu("b200-dgx-32n");
  const double ratio = 2250.0 / 989;  // B200 / H200 bf16 peak
  auto p = CalibratedComputeProfile(H200(), section, "cal.json", b200);
  REQUIRE_MESSAGE(p.ok(), p.status().message());
  CHECK(p->scaled_to() == "B200 SXM");
  CHECK(p->GroupedGemmFlopsPerS(8, 4096, 2048, 2048) == Close(kUpTflops * 1e12));
  CHECK(p->GroupedGemmFlopsPerS(8, 256, 7168, 4096) ==
        Close(ratio * H200().GroupedGemmFlopsPerS(8, 256, 7168, 4096)));
  CHECK(p->GemmFlopsPerS(1536, 28672, 4096, Precision::kBF16) ==
        Close(ratio * H200().GemmFlopsPerS(1536, 28672, 4096, Precision::kBF16)));
  // Between a shipped point (1024 tokens, scaled) and the measured one
  // (4096): linear in log(tokens), 2048 the midpoint.
  const double shipped_1024 = ratio * H200().GroupedGemmFlopsPerS(8, 1024, 2048, 2048);
  CHECK(p->GroupedGemmFlopsPerS(8, 2048, 2048, 2048) == Close((shipped_1024 + kUpTflops * 1e12) / 2));
  // With no points the profile is the shipped one scaled.
  const nlohmann::json empty = {
      {"gpu", ""}, {"gemm_bf16", nlohmann::json::array()},
      {"grouped_gemm_bf16", nlohmann::json::array()}, {"points_from", nlohmann::json::array()}};
  auto q = CalibratedComputeProfile(H200(), empty, "cal.json", b200);
  REQUIRE_MESSAGE(q.ok(), q.status().message());
  CHECK(q->GroupedGemmFlopsPerS(8, 4096, 2048, 2048) ==
        H200().ScaledTo(b200).GroupedGemmFlopsPerS(8, 4096, 2048, 2048));
}

TEST_CASE("a bad field of the compute section is refused by file and pointer") {
  const nlohmann::json good = Section({Read(FixtureJson(), "m.json")});
  nlohmann::json s = good;
  s["grouped_gemm_bf16"][0]["tokens_per_expert"] = 0;
  CHECK(Refusal(s) == "cal.json: /compute/grouped_gemm_bf16/0/tokens_per_expert: expected an "
                      "integer in [1, 2147483647], found 0");
  s = good;
  s["grouped_gemm_bf16"][1]["experts"] = 1;  // one expert is a gemm_bf16 point
  CHECK(Refusal(s).find("cal.json: /compute/grouped_gemm_bf16/1/experts: expected an integer") == 0);
  s = good;
  s["grouped_gemm_bf16"][1] = s["grouped_gemm_bf16"][0];
  CHECK(Refusal(s) == "cal.json: /compute/grouped_gemm_bf16/1: the same shape as "
                      "/compute/grouped_gemm_bf16/0 (listed twice)");
  s = good;
  s["gemm_bf16"] = {{{"M", 64}, {"K", 2048}, {"N", 2048}, {"s", 1e-5}, {"tflops", -1}}};
  CHECK(Refusal(s).find("cal.json: /compute/gemm_bf16/0/tflops: expected a number") == 0);
  s = good;
  s["points_from"] = "m.json";
  CHECK(Refusal(s).find("cal.json: /compute/points_from: expected a list of file names") == 0);
  s = good;
  s["gemm"] = nlohmann::json::array();
  CHECK(Refusal(s) == "cal.json: /compute/gemm: unknown field");
}
