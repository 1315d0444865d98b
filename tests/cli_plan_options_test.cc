// plan's conveniences end to end: --distinct, the memory limits, --format
// csv (plan and enumerate), --gpus-range, the unrealistic-job warning, and
// explain --plan --candidate. Each compares the option's answer with the
// plain command's numbers, so that the test fails if either drifts apart.
#include "cli_run.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

using foldplan::testing::RunFoldplan;
using foldplan::testing::Slurp;
using foldplan::testing::TempPath;
using Json = nlohmann::json;

namespace {

// Mixtral 8x7B on 16 GPUs, one micro-batch size: the dp = 1 layouts whose
// orders tp-cp-ep-dp-pp and tp-cp-ep-pp-dp cannot differ (the dp axis has
// size 1) cost the same to the bit. The default job's candidates but EP
// overlap, FSDP, ring CP and DeepEP (what the default job searched before
// them): a few thousand fitting layouts, so that --top 10000 lists them
// all, and classes of equal cost that differ in step time.
const std::string kSmall =
    "--model mixtral-8x7b --gpus 16 --micro-batch 1 --dispatcher alltoall --a2a-overlap 0 --fsdp 0 --cp-style ulysses";


// RFC 4180 records (quoted fields, doubled quotes, CRLF): a reader written
// apart from the writer, so that the test checks the format, not the code.
std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false, in_field = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = in_field = true;
    } else if (c == ',') {
      rows.back().push_back(field);
      field.clear();
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      rows.back().push_back(field);
      field.clear();
      rows.emplace_back();
      ++i;
    } else {
      field += c;
      in_field = true;
    }
  }
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

std::map<std::string, std::string> Record(const std::vector<std::string>& head, const std::vector<std::string>& row) {
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < head.size() && i < row.size(); ++i) out[head[i]] = row[i];
  return out;
}

}  // namespace

TEST_CASE("--distinct collapses only bit-equal scores and counts each class's layouts") {
  // Without --distinct: the top 40 rows; with it: the first 16 classes
  // (the 13th and 14th hold two orders of equal cost each).
  auto plain = RunFoldplan("plan " + kSmall + " --top 40 --all --json");
  auto distinct = RunFoldplan("plan " + kSmall + " --top 16 --distinct --json");
  REQUIRE(plain.exit_code == 0);
  REQUIRE(distinct.exit_code == 0);
  const Json all = Json::parse(plain.out)["candidates"];
  const Json classes = Json::parse(distinct.out)["candidates"];
  REQUIRE(classes.size() == 16);
  // The 40 rows reach past the 16th class, so each class's members are all among them.
  REQUIRE(all.back()["step_time_s"].get<double>() > classes.back()["step_time_s"].get<double>());
  uint64_t collapsed = 0;
  for (size_t c = 0; c < classes.size(); ++c) {
    CAPTURE(c);
    uint64_t members = 0;
    for (const Json& row : all) {
      members += row["step_time_s"] == classes[c]["step_time_s"] && row["memory"]["peak_gib"] == classes[c]["memory"]["peak_gib"];
    }
    CHECK(classes[c]["equivalent_layouts"].get<uint64_t>() == members);
    collapsed += members - 1;
    if (c > 0) CHECK(classes[c]["step_time_s"] != classes[c - 1]["step_time_s"]);
  }
  CHECK(collapsed > 0);  // this setting has equal-cost orders; were none collapsed, the test would prove nothing
  // The text table names the twins, and "why it wins" names a runner-up of another cost.
  auto text = RunFoldplan("plan " + kSmall + " --top 16 --distinct");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find(" twin: ") != std::string::npos);
  CHECK(text.out.find("takes 0 us longer") == std::string::npos);
}

TEST_CASE("--objective memory: why it wins compares memory") {
  auto r = RunFoldplan("plan " + kSmall + " --top 3 --distinct --objective memory");
  REQUIRE(r.exit_code == 0);
  const size_t why = r.out.find("why it wins:");
  REQUIRE(why != std::string::npos);
  CHECK(r.out.find("more at its peak", why) != std::string::npos);
}

