// What a user sees: a layout that cannot run is never passed over in
// silence (simulate, ranks, diff and report warn on stderr and mark their
// JSON; ranks refuses it without --force), command-line mistakes are
// answered in foldplan's words with the nearest valid name, --help states
// the defaults the commands use, one option per line, and `list` shows
// whole descriptions with --long and one category when asked.
#include "cli_run.h"

#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/list_command.h"
#include "cli/plan_command.h"
#include "cli/ranks_command.h"
#include "text_count.h"

namespace msg_test {

using foldplan::testing::Contains;
using foldplan::testing::RunFoldplan;
using foldplan::testing::Slurp;
using foldplan::testing::TempPath;

// Mixtral 8x7B unsharded on 16 H100s: legal, but its peak is far above 79.6 GiB.
const std::string kInputs = "--model mixtral-8x7b --gpus 16";
const std::string kTooBig = "tp=1,cp=1,pp=1,ep=1,etp=1";
const std::string kFits = "tp=2,cp=1,pp=2,ep=8,etp=1,recompute=selective";

// Whitespace runs as one space: text wrapped over lines compares with its source.
std::string Squeezed(const std::string& text) {
  std::istringstream words(text);
  std::string out;
  for (std::string w; words >> w;) out += (out.empty() ? "" : " ") + w;
  return out;
}

// The lines of `text`.
std::vector<std::string> LinesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The line of `help` for option `flag` ("  --model TEXT   ..."), with the
// lines of its description that follow.
std::string OptionHelp(const std::string& help, const std::string& flag) {
  const std::vector<std::string> lines = LinesOf(help);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.rfind("  " + flag + " ", 0) != 0 && l != "  " + flag && l.rfind("  " + flag + "=", 0) != 0) continue;
    out = l;
    for (size_t j = i + 1; j < lines.size() && lines[j].rfind("      ", 0) == 0; ++j) out += "\n" + lines[j];
    return out;
  }
  return out;
}

// The cases live in the namespace too, so that its names hide those of
// the other cli tests compiled in the same batch.

TEST_CASE("simulate of a layout that does not fit warns on stderr, and its JSON says so") {
  auto r = RunFoldplan("simulate " + kInputs + " --layout " + kTooBig + " --json");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK_MESSAGE(Contains(r.err, "warning: layout tp1 cp1 dp16 pp1 | ep1 etp1 edp16 does not fit in memory: peak "),
                r.err);
  CHECK(Contains(r.err, " GiB on stage 0 > 79.6 GiB of HBM"));
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["fits"] == false);
  CHECK(j["peak_gib"].get<double>() > j["hbm_gib"].get<double>());
  CHECK(j["hbm_gib"].get<double>() == doctest::Approx(79.6).epsilon(0.01));
  CHECK(j["violations"].empty());
  // The text says it on stdout too.
  auto text = RunFoldplan("simulate " + kInputs + " --layout " + kTooBig);
  CHECK(Contains(text.out, "CANNOT RUN: it does not fit in memory: peak "));

  auto fits = RunFoldplan("simulate " + kInputs + " --layout " + kFits + " --json");
  REQUIRE_MESSAGE(fits.exit_code == 0, fits.err);
  CHECK_MESSAGE(!Contains(fits.err, "warning"), fits.err);
  CHECK(nlohmann::json::parse(fits.out)["fits"] == true);
}

