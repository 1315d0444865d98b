#include "cli/diff_command.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/output.h"
#include "cli/plan_text.h"
#include "core/formats.h"
#include "core/text_table.h"
#include "costmodel/evaluate.h"
#include "costmodel/layout_verdict.h"
#include "costmodel/plan_file.h"
#include "planner/legality.h"

namespace foldplan {
namespace {

using Json = nlohmann::ordered_json;
using Align = TextTable::Align;

std::string SignedSeconds(double d) {
  if (d == 0) return "0";
  return std::string(d > 0 ? "+" : "-") + Seconds(std::abs(d));
}

std::string SignedFixed(double d, int digits) {
  const std::string text = Fixed(std::abs(d), digits);
  if (text == Fixed(0, digits)) return Fixed(0, digits);
  return std::string(d > 0 ? "+" : "-") + text;
}

// --candidates "I,J": two candidate numbers of the plan file, from 1 (#1 the best).
Result<std::pair<int, int>> ParseCandidates(const std::string& text) {
  const size_t comma = text.find(',');
  auto index = [](const std::string& s) -> std::optional<int> {
    if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::stoi(s);
  };
  const auto i = comma == std::string::npos ? std::nullopt : index(text.substr(0, comma));
  const auto j = comma == std::string::npos ? std::nullopt : index(text.substr(comma + 1));
  if (!i || !j) {
    return Status::Error("--candidates: expected two candidate numbers I,J (from 1, the best), found \"" + text + "\"");
  }
  if (Status s = CheckCandidateNumber("--candidates", std::min(*i, *j)); !s.ok()) return s;
  return std::make_pair(*i, *j);
}

struct Pair {
  Inputs inputs;
  std::unique_ptr<CostModel> model;
  Evaluation a, b;
  std::string source;  // "" or "plan FILE candidates I and J"
};

// One layout text against the loaded inputs: parsed, legal, costed.
Result<Evaluation> Costed(const std::string& text, const Inputs& in, const CostModel& model) {
  const int world = in.job.world_size > 0 ? in.job.world_size : in.cluster.total_gpus();
  auto layout = ParseLayout(text, world, &in.job);
  if (!layout.ok()) return layout.status();
  const std::vector<Violation> violations = CheckLayout(layout.value(), model.legality());
  if (!violations.empty()) return Status::Error(IllegalLayoutText(layout.value(), violations));
  return model.Evaluate(layout.value());
}

Result<Pair> LoadPair(const DiffOptions& o) {
  Pair p;
  if (!o.plan.empty()) {
    auto which = ParseCandidates(o.candidates.empty() ? "1,2" : o.candidates);
    if (!which.ok()) return which.status();
    auto first = LoadPlanFile(o.plan, which->first);
    if (!first.ok()) return first.status();
    auto second = LoadPlanFile(o.plan, which->second);
    if (!second.ok()) return second.status();
    p.inputs.cluster = first->cluster;
    p.inputs.model = first->model;
    p.inputs.job = first->job;
    if (!o.inputs.calibration.empty()) p.inputs.cluster.calibration = o.inputs.calibration;
    p.inputs.calibration_use.allow_other_gpu = o.inputs.force_calibration;
    auto model = CostModel::Create(p.inputs.cluster, p.inputs.model, p.inputs.job, p.inputs.calibration_use);
    if (!model.ok()) return model.status();
    p.model = std::move(model).value();
    p.a = p.model->Evaluate(first->layout);
    p.b = p.model->Evaluate(second->layout);
    p.source = "plan " + o.plan + ", candidates #" + std::to_string(which->first) + " and #" +
               std::to_string(which->second);
    return p;
  }
  auto inputs = LoadInputs(o.inputs);
  if (!inputs.ok()) return inputs.status();
  p.inputs = std::move(inputs).value();
  auto model = CostModel::Create(p.inputs.cluster, p.inputs.model, p.inputs.job, p.inputs.calibration_use);
  if (!model.ok()) return model.status();
  p.model = std::move(model).value();
  auto a = Costed(o.layouts[0], p.inputs, *p.model);
  if (!a.ok()) return Status::Error("A: " + a.status().message());
  auto b = Costed(o.layouts[1], p.inputs, *p.model);
  if (!b.ok()) return Status::Error("B: " + b.status().message());
  p.a = std::move(a).value();
  p.b = std::move(b).value();
  return p;
}

// The rows of the side-by-side table: the step, its parts, throughput,
// every exposed collective either has, every memory term either holds.
std::string SideBySide(const Evaluation& a, const Evaluation& b, size_t columns) {
  TextTable t({"", "A", "B", "B - A"}, {Align::kLeft, Align::kRight, Align::kRight, Align::kRight});
  auto time = [&](const std::string& what, double x, double y) {
    t.AddRow({what, Seconds(x), Seconds(y), SignedSeconds(y - x)});
  };
  time("step", a.step.step_time_s, b.step.step_time_s);
  t.AddRow({"tokens/s", WithCommas(static_cast<unsigned long long>(a.step.tokens_per_s)),
            WithCommas(static_cast<unsigned long long>(b.step.tokens_per_s)),
            SignedFixed(b.step.tokens_per_s - a.step.tokens_per_s, 0)});
  t.AddRow({"TFLOP/s per GPU", Fixed(a.step.tflops_per_gpu, 1), Fixed(b.step.tflops_per_gpu, 1),
            SignedFixed(b.step.tflops_per_gpu - a.step.tflops_per_gpu, 1)});
  t.AddRow({"MFU (bf16 peak)", Fixed(100 * a.step.mfu, 1) + "%", Fixed(100 * b.step.mfu, 1) + "%",
            SignedFixed(100 * (b.step.mfu - a.step.mfu), 1) + " pt"});
  if (IsFp8(a.layout.precision) || IsFp8(b.layout.precision)) {
    t.AddRow({"MFU (its precision's peak)", Fixed(100 * a.step.mfu_precision_peak, 1) + "%",
              Fixed(100 * b.step.mfu_precision_peak, 1) + "%",
              SignedFixed(100 * (b.step.mfu_precision_peak - a.step.mfu_precision_peak), 1) + " pt"});
  }
  t.AddRow({"micro-batches", std::to_string(a.step.microbatches), std::to_string(b.step.microbatches),
            SignedFixed(double(b.step.microbatches - a.step.microbatches), 0)});
  time("  pipeline", a.step.pipeline_s, b.step.pipeline_s);
  time("    of which bubble", a.step.bubble_s, b.step.bubble_s);
  time("  exposed data-parallel", a.step.dp_exposed_s, b.step.dp_exposed_s);
  time("  optimizer", a.step.optimizer_s, b.step.optimizer_s);
  // The rows below are each layout's slowest pipeline stage (the one that
  // sets its step time), and the memory rows each one's worst stage: the
  // stage of each figure is its column's heading row.
  auto stage_row = [&](const std::string& what, int x, int y) {
    t.AddRow({what, "stage " + std::to_string(x), "stage " + std::to_string(y), x == y ? "same" : "differ"});
  };
  stage_row("on each one's slowest stage:", a.step.slowest_stage, b.step.slowest_stage);
  time("compute per micro-batch", a.step.stage_compute_s, b.step.stage_compute_s);
  time("exposed comm per micro-batch", a.step.stage_exposed_comm_s, b.step.stage_exposed_comm_s);
  time("exposed host per micro-batch", a.step.stage_host_exposed_s, b.step.stage_host_exposed_s);
  // Exposed communication per kind, in a's order then b's own kinds.
  std::vector<std::string> kinds;
  for (const auto* e : {&a, &b}) {
    for (const CommKindCost& c : e->comm) {
      if (std::find(kinds.begin(), kinds.end(), c.name) == kinds.end()) kinds.push_back(c.name);
    }
  }
  auto exposed = [](const Evaluation& e, const std::string& name) {
    for (const CommKindCost& c : e.comm) {
      if (c.name == name) return c.exposed_s;
    }
    return 0.0;
  };
  for (const std::string& k : kinds) {
    const double x = exposed(a, k), y = exposed(b, k);
    if (x > 0 || y > 0) time("exposed " + k + " per step", x, y);
  }
  stage_row("memory on each one's worst stage:", a.memory.worst_stage, b.memory.worst_stage);
  for (const MemoryTerm& term : a.memory.terms) {
    const double x = term.bytes / kBytesPerGiB, y = b.memory.bytes_of(term.name) / kBytesPerGiB;
    if (x == 0 && y == 0) continue;
    t.AddRow({"  " + std::string(term.name) + " GiB", Fixed(x, 2), Fixed(y, 2), SignedFixed(y - x, 2)});
  }
  t.AddRow({"  peak GiB", Fixed(a.memory.peak_gib(), 2), Fixed(b.memory.peak_gib(), 2),
            SignedFixed(b.memory.peak_gib() - a.memory.peak_gib(), 2)});
  t.AddRow({"fits in " + Fixed(a.memory.hbm_gib, 1) + " GiB", a.memory.fits ? "yes" : "NO", b.memory.fits ? "yes" : "NO",
            ""});
  return t.Render("  ", columns);
}

// The gap: the slower one against the faster, as plan's "why it wins".
std::string GapText(const Evaluation& a, const Evaluation& b) {
  const auto named = [](const char* who, const Evaluation& e) {
    return std::string(who) + " (" + CompactLayout(e.layout) + ")";
  };
  std::string out;
  if (a.step.step_time_s == b.step.step_time_s) {
    out = "  A and B take the same step time, " + Seconds(a.step.step_time_s) + "\n";
  } else if (a.step.step_time_s < b.step.step_time_s) {
    out = WhyItWinsText(a, b, Objective::kThroughput, named("B", b));
  } else {
    out = WhyItWinsText(b, a, Objective::kThroughput, named("A", a));
  }
  if (a.step.slowest_stage != b.step.slowest_stage) {
    out += "  (the per-micro-batch parts are each one's slowest stage: A's stage " +
           std::to_string(a.step.slowest_stage) + ", B's stage " + std::to_string(b.step.slowest_stage) +
           "; the stage that sets each one's step time)\n";
  }
  const std::vector<Difference> memory = MemoryDifferences(a, b);
  if (!memory.empty()) {
    out += "  memory, B - A, on each one's worst stage (A's stage " + std::to_string(a.memory.worst_stage) +
           ", B's stage " + std::to_string(b.memory.worst_stage) + "):\n";
    for (const Difference& d : memory) out += "    " + SignedFixed(d.delta, 2) + " GiB  " + d.what + "\n";
  }
  return out;
}

Json DiffJson(const Pair& p) {
  Json step = Json::array(), memory = Json::array();
  for (const Difference& d : StepDifferences(p.a, p.b)) step.push_back({{"what", d.what}, {"b_minus_a_s", d.delta}});
  for (const Difference& d : MemoryDifferences(p.a, p.b)) {
    memory.push_back({{"term", d.what}, {"b_minus_a_gib", d.delta}});
  }
  const double gap = p.b.step.step_time_s - p.a.step.step_time_s;
  return Json{{"schema", kDiffSchema},
              {"inputs", {{"cluster", p.inputs.cluster.name}, {"model", p.inputs.model.name}, {"job", p.inputs.job.name}}},
              {"a", CandidateJson(p.a)},
              {"b", CandidateJson(p.b)},
              // Whether each fits in memory (costmodel/layout_verdict.h; its rules
              // broken are a's and b's "violations").
              {"fits", {{"a", JudgeLayout(p.a).fits}, {"b", JudgeLayout(p.b).fits}}},
              {"faster", gap > 0 ? "a" : gap < 0 ? "b" : "same"},
              {"step_gap_s", gap},
              {"peak_gap_gib", p.b.memory.peak_gib() - p.a.memory.peak_gib()},
              // The stage each figure is from: the per-micro-batch parts are
              // each one's slowest stage, the memory terms its worst.
              {"stages",
               {{"a", {{"slowest", p.a.step.slowest_stage}, {"worst_memory", p.a.memory.worst_stage}}},
                {"b", {{"slowest", p.b.step.slowest_stage}, {"worst_memory", p.b.memory.worst_stage}}}}},
              {"step_differences", step},
              {"memory_differences", memory}};
}

}  // namespace

int RunDiff(const DiffOptions& options, std::ostream& out, std::ostream& err) {
  const bool from_plan = !options.plan.empty();
  if (from_plan == !options.layouts.empty()) {
    return Usage(err, Status::Error("diff needs two --layout flags (with the input flags) or --plan FILE"));
  }
  if (!from_plan && options.layouts.size() != 2) {
    return Usage(err, Status::Error("--layout: expected it twice (A and B), found it " +
                                    std::to_string(options.layouts.size()) + " time(s)"));
  }
  if (!from_plan && !options.candidates.empty()) {
    return Usage(err, Status::Error("--candidates needs --plan FILE"));
  }
  if (from_plan) {
    const InputOptions& i = options.inputs;
    const std::pair<bool, const char*> excluded[] = {
        {!i.recipe.empty(), "--recipe"}, {!i.cluster.empty(), "--cluster"}, {!i.model.empty(), "--model"},
        {!i.job.empty(), "--job"},       {i.gpus.has_value(), "--gpus"},   {i.nodes.has_value(), "--nodes"}};
    for (const auto& [given, flag] : excluded) {
      if (given) return Usage(err, Status::Error(std::string(flag) + " with --plan: the plan names its inputs"));
    }
    if (auto c = ParseCandidates(options.candidates.empty() ? "1,2" : options.candidates); !c.ok()) {
      return Usage(err, c.status());
    }
  }
  if (Status s = CheckInputFlags(options.inputs); !s.ok()) return Usage(err, s);
  for (const std::string& l : options.layouts) {
    if (Status s = CheckLayoutText(l); !s.ok()) return Usage(err, s);
  }
  auto pair = LoadPair(options);
  if (!pair.ok()) return Fail(err, pair.status());
  const Pair& p = pair.value();
  WarnAboutFitMisses(p.model->comm_params(), err);
  // Either layout may not fit (or, from a plan file, break a rule): costed
  // all the same, and said so.
  err << VerdictWarning(JudgeLayout(p.a), "A (" + ShortDegrees(p.a.layout) + ")")
      << VerdictWarning(JudgeLayout(p.b), "B (" + ShortDegrees(p.b.layout) + ")");
  if (options.json) {
    out << DiffJson(p).dump(1) << "\n";
    return 0;
  }
  const size_t columns = OutputColumns();
  std::ostringstream text;  // fitted to the terminal's width
  text << (p.source.empty() ? "" : p.source + ": ") << InputsLine(p.inputs) << "\n";
  text << "A  " << CompactLayout(p.a.layout) << "\n   --layout  " << FormatLayout(p.a.layout) << "\n";
  text << "B  " << CompactLayout(p.b.layout) << "\n   --layout  " << FormatLayout(p.b.layout) << "\n\n";
  text << SideBySide(p.a, p.b, columns);
  text << "\nthe gap:\n" << GapText(p.a, p.b);
  out << WrapLines(text.str(), columns);
  return 0;
}

}  // namespace foldplan
