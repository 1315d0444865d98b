#include "cli/simulate_command.h"

#include <unistd.h>

#include <chrono>
#include <set>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/output.h"
#include "cli/plan_text.h"
#include "cli/usage_errors.h"
#include "core/decimal_text.h"
#include "core/formats.h"
#include "core/quoted_text.h"
#include "core/text_table.h"
#include "costmodel/layout_verdict.h"
#include "costmodel/plan_file.h"
#include "sim/expert_loads.h"
#include "sim/simulate.h"
#include "sim/trace.h"

namespace foldplan {
namespace {

using Json = nlohmann::ordered_json;

std::string Ms(double s) { return Fixed(s * 1e3, 1); }

// "--overlap tp=0,ep=1" (keys tp, cp, ep, dp, pp; values 0 or 1), "all", "none".
Result<OverlapOptions> ParseOverlap(const std::string& text) {
  OverlapOptions o;
  if (text.empty()) return o;
  if (text == "all" || text == "none") {
    const bool v = text == "all";
    o.tp = o.cp = o.ep = o.dp = o.pp = o.shared = o.host = v;
    return o;
  }
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    std::optional<bool>* slot = key == "tp"   ? &o.tp
                                : key == "cp" ? &o.cp
                                : key == "ep" ? &o.ep
                                : key == "dp" ? &o.dp
                                : key == "pp" ? &o.pp
                                : key == "shared" ? &o.shared
                                : key == "host" ? &o.host
                                              : nullptr;
    if (!slot || (value != "0" && value != "1")) {
      return Status::Error("--overlap: expected all, none or KEY=0|1 joined by commas (keys tp, cp, ep, dp, pp, shared, host), got '" +
                           item + "'");
    }
    *slot = value == "1";
    at = end + 1;
  }
  return o;
}

// --trace-ranks: distinct simulated ranks in [0, simulated), joined by
// commas; `which` says what they are (pipeline ranks, or every rank).
Result<std::vector<int>> ParseRanks(const std::string& text, int simulated, const std::string& which) {
  std::vector<int> ranks;
  if (text.empty()) return ranks;
  std::set<int> seen;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    const std::optional<int64_t> v = ParseDecimalInteger(item);
    if (!v || *v < 0 || *v >= simulated) {
      return Status::Error("--trace-ranks: expected simulated ranks 0.." + std::to_string(simulated - 1) + " (" +
                           which + ") joined by commas, found " + Quoted(item));
    }
    if (!seen.insert(static_cast<int>(*v)).second) {
      return Status::Error("--trace-ranks: rank " + item + " given twice: give each rank once");
    }
    ranks.push_back(static_cast<int>(*v));
    at = end + 1;
  }
  return ranks;
}

const char* OnOff(const std::optional<bool>& v) { return !v ? "as planned" : *v ? "on" : "off"; }

Json Breakdown(double step, double tokens, double mfu, double flops_per_token, double pipeline, double bubble,
               double dp, double optimizer, double host_syncs) {
  return Json{{"step_time_s", step},
              {"tokens_per_s", tokens},
              {"mfu", mfu},
              {"model_flops_per_token", flops_per_token},
              {"breakdown",
               {{"pipeline_s", pipeline},
                {"bubble_s", bubble},
                {"dp_exposed_s", dp},
                {"optimizer_s", optimizer},
                {"host_syncs_s", host_syncs}}}};
}