TEST_CASE("ranks refuses a layout that does not fit unless --force, which writes it with the warning") {
  auto refused = RunFoldplan("ranks " + kInputs + " --layout " + kTooBig + " --format megatron");
  CHECK(refused.exit_code == 1);
  CHECK(refused.out.empty());
  CHECK_MESSAGE(Contains(refused.err, "foldplan: layout tp1 cp1 dp16 pp1 | ep1 etp1 edp16 does not fit in memory: peak "),
                refused.err);
  CHECK(Contains(refused.err, "> 79.6 GiB of HBM (--force exports it anyway)"));
  // Nor is a file written.
  const std::string path = TempPath("ranks-too-big.json");
  std::remove(path.c_str());
  auto no_file = RunFoldplan("ranks " + kInputs + " --layout " + kTooBig + " -o " + path);
  CHECK(no_file.exit_code == 1);
  CHECK(Slurp(path).empty());

  auto forced = RunFoldplan("ranks " + kInputs + " --layout " + kTooBig + " --format megatron --force");
  REQUIRE_MESSAGE(forced.exit_code == 0, forced.err);
  CHECK(Contains(forced.out, "--tensor-model-parallel-size 1"));
  CHECK_MESSAGE(Contains(forced.err, "warning: layout tp1 cp1 dp16 pp1 | ep1 etp1 edp16 does not fit in memory"),
                forced.err);
  // The rank map JSON is marked.
  auto map = RunFoldplan("ranks " + kInputs + " --layout " + kTooBig + " --force");
  REQUIRE(map.exit_code == 0);
  const auto j = nlohmann::json::parse(map.out);
  CHECK(j["fits"] == false);
  CHECK(j["peak_gib"].get<double>() > 79.6);
  // A layout that fits exports as it always did.
  auto fitting = RunFoldplan("ranks " + kInputs + " --layout " + kFits);
  REQUIRE(fitting.exit_code == 0);
  CHECK(fitting.err.empty());
  CHECK(!nlohmann::json::parse(fitting.out).contains("fits"));
  // Without a model nothing is judged, and the note says so.
  auto bare = RunFoldplan("ranks --world-size 16 --layout " + kTooBig);
  REQUIRE(bare.exit_code == 0);
  CHECK(Contains(bare.err, "nor its memory"));
  CHECK(!nlohmann::json::parse(bare.out).contains("fits"));
}

TEST_CASE("diff warns about a side that does not fit, and its JSON says which") {
  auto r = RunFoldplan("diff " + kInputs + " --layout " + kTooBig + " --layout " + kFits);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK_MESSAGE(Contains(r.err, "warning: A (tp1 cp1 dp16 pp1 | ep1 etp1 edp16) does not fit in memory: peak "), r.err);
  CHECK(!Contains(r.err, "warning: B"));
  auto j = RunFoldplan("diff " + kInputs + " --layout " + kTooBig + " --layout " + kFits + " --json");
  REQUIRE(j.exit_code == 0);
  const auto d = nlohmann::json::parse(j.out);
  CHECK(d["fits"]["a"] == false);
  CHECK(d["fits"]["b"] == true);
}

TEST_CASE("report of a plan whose layout does not fit warns, and the page says so at its top") {
  const std::string plan = TempPath("too-big.plan.json"), page = TempPath("too-big.html");
  auto explain = RunFoldplan("explain " + kInputs + " --layout " + kTooBig + " --allow-oom -o " + plan);
  REQUIRE_MESSAGE(explain.exit_code == 0, explain.err);
  auto r = RunFoldplan("report --plan " + plan + " -o " + page);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK_MESSAGE(Contains(r.err, "warning: the plan's best layout does not fit in memory: peak "), r.err);
  CHECK(Contains(Slurp(page), "cannot run as planned: it does not fit in memory"));
  std::remove(plan.c_str());
  std::remove(page.c_str());
}

TEST_CASE("a typo'd command gets the nearest one, in foldplan's words") {
  auto r = RunFoldplan("plna");
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(Contains(r.err, "foldplan: unknown command \"plna\"; did you mean \"plan\"?"), r.err);
  CHECK(!Contains(r.err, "A subcommand is required"));
  CHECK(Contains(RunFoldplan("simualte").err, "did you mean \"simulate\"?"));
  auto none = RunFoldplan("");
  CHECK(none.exit_code == 2);
  CHECK(Contains(none.err, "foldplan: a command is required: list, check, topo"));
  auto flag = RunFoldplan("plan --tpo 3");
  CHECK(flag.exit_code == 2);
  CHECK_MESSAGE(Contains(flag.err, "foldplan: plan: unknown option --tpo; did you mean \"--top\"?"), flag.err);
}