TEST_CASE("--max-mem-gib refuses exactly the layouts over it, and --why counts them") {
  const double limit = 74.0;
  // Every fitting layout: no margin (--headroom-gib 0; the default keeps 5%).
  auto all = RunFoldplan("plan " + kSmall + " --top 10000 --all --json --headroom-gib 0");
  auto capped = RunFoldplan("plan " + kSmall + " --top 10000 --all --json --max-mem-gib 74");
  REQUIRE(all.exit_code == 0);
  REQUIRE(capped.exit_code == 0);
  const Json a = Json::parse(all.out), c = Json::parse(capped.out);
  uint64_t under = 0, over = 0;
  for (const Json& row : a["candidates"]) (row["memory"]["peak_gib"].get<double>() <= limit ? under : over)++;
  REQUIRE(a["candidates"].size() < 10000);  // every fitting layout is listed
  REQUIRE(over > 0);
  CHECK(c["candidates"].size() == under);
  for (const Json& row : c["candidates"]) CHECK(row["memory"]["peak_gib"].get<double>() <= limit);
  CHECK(c["memory_limit"]["refused"].get<uint64_t>() == over);
  CHECK(c["memory_limit"]["max_peak_gib"].get<double>() == limit);
  auto why = RunFoldplan("plan " + kSmall + " --why --max-mem-gib 74");
  REQUIRE(why.exit_code == 0);
  CHECK(why.out.find("memory_limit") != std::string::npos);
  CHECK(why.out.find(std::to_string(over) + " more exceed peak 74.0 GiB") != std::string::npos);
}

TEST_CASE("--headroom-gib X is --max-mem-gib HBM - X; more headroom than HBM is a usage error") {
  // The H100's 79.6 GiB (tests/golden/plan_default.txt) less 10 = 69.6.
  auto head = RunFoldplan("plan " + kSmall + " --top 10000 --json --headroom-gib 10");
  REQUIRE(head.exit_code == 0);
  const Json h = Json::parse(head.out);
  const double hbm = h["candidates"][0]["memory"]["hbm_gib"].get<double>();
  CHECK(h["memory_limit"]["max_peak_gib"].get<double>() == doctest::Approx(hbm - 10));
  for (const Json& row : h["candidates"]) CHECK(row["memory"]["peak_gib"].get<double>() <= hbm - 10);
  auto too_much = RunFoldplan("plan " + kSmall + " --headroom-gib 100");
  CHECK(too_much.exit_code == 2);
  CHECK(too_much.err.find("--headroom-gib") != std::string::npos);
  CHECK(RunFoldplan("plan --max-mem-gib -1").exit_code == 2);
}

TEST_CASE("plan --format csv: one header and one record per candidate, the JSON's numbers") {
  auto csv = RunFoldplan("plan " + kSmall + " --top 6 --format csv");
  auto json = RunFoldplan("plan " + kSmall + " --top 6 --json");
  REQUIRE(csv.exit_code == 0);
  REQUIRE(json.exit_code == 0);
  const auto rows = ParseCsv(csv.out);
  const Json j = Json::parse(json.out)["candidates"];
  REQUIRE(rows.size() == j.size() + 1);
  for (size_t i = 0; i < j.size(); ++i) {
    CAPTURE(i);
    auto r = Record(rows[0], rows[i + 1]);
    CHECK(r["layout"] == j[i]["layout"]["text"].get<std::string>());
    CHECK(std::stod(r["step_time_s"]) == j[i]["step_time_s"].get<double>());
    CHECK(std::stod(r["tokens_per_s"]) == j[i]["tokens_per_s"].get<double>());
    CHECK(std::stod(r["peak_gib"]) == j[i]["memory"]["peak_gib"].get<double>());
    CHECK(std::stod(r["bubble_s"]) == j[i]["step"]["bubble_s"].get<double>());
    CHECK(std::stoi(r["tp"]) == j[i]["layout"]["tp"].get<int>());
  }
  CHECK(RunFoldplan("plan --format csv --json").exit_code == 2);
  CHECK(RunFoldplan("plan --format xml").exit_code == 2);
}

TEST_CASE("enumerate --format csv lists the layouts --json lists, in order") {
  auto csv = RunFoldplan("enumerate " + kSmall + " --limit 25 --format csv");
  auto json = RunFoldplan("enumerate " + kSmall + " --limit 25 --json");
  REQUIRE(csv.exit_code == 0);
  REQUIRE(json.exit_code == 0);
  const auto rows = ParseCsv(csv.out);
  const Json layouts = Json::parse(json.out)["layouts"];
  REQUIRE(layouts.size() == 25);
  REQUIRE(rows.size() == 26);
  for (size_t i = 0; i < layouts.size(); ++i) {
    auto r = Record(rows[0], rows[i + 1]);
    CHECK(r["layout"] == layouts[i]["text"].get<std::string>());
    CHECK(std::stoi(r["pp"]) == layouts[i]["pp"].get<int>());
  }
}