Json SimulationJson(const SimResult& r, const std::string& layout_text) {
  const StepBreakdown& a = r.analytical.step;
  Json j;
  j["schema"] = kSimulationSchema;
  j["layout"] = layout_text;
  // Whether the layout can run (the memory model's peak against HBM, its
  // rules): costmodel/layout_verdict.h.
  const Json verdict = VerdictJson(JudgeLayout(r.analytical));
  for (const auto& [key, value] : verdict.items()) j[key] = value;
  j["schedule"] = Name(r.schedule);
  j["overlap"] = {{"tp", OnOff(r.overlap.tp)}, {"cp", OnOff(r.overlap.cp)}, {"ep", OnOff(r.overlap.ep)},
                  {"dp", OnOff(r.overlap.dp)}, {"pp", r.overlap.pp ? "on" : "off"},
                  {"shared", r.overlap.shared ? "on" : "off"}, {"host", r.overlap.host ? "on" : "off"}};
  double bubble_s = r.bubble_fraction * r.pipeline_s;
  j["simulated"] = Breakdown(r.step_time_s, r.tokens_per_s, r.mfu, a.model_flops_per_token, r.pipeline_s, bubble_s,
                             r.dp_exposed_s, r.optimizer_s, r.host_step_s);
  j["simulated"]["bubble_fraction"] = r.bubble_fraction;
  j["simulated"]["tasks"] = r.tasks;
  j["simulated"]["events"] = r.events;
  j["analytical"] = Breakdown(a.step_time_s, a.tokens_per_s, a.mfu, a.model_flops_per_token, a.pipeline_s,
                              a.bubble_s, a.dp_exposed_s, a.optimizer_s, a.host_step_s);
  j["analytical"]["bubble_fraction"] = a.pipeline_s > 0 ? a.bubble_s / a.pipeline_s : 0;
  Json ranks = Json::array();
  for (const SimRankStats& s : r.ranks) {
    Json exposed, comm;
    for (int k = 1; k < kSimKindCount; ++k) {
      exposed[Name(static_cast<SimKind>(k))] = s.exposed_s[static_cast<size_t>(k)];
      comm[Name(static_cast<SimKind>(k))] = s.comm_s[static_cast<size_t>(k)];
    }
    ranks.push_back({{"rank", s.rank},
                     {"pipeline_rank", s.pipeline_rank},
                     {"busy_s", s.busy_s},
                     {"idle_s", s.idle_s},
                     {"compute_s", s.compute_s},
                     {"exposed_comm_s", exposed},
                     {"comm_s", comm},
                     {"pipeline_idle_s", s.pipeline_idle_s}});
  }
  j["simulated"]["ranks"] = ranks;
  Json by_kind;
  for (int k = 0; k < kSimKindCount; ++k) by_kind[Name(static_cast<SimKind>(k))] = r.critical_s[static_cast<size_t>(k)];
  Json segments = Json::array();
  for (const CriticalSegment& c : r.critical_path) {
    Json kinds;
    for (int k = 0; k < kSimKindCount; ++k) {
      if (c.by_kind_s[static_cast<size_t>(k)] > 0) kinds[Name(static_cast<SimKind>(k))] = c.by_kind_s[static_cast<size_t>(k)];
    }
    segments.push_back({{"rank", c.rank},
                        {"pass", Name(c.pass)},
                        {"microbatch", c.microbatch},
                        {"chunk", c.chunk},
                        {"start_s", c.start_s},
                        {"duration_s", c.duration_s},
                        {"by_kind_s", kinds},
                        {"tasks", c.tasks}});
  }
  j["critical_path"] = {{"by_kind_s", by_kind}, {"segments", segments}};
  Json memory = Json::array();
  for (const SimRankStats& s : r.ranks) {
    Json points = Json::array();
    for (const auto& [t, b] : s.memory_timeline) points.push_back(Json::array({t, b}));
    memory.push_back({{"rank", s.rank},
                      {"pipeline_rank", s.pipeline_rank},
                      {"peak_bytes", s.peak_memory_bytes},
                      {"peak_at_s", s.peak_memory_at_s},
                      {"model_peak_bytes", s.model_peak_memory_bytes},
                      {"peak_inflight_microbatches", s.peak_inflight_microbatches},
                      {"model_inflight_microbatches", s.model_inflight_microbatches}});
    if (r.loads_drawn) memory.back()["received_over_costed"] = s.received_over_costed;
    memory.back()["points"] = points;
  }
  j["memory_timeline"] = memory;
  return j;
}