TEST_CASE("a value of the wrong kind or name is refused in foldplan's words, with the nearest name") {
  auto r = RunFoldplan("plan --top abc");
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(Contains(r.err, "foldplan: plan: --top: expected an integer, found \"abc\""), r.err);
  CHECK(!Contains(r.err, "Could not convert"));
  CHECK(Contains(RunFoldplan("plan --max-mem-gib lots").err, "--max-mem-gib: expected a number, found \"lots\""));
  CHECK(Contains(RunFoldplan("plan --top").err, "foldplan: plan: --top needs a value (INT)"));
  CHECK(Contains(RunFoldplan("validate --plan p.json --backend mpii").err,
                 "--backend: expected mpi or nccl, found \"mpii\"; did you mean \"mpi\"?"));
  CHECK(Contains(RunFoldplan("ranks --candidate 1").err, "foldplan: ranks: --candidate needs --plan"));
  CHECK(Contains(RunFoldplan("compare --plan p.json").err, "foldplan: compare: --measurements FILE is required"));
  auto format = RunFoldplan("ranks --world-size 16 --layout tp=2 --format megatronn");
  CHECK(format.exit_code == 2);
  CHECK(Contains(format.err, "did you mean \"megatron\"?"));
  CHECK(Contains(RunFoldplan("plan --precision bf61").err, "did you mean \"bf16\"?"));
  CHECK(Contains(RunFoldplan("enumerate --format cvs").err, "did you mean \"csv\"?"));
  // A shipped name: an invalid input (1), with the nearest shipped one.
  auto model = RunFoldplan("enumerate --model mixtral-8x7 --layout tp=1");
  CHECK(model.exit_code == 1);
  CHECK(Contains(model.err, "unknown model \"mixtral-8x7\"; shipped models: "));
  CHECK(Contains(model.err, "did you mean \"mixtral-8x7b\"?"));
}

TEST_CASE("a mistyped layout key is refused with the nearest key") {
  auto fix = RunFoldplan("plan --fix cp_styel=ring");
  CHECK(fix.exit_code == 2);
  CHECK_MESSAGE(Contains(fix.err, "layout: unknown key \"cp_styel\"; expected tp, cp,"), fix.err);
  CHECK_MESSAGE(Contains(fix.err, "; did you mean \"cp_style\"?"), fix.err);
  CHECK(Contains(RunFoldplan("explain --layout tp=2,ppp=4").err, "did you mean \"pp\"?"));
  // A key nothing is near gets the list alone.
  CHECK(!Contains(RunFoldplan("plan --fix zzzzzz=1").err, "did you mean"));
}