TEST_CASE("--gpus-range: each size's best is the best of a separate plan --gpus N") {
  auto range = RunFoldplan("plan --model mixtral-8x7b --gpus-range 16:64 --json");
  REQUIRE(range.exit_code == 0);
  const Json sizes = Json::parse(range.out)["sizes"];
  REQUIRE(sizes.size() == 3);  // 16, 32, 64: doubling from the start, the end included
  double best_per_gpu = 0;
  int marked = 0, best_gpus = 0;
  for (const Json& s : sizes) {
    const int gpus = s["gpus"].get<int>();
    CAPTURE(gpus);
    auto one = RunFoldplan("plan --model mixtral-8x7b --gpus " + std::to_string(gpus) + " --top 1 --json");
    REQUIRE(one.exit_code == 0);
    const Json best = Json::parse(one.out)["candidates"][0];
    CHECK(s["best"]["layout"]["text"] == best["layout"]["text"]);
    CHECK(s["best"]["step_time_s"] == best["step_time_s"]);
    const double per_gpu = best["tokens_per_s"].get<double>() / gpus;
    CHECK(s["tokens_per_s_per_gpu"].get<double>() == doctest::Approx(per_gpu));
    if (per_gpu > best_per_gpu) {
      best_per_gpu = per_gpu;
      best_gpus = gpus;
    }
    marked += s["best_per_gpu"].get<bool>();
  }
  CHECK(marked == 1);
  for (const Json& s : sizes) CHECK(s["best_per_gpu"].get<bool>() == (s["gpus"].get<int>() == best_gpus));
}

TEST_CASE("--gpus-range: a size the cluster cannot hold is exit 1 (as --gpus), a malformed range a usage error, naming the flag") {
  auto big = RunFoldplan("plan --model mixtral-8x7b --gpus-range 64:256");
  CHECK(big.exit_code == 1);
  CHECK(big.err.find("--gpus-range") != std::string::npos);
  CHECK(big.err.find("256") != std::string::npos);
  for (const char* bad : {"64:32", "0:64", "a,b", "64,32", "16:64:0x"}) {
    CAPTURE(bad);
    CHECK(RunFoldplan(std::string("plan --gpus-range ") + bad).exit_code == 2);
  }
  CHECK(RunFoldplan("plan --gpus-range 16,32 --gpus 16").exit_code == 2);
}

TEST_CASE("a global batch too small for the world size warns once and names the flag") {
  // 8 sequences on 128 GPUs: every layout legal but for the batch has fewer
  // micro-batches than stages (Ulysses CP only: ring CP's cp 16 at tp 8
  // holds all 128 GPUs without data or pipeline parallelism).
  auto r = RunFoldplan("plan --model mixtral-8x7b --global-batch 8 --cp-style ulysses");
  CHECK(r.exit_code == 1);
  const size_t at = r.err.find("warning: the global batch, 8 sequences");
  REQUIRE(at != std::string::npos);
  CHECK(r.err.find("warning", at + 1) == std::string::npos);  // once
  CHECK(r.err.find("--global-batch") != std::string::npos);
  CHECK(r.err.find("--fix pp=") != std::string::npos);
  // A realistic batch does not warn.
  CHECK(RunFoldplan("plan " + kSmall + " --top 1").err.find("warning") == std::string::npos);
}

TEST_CASE("explain --plan --candidate N is explain --layout of candidate #N, numbered from 1 as plan numbers them") {
  const std::string plan = TempPath("plan-options.json");
  auto written = RunFoldplan("plan " + kSmall + " --top 4 -o " + plan);
  REQUIRE(written.exit_code == 0);
  const Json file = Json::parse(Slurp(plan));
  for (int n : {1, 4}) {
    CAPTURE(n);
    auto from_plan = RunFoldplan("explain --plan " + plan + " --candidate " + std::to_string(n) + " --json");
    const std::string text = file["candidates"][n - 1]["layout"]["text"].get<std::string>();
    auto by_layout = RunFoldplan("explain " + kSmall + " --layout " + text + " --json");
    REQUIRE(from_plan.exit_code == 0);
    REQUIRE(by_layout.exit_code == 0);
    CHECK(Json::parse(from_plan.out) == Json::parse(by_layout.out));
  }
  CHECK(RunFoldplan("explain --plan " + plan + " --candidate 9").exit_code == 1);  // no such candidate
  CHECK(RunFoldplan("explain --plan " + plan + " --candidate 0").exit_code == 2);  // numbered from 1
  CHECK(RunFoldplan("explain --plan " + plan + " --layout tp=1").exit_code == 2);
  std::remove(plan.c_str());
}