std::string SimulationText(const SimResult& r, const std::string& layout_text) {
  const StepBreakdown& a = r.analytical.step;
  const std::string problems = VerdictProblems(JudgeLayout(r.analytical));
  // The compact notation, then the canonical text to paste (--layout).
  std::string out = "layout    " + CompactLayout(r.analytical.layout) + "\n--layout  " + layout_text + "\n" + (problems.empty() ? "" : "CANNOT RUN: it " + problems + "\n") + "schedule " + Name(r.schedule) + ", overlap tp " + OnOff(r.overlap.tp) +
                    ", cp " + OnOff(r.overlap.cp) + ", ep " + OnOff(r.overlap.ep) + ", dp " + OnOff(r.overlap.dp) +
                    ", pp " + (r.overlap.pp ? "on" : "off") + ", shared " + (r.overlap.shared ? "on" : "off") +
                    ", host " + (r.overlap.host ? "on" : "off") + "\n\n";
  using Align = TextTable::Align;
  TextTable t({"", "simulated", "analytical"}, {Align::kLeft, Align::kRight, Align::kRight});
  t.AddRow({"step time (ms)", Ms(r.step_time_s), Ms(a.step_time_s)});
  t.AddRow({"  pipeline (ms)", Ms(r.pipeline_s), Ms(a.pipeline_s)});
  t.AddRow({"  bubble (%)", Fixed(100 * r.bubble_fraction, 1), Fixed(a.pipeline_s > 0 ? 100 * a.bubble_s / a.pipeline_s : 0, 1)});
  t.AddRow({"  data parallel exposed (ms)", Ms(r.dp_exposed_s), Ms(a.dp_exposed_s)});
  t.AddRow({"  optimizer (ms)", Ms(r.optimizer_s), Ms(a.optimizer_s)});
  t.AddRow({"  host syncs (ms)", Ms(r.host_step_s), Ms(a.host_step_s)});
  t.AddRow({"tokens/s", WithCommas(static_cast<unsigned long long>(r.tokens_per_s)),
            WithCommas(static_cast<unsigned long long>(a.tokens_per_s))});
  t.AddRow({"MFU (%)", Fixed(100 * r.mfu, 1), Fixed(100 * a.mfu, 1)});
  out += t.Render();
  out += r.whole ? "\nper pipeline rank, its busiest rank (ms over the step; exposed = communication while no compute "
                   "runs):\n"
                 : "\nper pipeline rank (ms over the step; exposed = communication while no compute runs):\n";
  TextTable ranks({"stage", "busy", "compute", "exp tp", "exp cp", "exp ep", "exp dp", "exp pp", "exp host", "idle",
                   "peak GiB", "model GiB"},
                  {Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight,
                   Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight});
  // The whole path: each stage's busiest rank (its straggler).
  std::vector<const SimRankStats*> shown;
  for (const SimRankStats& s : r.ranks) {
    if (s.pipeline_rank >= int(shown.size())) shown.resize(size_t(s.pipeline_rank) + 1, nullptr);
    const SimRankStats*& slot = shown[size_t(s.pipeline_rank)];
    if (!slot || s.busy_s > slot->busy_s) slot = &s;
  }
  for (const SimRankStats* sp : shown) {
    if (!sp) continue;
    const SimRankStats& s = *sp;
    ranks.AddRow({r.whole ? std::to_string(s.pipeline_rank) + " (rank " + std::to_string(s.rank) + ")"
                          : std::to_string(s.pipeline_rank), Ms(s.busy_s), Ms(s.compute_s), Ms(s.exposed_s[1]),
                  Ms(s.exposed_s[2]), Ms(s.exposed_s[3]), Ms(s.exposed_s[4]), Ms(s.exposed_s[5]), Ms(s.exposed_s[6]),
                  Ms(s.idle_s),
                  Fixed(s.peak_memory_bytes / kBytesPerGiB, 1), Fixed(s.model_peak_memory_bytes / kBytesPerGiB, 1)});
  }
  out += ranks.Render("  ");
  if (r.loads_drawn) {
    // Each stage's highest peak: the rank its expert rows weigh on most.
    std::vector<const SimRankStats*> highest;
    for (const SimRankStats& s : r.ranks) {
      if (s.pipeline_rank >= int(highest.size())) highest.resize(size_t(s.pipeline_rank) + 1, nullptr);
      const SimRankStats*& slot = highest[size_t(s.pipeline_rank)];
      if (!slot || s.peak_memory_bytes > slot->peak_memory_bytes) slot = &s;
    }
    out += "\nper pipeline rank, its highest memory peak under the imbalance (its expert rows over the costed ones):\n";
    TextTable peaks({"stage", "rank", "rows x", "peak GiB", "model GiB"},
                    {Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight});
    for (const SimRankStats* sp : highest) {
      if (!sp) continue;
      peaks.AddRow({std::to_string(sp->pipeline_rank), std::to_string(sp->rank), Fixed(sp->received_over_costed, 3),
                    Fixed(sp->peak_memory_bytes / kBytesPerGiB, 2), Fixed(sp->model_peak_memory_bytes / kBytesPerGiB, 2)});
    }
    out += peaks.Render("  ");
  }
  // By kind on a line of its own, "kind=N ms" each, so that a narrow
  // terminal wraps between kinds, not inside one.
  out += "\ncritical path (what sets the step time), by kind:\n ";
  for (int k = 0; k < kSimKindCount; ++k) {
    if (r.critical_s[static_cast<size_t>(k)] > 0) {
      out += std::string(" ") + Name(static_cast<SimKind>(k)) + "=" + Ms(r.critical_s[static_cast<size_t>(k)]) + "ms";
    }
  }
  out += "\n";
  // The ranks it runs through, in order, merged.
  std::string through;
  int last = -1, hops = 0;
  for (const CriticalSegment& c : r.critical_path) {
    if (c.rank != last) {
      ++hops;
      last = c.rank;
    }
  }
  through = std::to_string(r.critical_path.size()) + " segments over " + std::to_string(hops) + " rank visits";
  out += "  " + through + "; " + WithCommas(r.tasks) + " tasks, " + WithCommas(r.events) + " events\n";
  const double diff = r.step_time_s - a.step_time_s;
  out += "\nsimulated - analytical: " + Fixed(diff * 1e3, 1) + " ms (" +
         Fixed(a.step_time_s > 0 ? 100 * diff / a.step_time_s : 0, 1) + "%)";
  out += "; pipeline " + Fixed((r.pipeline_s - a.pipeline_s) * 1e3, 1) + " ms, data parallel " +
         Fixed((r.dp_exposed_s - a.dp_exposed_s) * 1e3, 1) + " ms\n";
  return out;
}

}  // namespace