TEST_CASE("each help line's default is the default the command uses (ranks, plan, explain)") {
  const std::string ranks = RunFoldplan("ranks --help").out;
  // ranks without --model checks no model: its help does not claim one.
  CHECK(!Contains(OptionHelp(ranks, "--model"), "mixtral"));
  CHECK(Contains(Squeezed(OptionHelp(ranks, "--model")), "else none: the model's rules and memory are not checked"));
  auto bare = RunFoldplan("ranks --world-size 16 --layout tp=2,cp=1,pp=2,ep=4,etp=1");
  REQUIRE(bare.exit_code == 0);
  CHECK(Contains(bare.err, "note: no --model"));
  CHECK(Contains(ranks, "--format TEXT=" + foldplan::RanksOptions{}.format));
  CHECK(nlohmann::json::parse(bare.out)["schema"] == "foldplan.rankmap/v1");

  // plan and explain: the inputs their help names are the inputs they load.
  for (const std::string cmd : {"plan", "explain"}) {
    const std::string help = RunFoldplan(cmd + " --help").out;
    CAPTURE(cmd);
    CHECK(Contains(OptionHelp(help, "--cluster"), "(default h100-dgx-16n)"));
    CHECK(Contains(OptionHelp(help, "--model"), "(default mixtral-8x22b)"));
    CHECK(Contains(OptionHelp(help, "--job"), "(default default)"));
  }
  auto plan = RunFoldplan("plan --top 1");
  REQUIRE(plan.exit_code == 0);
  CHECK(Contains(plan.out, "cluster h100-dgx-16n (128 x H100 SXM5), model mixtral-8x22b, job default "));
  const std::string file = TempPath("defaults.plan.json");
  auto explain = RunFoldplan("explain --layout tp=4,cp=1,pp=8,vpp=4,ep=8,etp=1,mbs=2 -o " + file);
  REQUIRE_MESSAGE(explain.exit_code == 0, explain.err);
  const auto written = nlohmann::json::parse(Slurp(file));
  CHECK(written["inputs"]["cluster"]["name"] == "h100-dgx-16n");
  CHECK(written["inputs"]["model"]["name"] == "mixtral-8x22b");
  CHECK(written["inputs"]["job"]["name"] == "default");
  std::remove(file.c_str());

  // The numbers shown are the option structs' own.
  const std::string plan_help = RunFoldplan("plan --help").out;
  const foldplan::PlanOptions p;
  CHECK(Contains(plan_help, "--top INT=" + std::to_string(p.top)));
  CHECK(Contains(plan_help, "--threads INT=" + std::to_string(p.threads)));
  CHECK(Contains(plan_help, "--objective TEXT=" + p.objective));
  CHECK(Contains(RunFoldplan("explain --help").out,
                 "--candidate N=" + std::to_string(foldplan::ExplainOptions{}.candidate)));
}

TEST_CASE("--help has one option per line: what it needs or excludes on lines of their own") {
  for (const std::string cmd : {"ranks", "plan", "explain", "simulate", "diff", "validate", "list"}) {
    CAPTURE(cmd);
    const std::string help = RunFoldplan(cmd + " --help").out;
    CHECK(!Contains(help, "Excludes:"));
    CHECK(!Contains(help, "Needs:"));
    for (const std::string& line : LinesOf(help)) {
      CAPTURE(line);
      // An option's line: its description starts at column 30, after two spaces at least.
      if (line.rfind("  -", 0) == 0 && line.size() > 30) CHECK(line.substr(28, 2) == "  ");
      CHECK(line.size() <= 110);
    }
  }
  const std::string ranks = RunFoldplan("ranks --help").out;
  CHECK(Contains(OptionHelp(ranks, "--job"), "\n                              not with --plan"));
  CHECK(Contains(OptionHelp(ranks, "--candidate"), "\n                              needs --plan"));
}

TEST_CASE("list CATEGORY shows one kind; list --long prints every description whole") {
  auto models = RunFoldplan("list models");
  REQUIRE(models.exit_code == 0);
  CHECK(Contains(models.out, "deepseek-v3"));
  CHECK(!Contains(models.out, "h100-dgx-16n"));
  CHECK(!Contains(models.out, "recipes"));
  for (const std::string kind : {"clusters", "jobs", "recipes", "model"}) CHECK(RunFoldplan("list " + kind).exit_code == 0);
  auto typo = RunFoldplan("list modles");
  CHECK(typo.exit_code == 2);
  CHECK(Contains(typo.err, "unknown category \"modles\"; did you mean \"models\"?"));

  // The longest description is cut in the table and whole with --long.
  const auto listed = nlohmann::json::parse(RunFoldplan("list --json").out);
  std::string longest;
  for (const std::string kind : {"clusters", "models", "jobs"}) {
    for (const auto& item : listed[kind]) {
      const std::string d = item["description"];
      if (d.size() > longest.size()) longest = d;
    }
  }
  REQUIRE(longest.size() > foldplan::kListDescriptionChars);
  const std::string short_list = RunFoldplan("list").out;
  CHECK(!Contains(Squeezed(short_list), Squeezed(longest)));
  CHECK(Contains(short_list, "`foldplan list --long` prints them whole"));
  auto whole = RunFoldplan("list --long");
  REQUIRE(whole.exit_code == 0);
  CHECK(Contains(Squeezed(whole.out), Squeezed(longest)));
}

}  // namespace msg_test
