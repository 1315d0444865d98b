// `foldplan diff` end to end: its two sides are the two explains' numbers,
// its gap is their difference split as plan's "why it wins" splits it, and
// a plan file's candidates diff as their layouts do.
#include "cli_run.h"

#include <cmath>
#include <filesystem>
#include <unistd.h>

#include <nlohmann/json.hpp>

using foldplan::testing::RunFoldplan;
using Json = nlohmann::json;

namespace {

const std::string kInputs = "--model mixtral-8x7b --gpus 16 --micro-batch 1";
const std::string kA = "tp=1,cp=2,pp=2,vpp=4,ep=8,etp=1";
const std::string kB = "tp=2,cp=1,pp=2,ep=8,etp=1,recompute=selective";

}  // namespace

TEST_CASE("diff of A and B holds the two explains' numbers, and its gap is B - A") {
  auto diff = RunFoldplan("diff " + kInputs + " --layout " + kA + " --layout " + kB + " --json");
  auto a = RunFoldplan("explain " + kInputs + " --layout " + kA + " --json");
  auto b = RunFoldplan("explain " + kInputs + " --layout " + kB + " --json");
  REQUIRE(diff.exit_code == 0);
  REQUIRE(a.exit_code == 0);
  REQUIRE(b.exit_code == 0);
  const Json d = Json::parse(diff.out), ja = Json::parse(a.out), jb = Json::parse(b.out);
  CHECK(d["schema"] == "foldplan.diff/v1");
  CHECK(d["a"] == ja);
  CHECK(d["b"] == jb);
  const double gap = jb["step_time_s"].get<double>() - ja["step_time_s"].get<double>();
  CHECK(d["step_gap_s"].get<double>() == gap);
  CHECK(d["faster"] == (gap > 0 ? "a" : "b"));
  // The step is the sum of its parts, so the parts' differences add up to the gap.
  double sum = 0;
  for (const Json& part : d["step_differences"]) sum += part["b_minus_a_s"].get<double>();
  CHECK(sum == doctest::Approx(gap).epsilon(1e-6));
  double peak = 0;
  for (const Json& term : d["memory_differences"]) peak += term["b_minus_a_gib"].get<double>();
  CHECK(peak == doctest::Approx(d["peak_gap_gib"].get<double>()).epsilon(1e-3));
}

TEST_CASE("diff's text shows both sides and the gap the way plan's why it wins does") {
  auto r = RunFoldplan("diff " + kInputs + " --layout " + kA + " --layout " + kB);
  REQUIRE(r.exit_code == 0);
  for (const char* part : {"A  tp1 cp2", "--layout  tp=1,cp=2", "B  tp2 cp1", "--layout  tp=2,cp=1", "B - A", "the gap:",
                           "longer per step:", "peak GiB"}) {
    CAPTURE(part);
    CHECK(r.out.find(part) != std::string::npos);
  }
}

TEST_CASE("diff labels the stage each figure is from: each one's slowest stage, each one's worst memory stage") {
  // A's pipeline has its slowest stage last, B's first (B holds the
  // embedding and more layers on stage 0): the per-micro-batch figures come
  // from different stages, and the text says which.
  const std::string a = "tp=2,pp=4,ep=4,etp=1";
  const std::string b = "tp=2,pp=4,ep=4,etp=1,stages=11/7/7/7";
  auto json = RunFoldplan("diff " + kInputs + " --layout " + a + " --layout " + b + " --json");
  auto text = RunFoldplan("diff " + kInputs + " --layout " + a + " --layout " + b);
  REQUIRE(json.exit_code == 0);
  REQUIRE(text.exit_code == 0);
  const Json d = Json::parse(json.out);
  const int sa = d["a"]["step"]["slowest_stage"], sb = d["b"]["step"]["slowest_stage"];
  CHECK(d["stages"]["a"]["slowest"] == sa);
  CHECK(d["stages"]["b"]["slowest"] == sb);
  CHECK(d["stages"]["a"]["worst_memory"] == d["a"]["memory"]["worst_stage"]);
  CHECK(sa != sb);  // were they the same stage, the labels would prove nothing
  const std::string row = "on each one's slowest stage:";
  const size_t at = text.out.find(row);
  REQUIRE(at != std::string::npos);
  const std::string line = text.out.substr(at, text.out.find('\n', at) - at);
  CHECK_MESSAGE(line.find("stage " + std::to_string(sa)) != std::string::npos, line);
  CHECK_MESSAGE(line.find("stage " + std::to_string(sb)) != std::string::npos, line);
  CHECK(line.find("differ") != std::string::npos);
  CHECK(text.out.find("memory on each one's worst stage:") != std::string::npos);
  CHECK(text.out.find("A's stage " + std::to_string(sa) + ", B's stage " + std::to_string(sb)) != std::string::npos);
}

TEST_CASE("diff --plan --candidates I,J is diff --layout of those candidates") {
  const std::string plan =
      (std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "-diff-plan.json")).string();
  REQUIRE(RunFoldplan("plan " + kInputs + " --top 4 -o " + plan).exit_code == 0);
  auto from_plan = RunFoldplan("diff --plan " + plan + " --candidates 2,4 --json");
  REQUIRE(from_plan.exit_code == 0);
  const Json d = Json::parse(from_plan.out);
  auto by_layout = RunFoldplan("diff " + kInputs + " --layout " + d["a"]["layout"]["text"].get<std::string>() +
                               " --layout " + d["b"]["layout"]["text"].get<std::string>() + " --json");
  REQUIRE(by_layout.exit_code == 0);
  CHECK(Json::parse(by_layout.out) == d);
  CHECK(RunFoldplan("diff --plan " + plan + " --candidates 1").exit_code == 2);
  CHECK(RunFoldplan("diff --plan " + plan + " --candidates 1,9").exit_code == 1);  // no #9
  // Numbered from 1, as plan's table numbers them: 0 is a usage error.
  const auto zero = RunFoldplan("diff --plan " + plan + " --candidates 0,1");
  CHECK(zero.exit_code == 2);
  CHECK(zero.err.find("--candidates: candidates are numbered from 1 (#1 the best), found 0") != std::string::npos);
  // The default is #1 against #2, the table's first two rows.
  auto first_two = RunFoldplan("diff --plan " + plan + " --json");
  REQUIRE(first_two.exit_code == 0);
  const Json file = Json::parse(foldplan::testing::Slurp(plan));
  CHECK(Json::parse(first_two.out)["a"]["layout"]["text"] == file["candidates"][0]["layout"]["text"]);
  CHECK(Json::parse(first_two.out)["b"]["layout"]["text"] == file["candidates"][1]["layout"]["text"]);
  std::remove(plan.c_str());
}

TEST_CASE("diff refuses one layout, an illegal one, and --plan with input flags") {
  CHECK(RunFoldplan("diff " + kInputs + " --layout " + kA).exit_code == 2);
  auto illegal = RunFoldplan("diff " + kInputs + " --layout " + kA + " --layout tp=16,pp=1,ep=8,etp=1");
  CHECK(illegal.exit_code == 1);
  CHECK(illegal.err.find("B: layout") != std::string::npos);
  CHECK(RunFoldplan("diff --plan x.json --model mixtral-8x7b").exit_code == 2);
}