namespace {

// "search: C candidates, L legal and scored (F fit), P pruned by the bound,
// S scored in full; T s on N threads, peak RSS M MiB", numbers with commas.
std::vector<double> StatsNumbers(const std::string& err) {
  const size_t at = err.find("search: ");
  REQUIRE(at != std::string::npos);
  const std::string line = err.substr(at, err.find('\n', at) - at);
  std::vector<double> numbers;
  std::string digits;
  for (char c : line + " ") {
    if (std::isdigit(static_cast<unsigned char>(c)) || (c == '.' && !digits.empty())) {
      digits += c;
    } else if (c != ',' || digits.empty()) {
      if (!digits.empty()) numbers.push_back(std::stod(digits));
      digits.clear();
    }
  }
  REQUIRE(numbers.size() == 8);
  return numbers;
}

}  // namespace

TEST_CASE("--stats prints the search's counts on stderr, and they add up to the plan's") {
  const std::string args = "plan " + kSmall + " --json --max-mem-gib 74";
  auto plain = RunFoldplan(args);
  auto stats = RunFoldplan(args + " --stats");
  REQUIRE(plain.exit_code == 0);
  REQUIRE(stats.exit_code == 0);
  const Json search = Json::parse(stats.out)["search"];
  CHECK(Json::parse(plain.out)["search"] == search);  // stdout unchanged but for the run
  const std::vector<double> n = StatsNumbers(stats.err);
  const double fit = search["legal_and_fitting"].get<double>();
  const double refused = Json::parse(stats.out)["memory_limit"]["refused"].get<double>();
  CHECK(n[0] == search["candidates"].get<double>());
  CHECK(n[1] == fit + search["rejected"]["fits_memory"].get<double>());
  CHECK(n[2] == fit);
  CHECK(n[3] + n[4] + refused == fit);  // pruned + scored in full + over the limit
  CHECK(n[6] == 2);                     // threads
  CHECK(n[7] > 0);                      // peak RSS, MiB
  // With more candidates kept than layouts fit, the bound never falls: none pruned.
  auto all = RunFoldplan("plan " + kSmall + " --top 10000 --stats --threads 1 --headroom-gib 0");
  REQUIRE(all.exit_code == 0);
  const std::vector<double> m = StatsNumbers(all.err);
  CHECK(m[3] == 0);
  CHECK(m[4] == m[2]);
  CHECK(m[6] == 1);
  // Without --stats and on no terminal: nothing on stderr.
  CHECK(plain.err.find("search: ") == std::string::npos);
}

namespace {

// The length of the longest line of `text`.
size_t PlanWidthWidest(const std::string& text) {
  std::istringstream in(text);
  size_t widest = 0;
  for (std::string line; std::getline(in, line);) widest = std::max(widest, line.size());
  return widest;
}

// Runs plan with COLUMNS set (the binary inherits this process's environment).
foldplan::testing::CliRun PlanWidthRun(const std::string& columns, const std::string& args) {
  ::setenv("COLUMNS", columns.c_str(), 1);
  auto r = RunFoldplan(args);
  ::setenv("COLUMNS", "120", 1);
  return r;
}

}  // namespace

TEST_CASE("no line of plan is over 120 columns at COLUMNS=120, the default job and DeepSeek-V3 on 1,024 H100") {
  for (const std::string args : {"plan", "plan --cluster h100-dgx-128n --model deepseek-v3",
                                 "plan --cluster h100-dgx-128n --model deepseek-v3 --all --why"}) {
    CAPTURE(args);
    auto r = PlanWidthRun("120", args);
    REQUIRE(r.exit_code == 0);
    CHECK(PlanWidthWidest(r.out) <= 120);
    // The canonical layout text is there once, for the best layout, whole in --json.
    CHECK(r.out.find("--layout     tp=") != std::string::npos);
  }
}