Result<SimulatedRanking> RankBySimulation(const CostModel& model, const std::vector<Evaluation>& candidates) {
  struct Row {
    size_t analytical = 0;
    double analytical_s = 0, simulated_s = 0, pipeline_s = 0, dp_s = 0, optimizer_s = 0;
  };
  std::vector<Row> rows;
  for (size_t i = 0; i < candidates.size(); ++i) {
    auto r = Simulate(model, candidates[i].layout);
    if (!r.ok()) return r.status();
    const StepBreakdown& a = candidates[i].step;
    rows.push_back({i, a.step_time_s, r->step_time_s, r->pipeline_s - a.pipeline_s, r->dp_exposed_s - a.dp_exposed_s,
                    r->optimizer_s - a.optimizer_s});
  }
  std::vector<size_t> order(rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return rows[x].simulated_s < rows[y].simulated_s; });
  using Align = TextTable::Align;
  TextTable t({"sim", "model", "layout", "model ms", "sim ms", "diff", "pipeline", "dp", "optimizer"},
              {Align::kRight, Align::kRight, Align::kLeft, Align::kRight, Align::kRight, Align::kRight, Align::kRight,
               Align::kRight, Align::kRight});
  SimulatedRanking out;
  out.json = Json::array();
  int moved = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const Row& row = rows[order[k]];
    const Layout& l = candidates[row.analytical].layout;
    moved += row.analytical != k;
    auto ms = [](double s) { return (s >= 0 ? "+" : "") + Fixed(s * 1e3, 1); };
    t.AddRow({std::to_string(k + 1), std::to_string(row.analytical + 1), ShortDegrees(l), Ms(row.analytical_s),
              Ms(row.simulated_s), Fixed(100 * (row.simulated_s / row.analytical_s - 1), 1) + "%",
              ms(row.pipeline_s), ms(row.dp_s), ms(row.optimizer_s)});
    out.json.push_back({{"simulated_rank", k + 1},
                        {"analytical_rank", row.analytical + 1},
                        {"layout", FormatLayout(l)},
                        {"analytical_step_time_s", row.analytical_s},
                        {"simulated_step_time_s", row.simulated_s},
                        {"difference_s", {{"pipeline", row.pipeline_s}, {"dp_exposed", row.dp_s},
                                          {"optimizer", row.optimizer_s}}}});
  }
  out.text = "simulated re-ranking of the analytical top " + std::to_string(rows.size()) +
             " (ms; the parts are simulated - analytical):\n" + t.Render("  ");
  if (moved == 0) {
    out.text += "  the simulator keeps the analytical order\n";
  } else {
    // Why the first disagreement: the parts that moved most.
    for (size_t k = 0; k < order.size(); ++k) {
      if (order[k] == k) continue;
      const Row& a = rows[order[k]];
      const Row& b = rows[k];
      auto biggest = [](const Row& r) {
        const double p = std::abs(r.pipeline_s), d = std::abs(r.dp_s), o = std::abs(r.optimizer_s);
        return p >= d && p >= o ? std::string("its pipeline (fill, drain and sends as simulated)")
               : d >= o         ? std::string("its data-parallel traffic (buckets as simulated)")
                                : std::string("its optimizer step");
      };
      out.text += "  the orders disagree at " + std::to_string(k + 1) + ": the model's #" +
                  std::to_string(a.analytical + 1) + " simulates faster than its #" + std::to_string(b.analytical + 1) +
                  (biggest(a) == biggest(b) ? ", mostly through " + biggest(a) + ", in both\n"
                                            : ", mostly through " + biggest(a) + " and " + biggest(b) + " respectively\n");
      break;
    }
  }
  return out;
}

