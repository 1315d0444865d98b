// plan's advice end to end (cli/plan_advice.h): when no layout fits, the
// smallest peak and the changes, each re-run as the command it prints and
// held to the figures it gave; --why's table with nothing fitting; one exit
// code for a world the cluster cannot hold; a smaller world advised where it
// does better, and none where the whole cluster is best.
#include "cli_run.h"

#include <string>

#include <nlohmann/json.hpp>

using foldplan::testing::RunFoldplan;
using Json = nlohmann::json;

namespace {

// The text of `text` after "foldplan " (a command the advice printed),
// without the program name, for RunFoldplan.
std::string AdviceArgs(const std::string& command) {
  const std::string prefix = "foldplan ";
  REQUIRE(command.rfind(prefix, 0) == 0);
  return command.substr(prefix.size());
}

bool AdviceHas(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// The best candidate of `args` (a plan command) as JSON.
Json AdviceBest(const std::string& args) {
  auto r = RunFoldplan(args + " --top 1 --json");
  REQUIRE_MESSAGE(r.exit_code == 0, args << "\n" << r.err);
  return Json::parse(r.out)["candidates"][0];
}

const std::string kNoFit = "plan --cluster h200-dgx-1n --model deepseek-v3";
const std::string kGb200 = "plan --cluster gb200-nvl72-4r --model qwen3-235b-a22b";

}  // namespace

TEST_CASE("DeepSeek-V3 on one H200 node: the smallest peak, its terms, and changes each re-costed") {
  auto text = RunFoldplan(kNoFit);
  CHECK(text.exit_code == 1);
  CHECK(AdviceHas(text.out, "no legal layout fits: none of the "));
  CHECK(AdviceHas(text.out, "smallest peak: "));
  CHECK(AdviceHas(text.out, "its largest memory terms: optimizer states"));
  CHECK(AdviceHas(text.out, "  more GPUs (--nodes "));
  CHECK_FALSE(AdviceHas(text.out, "enumerate --why"));  // which counts no memory

  auto json_run = RunFoldplan(kNoFit + " --json");
  CHECK(json_run.exit_code == 1);  // as the text answers; the document is printed all the same
  const Json plan = Json::parse(json_run.out);
  CHECK(plan["candidates"].empty());
  const Json advice = plan["advice"]["no_fit"];
  const double hbm = advice["smallest_peak"]["limit_gib"].get<double>();
  // The smallest peak is the cost model's for that layout, and over HBM.
  const Json peak = advice["smallest_peak"];
  CHECK(peak["peak_gib"].get<double>() > hbm);
  CHECK(peak["over_gib"].get<double>() == doctest::Approx(peak["peak_gib"].get<double>() - hbm));
  {
    auto e = RunFoldplan("explain --cluster h200-dgx-1n --model deepseek-v3 --layout " +
                         peak["layout"].get<std::string>() + " --json");
    CHECK(e.exit_code == 1);  // does not fit
    CHECK(Json::parse(e.out)["memory"]["peak_gib"].get<double>() == peak["peak_gib"].get<double>());
  }
  // Each change: tried, its command run again gives the layout and figures
  // it printed, and they fit; one that does not fit, its smallest peak over HBM.
  int fitting = 0;
  for (const Json& c : advice["changes"]) {
    CAPTURE(c.dump());
    if (c.contains("skipped")) continue;
    REQUIRE(c.contains("fits"));
    if (!c["fits"].get<bool>()) {
      if (c.contains("smallest_peak")) CHECK(c["smallest_peak"]["peak_gib"].get<double>() > hbm);
      continue;
    }
    ++fitting;
    const Json best = AdviceBest(AdviceArgs(c["command"].get<std::string>()));
    CHECK(best["layout"]["text"] == c["best"]["layout"]);
    CHECK(best["step_time_s"].get<double>() == c["best"]["step_time_s"].get<double>());
    CHECK(best["memory"]["peak_gib"].get<double>() == c["best"]["peak_gib"].get<double>());
    CHECK(best["memory"]["fits"].get<bool>());
    CHECK(best["memory"]["peak_gib"].get<double>() <= hbm);
  }
  CHECK(fitting >= 1);
  // More GPUs: the world found is whole nodes, and the doubling below it
  // (the last one searched before it) has no layout that fits.
  const Json& more = advice["changes"][0];
  REQUIRE(more["change"] == "more GPUs");
  REQUIRE(more["fits"].get<bool>());
  const int gpus = more["best"]["gpus"].get<int>();
  CHECK(gpus > 8);
  CHECK(gpus % 8 == 0);
  int doubling = 8;
  while (2 * doubling < gpus) doubling *= 2;
  if (doubling > 8) {
    auto r = RunFoldplan(kNoFit + " --nodes " + std::to_string(doubling / 8) + " --top 1");
    CHECK(r.exit_code == 1);
    CHECK(AdviceHas(r.out, "no legal layout fits"));
  }
}

TEST_CASE("the smallest peak under a memory limit is the memory objective's best") {
  const std::string small = "plan --model mixtral-8x7b --gpus 16 --micro-batch 1";
  const Json least = AdviceBest(small + " --objective memory");
  const double p = least["memory"]["peak_gib"].get<double>();
  auto r = RunFoldplan(small + " --json --max-mem-gib " + std::to_string(p - 0.01));
  CHECK(r.exit_code == 1);  // nothing fits under the limit
  const Json peak = Json::parse(r.out)["advice"]["no_fit"]["smallest_peak"];
  CHECK(peak["peak_gib"].get<double>() == p);
}

TEST_CASE("--why prints its table with nothing fitting and with nothing legal") {
  auto none_fit = RunFoldplan(kNoFit + " --why");
  CHECK(none_fit.exit_code == 1);
  CHECK(AdviceHas(none_fit.out, "\nrejections:\n"));
  CHECK(AdviceHas(none_fit.out, "  fits_memory "));
  // EP 16 of Mixtral's 8 experts: no layout is legal; the rules that rejected most first.
  auto none_legal = RunFoldplan("plan --model mixtral-8x7b --fix ep=16 --why");
  CHECK(none_legal.exit_code == 1);
  CHECK(AdviceHas(none_legal.out, "no layout is legal: of "));
  CHECK(AdviceHas(none_legal.out, "candidates):\n  ep_divides_experts "));
  CHECK(AdviceHas(none_legal.out, "\nrejections:\n"));
}

TEST_CASE("a world larger than the cluster is exit 1 in --gpus, --fix world= and --gpus-range alike") {
  for (const std::string& args : {std::string("plan --gpus 4096"), std::string("plan --fix world=4096"),
                                  std::string("plan --gpus-range 64:4096"), std::string("plan --gpus 4096 --json")}) {
    CAPTURE(args);
    auto r = RunFoldplan(args);
    CHECK(r.exit_code == 1);
    CHECK(AdviceHas(r.err, " GPUs is more than cluster h100-dgx-16n holds (128); --nodes "));
    CHECK(r.out.empty());
  }
}

TEST_CASE("Qwen3-235B on 4 GB200 racks: fewer GPUs are advised, with both figures and the command") {
  auto text = RunFoldplan(kGb200 + " --top 2");
  REQUIRE(text.exit_code == 0);
  CHECK(AdviceHas(text.out, "fewer GPUs: all 288 give "));
  CHECK(AdviceHas(text.out, "  256 GPUs, "));
  CHECK(AdviceHas(text.out, "      foldplan plan --cluster gb200-nvl72-4r --model qwen3-235b-a22b --"));

  const Json plan = Json::parse(RunFoldplan(kGb200 + " --top 1 --json").out);
  const double full = plan["candidates"][0]["tokens_per_s"].get<double>();
  const Json advice = plan["advice"]["fewer_gpus"];
  CHECK(advice["world"] == 288);
  CHECK(advice["tokens_per_s"].get<double>() == full);
  REQUIRE(!advice["worlds"].empty());
  for (const Json& w : advice["worlds"]) {
    CAPTURE(w.dump());
    CHECK(w["gpus"].get<int>() < 288);
    const Json best = AdviceBest(AdviceArgs(w["command"].get<std::string>()));
    CHECK(best["layout"]["text"] == w["layout"]);
    CHECK(best["layout"]["world"] == w["gpus"]);
    CHECK(best["tokens_per_s"].get<double>() == w["tokens_per_s"].get<double>());
    CHECK(best["tokens_per_s"].get<double>() >= 0.98 * full);
    CHECK(w["gain"].get<double>() == doctest::Approx(best["tokens_per_s"].get<double>() / full - 1));
  }
  // 64 of every 72-GPU domain is among them.
  bool per_domain = false;
  for (const Json& w : advice["worlds"]) per_domain |= AdviceHas(w["command"].get<std::string>(), "--gpus-per-domain 64");
  CHECK(per_domain);
}

TEST_CASE("no fewer-GPUs advice where the whole cluster is best") {
  // Mixtral 8x7B on 128 H100s: the worlds tried (96 and 64: a power of two
  // has no richer world below it) each fall short by more than 2%.
  const std::string args = "plan --model mixtral-8x7b";
  auto text = RunFoldplan(args + " --top 2");
  REQUIRE(text.exit_code == 0);
  CHECK_FALSE(AdviceHas(text.out, "fewer GPUs"));
  const Json plan = Json::parse(RunFoldplan(args + " --top 1 --json").out);
  CHECK_FALSE(plan.contains("advice"));
  const double full = plan["candidates"][0]["tokens_per_s"].get<double>();
  for (int gpus : {96, 64}) {
    CAPTURE(gpus);
    CHECK(AdviceBest(args + " --gpus " + std::to_string(gpus))["tokens_per_s"].get<double>() < 0.98 * full);
  }
}