TEST_CASE("plan fits the width COLUMNS asks for, and 120 when COLUMNS is not a width") {
  auto narrow = PlanWidthRun("80", "plan");
  auto wide = PlanWidthRun("400", "plan");
  auto junk = PlanWidthRun("wide", "plan");
  REQUIRE(narrow.exit_code == 0);
  REQUIRE(wide.exit_code == 0);
  REQUIRE(junk.exit_code == 0);
  CHECK(PlanWidthWidest(narrow.out) < PlanWidthWidest(junk.out));  // narrowed as far as its numbers allow
  CHECK(PlanWidthWidest(wide.out) > 120);  // room for the table on one line a candidate
  CHECK(PlanWidthWidest(wide.out) <= 400);
  CHECK(PlanWidthWidest(junk.out) <= 120);
  CHECK(PlanWidthWidest(junk.out) > 80);
}

TEST_CASE("plan shows twins (layouts differing only in group order) once, with their orders; --all shows each") {
  auto distinct = RunFoldplan("plan --top 10 --json");
  auto all = RunFoldplan("plan --top 400 --all --json");
  REQUIRE(distinct.exit_code == 0);
  REQUIRE(all.exit_code == 0);
  const Json rows = Json::parse(distinct.out)["candidates"];
  const Json every = Json::parse(all.out)["candidates"];
  const auto without_order = [](const Json& c) {
    Json l = c["layout"];
    l.erase("order");
    l.erase("text");
    return l.dump();
  };
  std::set<std::string> keys;
  size_t named = 0;
  for (const Json& c : rows) {
    CHECK(keys.insert(without_order(c)).second);  // no two rows are twins
    // Each named twin is the same layout in another order, listed by --all.
    for (const Json& order : c["twin_orders"]) {
      ++named;
      CHECK(order != c["layout"]["order"]);
      bool listed = false;
      for (const Json& e : every) listed |= without_order(e) == without_order(c) && e["layout"]["order"] == order;
      CHECK_MESSAGE(listed, c["layout"]["text"]);
    }
  }
  CHECK(named > 0);  // the default job's orders give twins: were none named, the test would prove nothing
  // --all lists twins apart: some two of its rows differ only in order.
  std::set<std::string> all_keys;
  for (const Json& e : every) all_keys.insert(without_order(e));
  CHECK(all_keys.size() < every.size());
  // The text says it and names them.
  auto text = RunFoldplan("plan");
  CHECK(text.out.find("1 twin: tp-cp-ep-pp-dp") != std::string::npos);
  foldplan::testing::ExpectUsage("plan --distinct --all", "--all");
}

TEST_CASE("TFLOP/s per GPU is model FLOPs per step over step time and GPUs; FP8 MFU states both peaks") {
  auto bf16 = RunFoldplan("explain --layout tp=8,pp=8,vpp=4,ep=1,etp=4 --json");
  REQUIRE(bf16.exit_code == 0);
  const Json b = Json::parse(bf16.out);
  const double world = b["layout"]["world"].get<double>();
  const double flops = b["step"]["model_flops_per_token"].get<double>() * b["tokens_per_s"].get<double>();
  CHECK(b["tflops_per_gpu"].get<double>() == doctest::Approx(flops / world / 1e12).epsilon(1e-12));
  CHECK(b["mfu_precision_peak"] == b["mfu"]);  // bf16: one peak
  auto fp8 = RunFoldplan("explain --layout tp=8,pp=8,vpp=4,ep=1,etp=4,precision=fp8-blockwise --json");
  REQUIRE(fp8.exit_code == 0);
  const Json f = Json::parse(fp8.out);
  // H100 SXM5: 989 TFLOP/s bf16, 1,979 fp8 (data/clusters).
  CHECK(f["mfu_precision_peak"].get<double>() == doctest::Approx(f["mfu"].get<double>() * 989.0 / 1979.0).epsilon(1e-3));
  auto text = RunFoldplan("explain --layout tp=8,pp=8,vpp=4,ep=1,etp=4,precision=fp8-blockwise");
  CHECK(text.out.find("% of bf16 peak, ") != std::string::npos);
  CHECK(text.out.find("% of fp8 peak") != std::string::npos);
  CHECK(text.out.find(" TFLOP/s per GPU") != std::string::npos);
}

TEST_CASE("plan with nothing fitting exits 1 in every format: text, --json and --format csv") {
  const std::string none = "plan --cluster h200-dgx-1n --model deepseek-v3";
  auto text = RunFoldplan(none);
  auto json = RunFoldplan(none + " --json");
  auto csv = RunFoldplan(none + " --format csv");
  CHECK(text.exit_code == 1);
  CHECK(json.exit_code == 1);
  CHECK(csv.exit_code == 1);
  CHECK(Json::parse(json.out)["candidates"].empty());  // the JSON is printed all the same
  CHECK(csv.out.rfind("rank,layout,", 0) == 0);
}