bool ShowSimulateProgress(bool stderr_is_terminal, double elapsed_s) { return stderr_is_terminal && elapsed_s >= 1.0; }

std::string SimulateProgressLine(const std::string& phase, double share, double elapsed_s) {
  const double pct = std::min(100.0, std::max(0.0, 100 * share));
  return "\rsimulate: " + phase + " " + Fixed(pct, 0) + "% (" + Fixed(elapsed_s, 0) + " s)";
}

int RunSimulate(const SimulateOptions& options, std::ostream& out, std::ostream& err) {
  const bool from_plan = !options.plan.empty();
  if (options.max_tasks < 1 || options.max_tasks > kMostSimTaskSlots) {
    return Usage(err, Status::Error("--max-tasks: expected 1 to " +
                                    WithCommas(static_cast<unsigned long long>(kMostSimTaskSlots)) + ", found " +
                                    std::to_string(options.max_tasks)));
  }
  if (from_plan == bool(options.layout)) {
    return Usage(err, Status::Error("simulate needs --layout (with --cluster, --model, --job) or --plan FILE"));
  }
  if (Status s = CheckCandidateNumber("--candidate", options.candidate); !s.ok()) return Usage(err, s);
  std::optional<PipelineSchedule> schedule;
  if (!options.schedule.empty()) {
    schedule = PipelineScheduleNamed(options.schedule);
    if (!schedule) {
      return Usage(err, Status::Error("--schedule: expected " + PipelineScheduleChoices() + ", got '" +
                                      options.schedule + "'" +
                                      DidYouMean(options.schedule, ChoiceNames(PipelineScheduleChoices()))));
    }
  }
  auto overlap = ParseOverlap(options.overlap);
  if (!overlap.ok()) return Usage(err, overlap.status());
  auto imbalance = ParseLoadSpec(options.imbalance);
  if (!imbalance.ok()) return Fail(err, imbalance.status());
  ClusterSpec cluster;
  ModelSpec model_spec;
  JobSpec job;
  CalibrationUse use;
  Layout layout;
  if (from_plan) {
    auto plan = LoadPlanFile(options.plan, options.candidate);
    if (!plan.ok()) return Fail(err, plan.status());
    cluster = plan.value().cluster;
    model_spec = plan.value().model;
    job = plan.value().job;
    layout = plan.value().layout;
    if (!options.inputs.calibration.empty()) cluster.calibration = options.inputs.calibration;
    use.allow_other_gpu = options.inputs.force_calibration;
  } else {
    if (Status s = CheckInputFlags(options.inputs); !s.ok()) return Usage(err, s);
    if (Status s = CheckLayoutText(options.layout); !s.ok()) return Usage(err, s);
    auto inputs = LoadInputs(options.inputs);
    if (!inputs.ok()) return Fail(err, inputs.status());
    cluster = inputs.value().cluster;
    model_spec = inputs.value().model;
    job = inputs.value().job;
    use = inputs.value().calibration_use;
    const int world = job.world_size > 0 ? job.world_size : cluster.total_gpus();
    auto parsed = ParseLayout(*options.layout, world, &job);
    if (!parsed.ok()) return Fail(err, parsed.status());
    layout = parsed.value();
  }
  if (schedule) layout.schedule = *schedule;  // --schedule is the layout's schedule= key
  // Before any work: a dense model has nothing to imbalance (a usage error),
  // a histogram needs one load per expert (an input file's error).
  if (Status s = CheckLoadSpecExperts(imbalance.value(), model_spec.is_moe() ? model_spec.moe->experts : 0); !s.ok()) {
    return model_spec.is_moe() ? Fail(err, s) : Usage(err, s);
  }
  auto model = CostModel::Create(cluster, model_spec, job, use);
  if (!model.ok()) return Fail(err, model.status());
  const std::vector<Violation> violations = CheckLayout(layout, model.value()->legality());
  if (!violations.empty()) return Fail(err, Status::Error(IllegalLayoutText(layout, violations)));
  SimOptions sim;
  sim.imbalance = imbalance.value();
  sim.whole = options.whole;
  auto ranks = sim.every_rank()
                   ? ParseRanks(options.trace_ranks, std::max(1, layout.world), "every rank is simulated")
                   : ParseRanks(options.trace_ranks, std::max(1, layout.pp), "the pipeline ranks; --whole simulates every rank");
  if (!ranks.ok()) return Usage(err, ranks.status());
  WarnAboutCalibrationGpu(model.value()->comm_params(), cluster, err);
  sim.overlap = overlap.value();
  sim.seed = options.seed;
  sim.max_task_slots = options.max_tasks;
  sim.trace = !options.trace.empty();
  // Progress on a terminal, once the run has taken a second.
  const bool terminal = options.progress.value_or(isatty(STDERR_FILENO) == 1);
  const auto began = std::chrono::steady_clock::now();
  bool shown = false;
  if (terminal) {
    sim.progress = [&](const char* phase, double share) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
      if (!ShowSimulateProgress(true, elapsed)) return;
      err << SimulateProgressLine(std::string(phase) == "building" ? "building the step" : "running the step", share,
                                  elapsed)
          << std::flush;
      shown = true;
    };
  }
  auto result = Simulate(*model.value(), layout, sim);
  if (shown) err << "\r\033[K" << std::flush;  // the progress line cleared
  if (!result.ok()) return Fail(err, result.status());
  WarnAboutFitMisses(model.value()->comm_params(), err);
  const SimResult& r = result.value();
  const std::string text = FormatLayout(r.analytical.layout);
  err << VerdictWarning(JudgeLayout(r.analytical), "layout " + ShortDegrees(r.analytical.layout));
  if (!options.trace.empty()) {
    if (Status s = WriteOrPrint(TraceJson(r, ranks.value(), text), options.trace, out, err); !s.ok()) {
      return Fail(err, s);
    }
  }
  if (options.json) {
    out << SimulationJson(r, text).dump(1) << "\n";
  } else {
    out << WrapLines(SimulationText(r, text), OutputColumns());
  }
  return 0;
}

}  // namespace foldplan
