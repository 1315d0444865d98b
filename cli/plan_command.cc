// `foldplan plan` and `foldplan explain`: the cost model wired to the search.
#include "cli/plan_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <numeric>
#include <set>
#include <sstream>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "cli/csv.h"
#include "cli/output.h"
#include "cli/plan_advice.h"
#include "cli/plan_text.h"
#include "cli/simulate_command.h"
#include "core/formats.h"
#include "core/text_table.h"
#include "costmodel/evaluate.h"
#include "costmodel/layout_verdict.h"
#include "costmodel/memory.h"
#include "costmodel/plan_file.h"
#include "planner/enumerate.h"
#include "planner/launch_files.h"
#include "planner/legality.h"
#include "planner/pipeline_split.h"
#include "planner/search.h"
#include "planner/trainer_rules.h"

namespace foldplan {
namespace {

using Align = TextTable::Align;


// A shown candidate's twins: the layouts differing from it only in group
// order that are legal and fit (under the memory limit too), named by
// their order strings (plan shows twins once; --all shows each).
struct Twins {
  std::vector<std::string> orders;
};

// The job's other orders for `layout`, re-scored: its twins.
Twins TwinsOf(const CostModel& cost, const Layout& layout, std::optional<double> limit_gib, Objective objective) {
  Twins twins;
  for (const std::string& order : cost.legality().job->orders) {
    if (order == layout.order) continue;
    Layout twin = layout;
    twin.order = order;
    if (!CheckLayout(twin, cost.legality()).empty()) continue;
    const LayoutScore score = cost.Score(twin, objective == Objective::kMemory);
    if (!score.fits || (limit_gib && score.peak_memory_gib > *limit_gib)) continue;
    twins.orders.push_back(order);
  }
  return twins;
}

// The layout with its order left out: what twins share.
std::string TwinKey(Layout layout) {
  layout.order.clear();
  return FormatLayout(layout);
}

// "1 twin: tp-cp-ep-pp-dp" (the count, then the orders), "" for none.
std::string TwinsText(const Twins& twins) {
  if (twins.orders.empty()) return "";
  std::string names;
  for (const std::string& o : twins.orders) names += (names.empty() ? "" : ", ") + o;
  return std::to_string(twins.orders.size()) + (twins.orders.size() == 1 ? " twin: " : " twins: ") + names;
}

// plan's table, fitted to `columns`: one line a candidate when that fits,
// else the layout's degrees, options and twins on lines of their own and
// the two largest exposed collectives one a line. `twins` (distinct, the
// default): the twins of each row; null with --all.
std::string CandidatesTable(const std::vector<Evaluation>& evals, const std::vector<Twins>* twins, size_t columns) {
  const auto render = [&](bool stacked) {
    TextTable table({"#", "layout", "step", "tokens/s", "TFLOP/s/GPU", "MFU", "mem GiB", "exposed comm per step"},
                    {Align::kRight, Align::kLeft, Align::kRight, Align::kRight, Align::kRight, Align::kRight,
                     Align::kRight, Align::kLeft});
    size_t degrees = 0;
    for (size_t i = 0; i < evals.size(); ++i) {
      const Evaluation& e = evals[i];
      const std::string twin = twins ? TwinsText((*twins)[i]) : "";
      std::string layout = stacked ? ShortDegrees(e.layout) + "\n" + OptionsText(e.layout) : CompactLayout(e.layout);
      if (!twin.empty()) layout += (stacked ? "\n" : "; ") + twin;
      std::string exposed = TopExposed(e, stacked ? 2 : 3);
      for (size_t at; stacked && (at = exposed.find(", ")) != std::string::npos;) exposed.replace(at, 2, "\n");
      degrees = std::max(degrees, ShortDegrees(e.layout).size());
      table.AddRow({std::to_string(i + 1), layout, Seconds(e.step.step_time_s),
                    WithCommas(static_cast<unsigned long long>(e.step.tokens_per_s)), Fixed(e.step.tflops_per_gpu, 1),
                    Fixed(100 * e.step.mfu, 1) + "%", Fixed(e.memory.peak_gib(), 1), exposed});
    }
    table.SetMinWidth(1, degrees);  // the degrees stay on one line
    return table.Render("  ", stacked ? columns : 0);
  };
  const std::string flat = render(false);
  return WidestLine(flat) <= columns ? flat : render(true);
}

// The plan's candidates as CSV (doc/formats.md, "CSV"): one record each,
// the numbers those of the plan file's candidates.
std::string CandidatesCsv(const std::vector<Evaluation>& evals, const std::vector<uint64_t>& same,
                          const std::vector<Twins>& twins) {
  std::string out = CsvRecord({"rank", "layout", "tp", "cp", "dp", "pp", "vpp", "ep", "etp", "edp", "mbs", "order",
                               "cp_style", "recompute", "placement", "dispatcher", "precision", "equivalent_layouts",
                               "step_time_s", "tokens_per_s", "mfu", "peak_gib", "fits", "pipeline_s", "bubble_s",
                               "dp_exposed_s", "optimizer_s", "microbatches", "tflops_per_gpu",
                               "mfu_precision_peak", "twin_orders"});
  for (size_t i = 0; i < evals.size(); ++i) {
    const Evaluation& e = evals[i];
    const Layout& l = e.layout;
    std::string twin_orders;
    if (i < twins.size()) {
      for (const std::string& o : twins[i].orders) twin_orders += (twin_orders.empty() ? "" : " ") + o;
    }
    out += CsvRecord({std::to_string(i + 1), FormatLayout(l), std::to_string(l.tp), std::to_string(l.cp),
                      std::to_string(l.dp), std::to_string(l.pp), std::to_string(l.vpp), std::to_string(l.ep),
                      std::to_string(l.etp), std::to_string(l.edp), std::to_string(l.mbs), l.order,
                      Name(l.cp_style), Name(l.recompute), Name(l.placement), Name(l.dispatcher),
                      Name(l.precision), std::to_string(same[i]), CsvNumber(e.step.step_time_s),
                      CsvNumber(e.step.tokens_per_s), CsvNumber(e.step.mfu), CsvNumber(e.memory.peak_gib()),
                      e.memory.fits ? "true" : "false", CsvNumber(e.step.pipeline_s), CsvNumber(e.step.bubble_s),
                      CsvNumber(e.step.dp_exposed_s), CsvNumber(e.step.optimizer_s),
                      std::to_string(e.step.microbatches), CsvNumber(e.step.tflops_per_gpu),
                      CsvNumber(e.step.mfu_precision_peak), twin_orders});
  }
  return out;
}

// A recipe that relies on what the model does not cover says so.
void WarnAboutRecipe(const Inputs& in, std::ostream& err) {
  if (!in.recipe) return;
  for (RecipeFeature f : in.recipe->not_modelled) {
    err << "note: recipe " << in.recipe->name << " uses " << Name(f)
        << ", which foldplan does not model: its memory estimate leaves that saving out\n";
  }
}

// How the search's best compares with the recipe's own layout.
std::string RecipeComparison(const Evaluation& best, const Evaluation& recipe, uint64_t better, uint64_t fitting) {
  std::string out = "the recipe's layout (" + CompactLayout(recipe.layout) + "):\n";
  if (!recipe.violations.empty()) {
    out += "  is illegal here:\n";
    for (const auto& v : recipe.violations) out += "    " + std::string(Name(v.rule)) + ": " + v.detail + "\n";
    return out;
  }
  out += "  step " + Seconds(recipe.step.step_time_s) + ", " +
         WithCommas(static_cast<unsigned long long>(recipe.step.tokens_per_s)) + " tokens/s, " +
         TflopsText(recipe.step) + ", " + MfuText(recipe.step, recipe.layout.precision) + ", peak memory " +
         Fixed(recipe.memory.peak_gib(), 1) + " GiB";
  if (!recipe.memory.fits) {
    out += ": DOES NOT FIT in " + Fixed(recipe.memory.hbm_gib, 1) + " GiB here, so it is not among the candidates\n";
  } else {
    out += "; it ranks " + WithCommas(better + 1) + " of " + WithCommas(fitting) + " fitting layouts\n";
  }
  const double gain = recipe.step.step_time_s / best.step.step_time_s - 1;
  if (FormatLayout(best.layout) == FormatLayout(recipe.layout)) {
    out += "  it is the best layout found\n";
  } else if (gain > 0) {
    out += "  the best layout is " + Fixed(100 * gain, 1) + "% faster (" + Seconds(best.step.step_time_s) +
           " vs " + Seconds(recipe.step.step_time_s) + " per step, " + Seconds(recipe.step.step_time_s - best.step.step_time_s) + " less):\n" + StepDifferencesText(best, recipe);
  } else {
    out += "  it is faster than every fitting layout of the search (" + Seconds(recipe.step.step_time_s) +
           " vs " + Seconds(best.step.step_time_s) + ")\n";
  }
  return out;
}

// The best layout's Megatron-LM arguments on one line, or why it has none.
// Wrapped to `columns` as a shell continues a line (" \\"), so that it
// pastes whole.
std::string MegatronText(const Layout& layout, const Inputs& in, size_t columns) {
  Result<std::vector<std::string>> args = MegatronArguments(layout, in.cluster, &in.model, &in.job);
  if (!args.ok()) return "megatron: " + args.status().message() + "\n";
  std::string line;
  size_t used = 2;  // the indent
  for (const std::string& a : args.value()) {
    // A flag and its value stay together; a line ends in " \\" (2 columns).
    const bool flag = a.rfind("--", 0) == 0;
    if (!line.empty() && flag && used + 1 + a.size() + 2 > columns) {
      line += " \\\n    ";
      used = 4;
    } else if (!line.empty()) {
      line += " ";
      ++used;
    }
    line += a;
    used += a.size();
  }
  std::string env;
  for (const LaunchEnv& e : TrainerLaunchEnv(layout)) env += e.name + "=" + e.value + " ";
  return "megatron-lm arguments (foldplan ranks --format megatron prints them one per line" +
         std::string(env.empty() ? "" : "; the launcher files set " + env.substr(0, env.size() - 1)) + "):\n  " +
         line + "\n";
}

// plan's "other precisions": what each precision recipe the GPU runs but
// the best layout's would give. Each is the best layout re-costed by the
// cost model with only its precision changed ("this layout") when that
// layout is legal and within the memory limit; otherwise (an FP8 recipe's
// weight copies push it over the limit, or fp8-delayed refuses its
// recompute modules) a search of the layouts of the best one's degrees
// (tp, cp, pp, vpp, ep, etp, world pinned as `--fix` pins them; mbs,
// recompute, order, placement and the recipe options free) in that
// precision, its best reported with what it changed. `--precision P`
// searches every degree in one.
std::string OtherPrecisionsText(const Evaluation& best, const Inputs& in, std::optional<double> limit_gib,
                                Objective objective, int threads) {
  std::string lines;
  for (int i = 0; i < kPrecisionCount; ++i) {
    const Precision p = Precision(i);
    if (p == best.layout.precision || !rules::PrecisionProblem(in.cluster.gpu, p).empty()) continue;
    const std::string head = std::string("  with --precision ") + Name(p) + ": ";
    JobSpec job = in.job;
    job.precisions = {p};
    Layout layout = best.layout;
    layout.precision = p;
    auto model = CostModel::Create(in.cluster, in.model, job, in.calibration_use);
    if (!model.ok()) continue;
    std::optional<Evaluation> e = model.value()->Evaluate(layout);
    std::string how = "this layout";
    const bool within = e->violations.empty() && e->memory.fits && (!limit_gib || e->memory.peak_gib() <= *limit_gib);
    if (!within) {
      how = "these degrees re-searched, as this layout " +
            (!e->violations.empty() ? "breaks " + std::string(Name(e->violations.front().rule))
                                    : "peaks at " + Fixed(e->memory.peak_gib(), 1) + " GiB");
      LayoutPins pins;
      pins.world = layout.world;
      pins.tp = layout.tp;
      pins.cp = layout.cp;
      pins.pp = layout.pp;
      pins.vpp = layout.vpp;
      pins.ep = layout.ep;
      pins.etp = layout.etp;
      job = PinnedJob(job, pins);
      auto pinned = CostModel::Create(in.cluster, in.model, job, in.calibration_use);
      if (!pinned.ok()) continue;
      SearchOptions one;
      one.top = 1;
      one.threads = threads;
      one.pins = &pins;
      one.max_peak_memory_gib = limit_gib;
      const SearchResult found =
          SearchLayouts(pinned.value()->legality(), CostScorer(*pinned.value(), objective), one);
      e.reset();
      if (found.status.ok() && !found.best.empty()) e = pinned.value()->Evaluate(found.best.front().layout);
      if (!e) {
        lines += head + "no layout of these degrees fits (" + how + ")\n";
        continue;
      }
      how += "; its best: " + OptionsText(e->layout);
    }
    lines += head + WithCommas(static_cast<unsigned long long>(e->step.tokens_per_s)) + " tokens/s (" +
             (e->step.tokens_per_s >= best.step.tokens_per_s ? "+" : "") +
             Fixed(100 * (e->step.tokens_per_s / best.step.tokens_per_s - 1), 1) + "%), step " +
             Seconds(e->step.step_time_s) + ", peak " + Fixed(e->memory.peak_gib(), 1) + " GiB (" + how + ")\n";
  }
  if (lines.empty()) return "";
  return std::string("other precisions (the best layout re-costed in each recipe the ") + in.cluster.gpu.name +
         " runs; `--precision P` searches in one):\n" + lines;
}

// Which trainers can run the best layout. For each that cannot: the rule it
// breaks and the best layout it can run, found by the same search with its
// rules (`plan --trainer T`), with its step time; for each that can, what
// it runs that the cost model prices as Megatron (TrainerCostNotes).
std::string TrainersText(const Evaluation& best, const Inputs& in, const SearchOptions& options,
                         Objective objective) {
  std::string out = "trainers (doc/trainers.md; `--trainer T` plans for one):\n";
  for (int i = 0; i < kTrainerCount; ++i) {
    const Trainer t = Trainer(i);
    if (t == in.job.trainer) continue;
    JobSpec job = in.job;
    job.trainer = t;
    const TrainerContext tctx{&in.cluster, &in.model, &job};
    const std::string name = Name(t);
    const Status refusal = TrainerRefusal(t, best.layout, tctx);
    if (refusal.ok()) {
      out += "  " + name + ": runs it";
      const std::vector<std::string> notes = TrainerCostNotes(t, best.layout, tctx);
      for (size_t n = 0; n < notes.size(); ++n) out += (n == 0 ? " (" : "; ") + notes[n] + (n + 1 == notes.size() ? ")" : "");
      out += "\n";
      continue;
    }
    const std::vector<Violation> why = CheckLayout(best.layout, {&in.cluster, &in.model, &job, nullptr});
    out += "  " + name + ": cannot: " + (why.empty() ? refusal.message() : std::string(Name(why[0].rule)) + ": " + why[0].detail) + "\n";
    job = JobForTrainer(job);
    auto model = CostModel::Create(in.cluster, in.model, job, in.calibration_use);
    if (!model.ok()) continue;
    SearchOptions one = options;
    one.top = 1;
    one.progress = nullptr;
    one.rank_objective.reset();
    const SearchResult found = SearchLayouts(model.value()->legality(), CostScorer(*model.value(), objective), one);
    if (!found.status.ok() || found.best.empty()) {
      out += "    no layout it can run fits\n";
      continue;
    }
    const Evaluation e = model.value()->Evaluate(found.best.front().layout);
    // Its best may beat Megatron's (a schedule or recipe Megatron lacks).
    const double change = 100 * (e.step.step_time_s / best.step.step_time_s - 1);
    out += "    its best: " + CompactLayout(e.layout) + ": " + Seconds(e.step.step_time_s) + " per step (" +
           Fixed(std::abs(change), 1) + (change >= 0 ? "% slower)\n" : "% faster)\n");
  }
  return out;
}

// --gpus-range: "A:B" is A, 2A, 4A, ... up to B, and B (world sizes double
// as layouts' degrees do; B is asked for); "A:B:S" is A, A+S, ... up to B;
// "N,M,..." those sizes. Sizes in [1, kMaxWorldSize], ascending, at most
// kMaxWorldSizes of them.
Result<std::vector<int>> ParseGpusRange(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return Status::Error("--gpus-range " + text + ": " + why +
                         " (expected A:B, A:B:STEP or a list N,M,... of GPU counts)");
  };
  auto number = [](const std::string& item) -> std::optional<int64_t> {
    if (item.empty() || item.size() > 9 || item.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    const int64_t v = std::stoll(item);
    if (v < 1 || v > kMaxWorldSize) return std::nullopt;
    return v;
  };
  std::vector<std::string> items;
  const char sep = text.find(':') != std::string::npos ? ':' : ',';
  for (size_t at = 0; at <= text.size();) {
    const size_t end = std::min(text.find(sep, at), text.size());
    items.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  std::vector<int64_t> values;
  for (const std::string& item : items) {
    const auto v = number(item);
    if (!v) return bad("\"" + item + "\" is not a GPU count in [1, " + std::to_string(kMaxWorldSize) + "]");
    values.push_back(*v);
  }
  std::vector<int> sizes;
  if (sep == ':') {
    if (values.size() < 2 || values.size() > 3) return bad("a range has two or three parts");
    const int64_t lo = values[0], hi = values[1];
    if (lo > hi) return bad("the start is above the end");
    for (int64_t n = lo; n <= hi && sizes.size() <= kMaxWorldSizes; n = values.size() == 3 ? n + values[2] : 2 * n) {
      sizes.push_back(static_cast<int>(n));
    }
    if (sizes.back() != hi && values.size() == 2) sizes.push_back(static_cast<int>(hi));
  } else {
    for (int64_t v : values) {
      if (!sizes.empty() && v <= sizes.back()) return bad("list the sizes ascending, each once");
      sizes.push_back(static_cast<int>(v));
    }
  }
  if (sizes.size() > static_cast<size_t>(kMaxWorldSizes)) {
    return bad("more than " + std::to_string(kMaxWorldSizes) + " sizes");
  }
  return sizes;
}

// When no layout is legal, whether the global batch is what rules them all
// out: the layouts legal but for the batch rules (the job re-enumerated
// with a global batch every dp x mbs divides into a multiple of every
// pipeline's needs) are the candidates; a warning when the job's batch is
// below dp x mbs for every one of them, or gives fewer micro-batches than
// pp for every one of them. Each names the flag to change.
std::vector<std::string> UnrealisticJobWarnings(const CostModel& cost, const LayoutPins& pins) {
  const LegalityContext ctx = cost.legality();
  const JobSpec& job = *ctx.job;
  const int64_t world = ctx.job->world_size > 0 ? ctx.job->world_size : ctx.cluster->total_gpus();
  int64_t mbs_lcm = 1;
  for (int m : job.micro_batch_sizes) mbs_lcm = std::lcm(mbs_lcm, int64_t{m});
  const int64_t relaxed_batch = world * world * mbs_lcm;
  if (relaxed_batch > kMaxGlobalBatch) return {};  // too large to enumerate with; say nothing
  JobSpec relaxed = job;
  relaxed.global_batch = static_cast<int>(relaxed_batch);
  LegalityContext relaxed_ctx = ctx;
  relaxed_ctx.job = &relaxed;
  const int64_t batch = job.global_batch;
  int64_t least_dp_mbs = INT64_MAX, least_pp = INT64_MAX, least_batch_for_pp = INT64_MAX;
  bool dp_fits = false, pp_fed = false;
  // Streamed: the relaxed batch can make many layouts legal.
  EnumerateOptions enumerate;
  enumerate.pins = &pins;
  enumerate.collect_layouts = false;
  enumerate.visit = [&](const Layout& l) {
    const int64_t dp_mbs = int64_t{l.dp} * l.mbs;
    least_dp_mbs = std::min(least_dp_mbs, dp_mbs);
    if (dp_mbs > batch) return;
    dp_fits = true;
    pp_fed |= batch / dp_mbs >= l.pp;
    least_pp = std::min(least_pp, int64_t{l.pp});
    least_batch_for_pp = std::min(least_batch_for_pp, dp_mbs * l.pp);
  };
  const Enumeration e = EnumerateLayouts(relaxed_ctx, enumerate);
  if (e.legal_count == 0) return {};  // something else rules every layout out
  const std::string on = " on " + std::to_string(world) + " GPUs";
  if (!dp_fits) {
    return {"warning: the global batch, " + std::to_string(batch) + " sequences, is fewer than the data-parallel ranks" +
            on + " can use: every layout legal but for the batch needs dp x mbs >= " + std::to_string(least_dp_mbs) +
            "; raise --global-batch to at least " + std::to_string(least_dp_mbs) + " or plan fewer --gpus"};
  }
  if (!pp_fed) {
    return {"warning: the global batch, " + std::to_string(batch) + " sequences, gives fewer micro-batches than" +
            " pipeline stages for every pp" + on + " (the fewest stages a layout can have is " +
            std::to_string(least_pp) + "); raise --global-batch to at least " + std::to_string(least_batch_for_pp) +
            ", plan fewer --gpus, or pin a pipeline with --fix pp=..."};
  }
  return {};
}

// plan's own flags on their own (usage errors).
Status CheckPlanFlags(const PlanOptions& o) {
  if (o.objective != "throughput" && o.objective != "memory") {
    return Status::Error("--objective: expected throughput or memory, found \"" + o.objective + "\"");
  }
  if (o.top < 1 || o.top > kMaxTop) {
    return Status::Error("--top: expected an integer in [1, " + std::to_string(kMaxTop) + "], found " +
                         std::to_string(o.top));
  }
  if (o.simulate_top < 0 || o.simulate_top > kMaxTop) {
    return Status::Error("--simulate-top: expected an integer in [0, " + std::to_string(kMaxTop) + "], found " +
                         std::to_string(o.simulate_top));
  }
  if (o.threads < 1 || o.threads > kMaxSearchThreads) {
    return Status::Error("--threads: expected an integer in [1, " + std::to_string(kMaxSearchThreads) +
                         "], found " + std::to_string(o.threads));
  }
  if (auto f = ParseTableFormat(o.format, o.json); !f.ok()) return f.status();
  // Memory limits: a number of GiB a GPU could have (kMaxMemoryGib).
  if (o.max_mem_gib && !(*o.max_mem_gib > 0 && *o.max_mem_gib <= kMaxMemoryGib)) {
    return Status::Error("--max-mem-gib: expected a number of GiB in (0, " + Fixed(kMaxMemoryGib, 0) + "]");
  }
  if (o.headroom_gib && !(*o.headroom_gib >= 0 && *o.headroom_gib <= kMaxMemoryGib)) {
    return Status::Error("--headroom-gib: expected a number of GiB in [0, " + Fixed(kMaxMemoryGib, 0) + "]");
  }
  if (!o.gpus_range.empty()) {
    const std::pair<bool, const char*> excluded[] = {{o.inputs.gpus.has_value(), "--gpus"},
                                                     {!o.inputs.recipe.empty(), "--recipe"},
                                                     {!o.output.empty(), "-o"},
                                                     {o.simulate_top > 0, "--simulate-top"}};
    for (const auto& [given, flag] : excluded) {
      if (given) return Status::Error(std::string(flag) + " with --gpus-range: the range plans several world sizes");
    }
    if (auto sizes = ParseGpusRange(o.gpus_range); !sizes.ok()) return sizes.status();
  }
  return CheckInputFlags(o.inputs);
}

// The HBM kept free: --headroom-gib, else the default headroom
// (DefaultHeadroomGib, costmodel/memory.h: 5% of HBM, for what the memory
// model leaves out) unless --max-mem-gib sets the limit itself; 0: none.
double HeadroomGib(const PlanOptions& o, double hbm_gib) {
  if (o.headroom_gib) return *o.headroom_gib;
  return o.max_mem_gib ? 0.0 : DefaultHeadroomGib(hbm_gib);
}

// The peak a layout may reach under --max-mem-gib and the headroom (the
// lower of the two), or none; `hbm_gib` is the GPU's memory.
Result<std::optional<double>> MemoryLimit(const PlanOptions& o, double hbm_gib) {
  std::optional<double> limit = o.max_mem_gib;
  const double headroom = HeadroomGib(o, hbm_gib);
  if (headroom > 0) {
    if (headroom >= hbm_gib) {
      return Status::Error("--headroom-gib " + Fixed(headroom, 1) + ": the GPU has only " + Fixed(hbm_gib, 1) +
                           " GiB");
    }
    limit = std::min(limit.value_or(hbm_gib), hbm_gib - headroom);
  }
  return limit;
}

std::string MemoryLimitText(const PlanOptions& o, double limit_gib) {
  std::string flags;
  if (o.max_mem_gib) flags = "--max-mem-gib " + Fixed(*o.max_mem_gib, 1);
  if (o.headroom_gib) flags += (flags.empty() ? "" : ", ") + std::string("--headroom-gib ") + Fixed(*o.headroom_gib, 1);
  if (flags.empty()) flags = "the default headroom";
  return "peak " + Fixed(limit_gib, 1) + " GiB (" + flags + ")";
}

// plan's one line on the memory it keeps free: "memory margin: 3.98 GiB of
// the 79.6 GiB HBM kept free, peak at most 75.62 GiB (the default: 5% of
// HBM for what the memory model leaves out, doc/cost-model-memory.md;
// --headroom-gib 0 turns it off)"; with --max-mem-gib the limit it sets.
std::string MemoryMarginLine(const PlanOptions& o, double hbm_gib, std::optional<double> limit_gib) {
  if (!limit_gib) return "memory margin: none (--headroom-gib 0): layouts may use all " + Fixed(hbm_gib, 1) + " GiB of HBM\n";
  const std::string kept = Fixed(hbm_gib - *limit_gib, 2) + " GiB of the " + Fixed(hbm_gib, 1) +
                           " GiB HBM kept free, peak at most " + Fixed(*limit_gib, 2) + " GiB";
  std::string why;
  if (!o.headroom_gib && !o.max_mem_gib) {
    why = "the default: " + Fixed(100 * kDefaultHeadroomFraction, 0) +
          "% of HBM for what the memory model leaves out, doc/cost-model-memory.md; --headroom-gib 0 turns it off";
  } else {
    why = MemoryLimitText(o, *limit_gib);
    why = why.substr(why.find('(') + 1);
    why.pop_back();
  }
  return "memory margin: " + kept + " (" + why + ")\n";
}


}  // namespace

namespace {

// One world size of --gpus-range: the best layout, or why there is none.
struct SizeResult {
  int gpus = 0;
  std::optional<Evaluation> best;
  uint64_t legal = 0;  // legal and fitting (and under the memory limit)
  uint64_t equivalents = 1;
};

// plan --gpus-range: a search per size, the best of each side by side and
// the best per GPU marked. Sizes the cluster cannot hold are usage errors.
int RunPlanSizes(const PlanOptions& options, TableFormat format, std::ostream& out, std::ostream& err) {
  const std::vector<int> sizes = ParseGpusRange(options.gpus_range).value();  // checked by CheckPlanFlags
  auto pins = ParsePins(options.fix);
  if (!pins.ok()) return Usage(err, pins.status());
  const Objective objective = options.objective == "memory" ? Objective::kMemory : Objective::kThroughput;
  std::vector<SizeResult> results;
  std::optional<Inputs> first;
  for (int gpus : sizes) {
    PlanOptions at = options;
    at.inputs.gpus = gpus;
    auto inputs = LoadInputs(at.inputs);
    if (!inputs.ok()) return Fail(err, inputs.status());
    Inputs in = inputs.value();
    if (Status s = CheckWorldFitsCluster(in, "--gpus-range " + options.gpus_range); !s.ok()) return Fail(err, s);
    in.job = PinnedJob(in.job, *pins);
    auto model = CostModel::Create(in.cluster, in.model, in.job, in.calibration_use);
    if (!model.ok()) return Fail(err, model.status());
    const CostModel& cost = *model.value();
    if (!first) WarnAboutCalibrationGpu(cost.comm_params(), in.cluster, err);
    auto limit = MemoryLimit(options, in.cluster.gpu.hbm_gib);
    if (!limit.ok()) return Usage(err, limit.status());
    SearchOptions search;
    search.top = 1;
    search.threads = options.threads;
    search.pins = &*pins;
    search.max_peak_memory_gib = limit.value();
    search.distinct = !options.all;
    const CostScorer scorer(cost, objective);
    SearchResult r = SearchLayouts(cost.legality(), scorer, search);
    if (!r.status.ok()) return Fail(err, r.status);
    SizeResult size{gpus, std::nullopt, r.enumeration.legal_count - r.over_memory_limit, 1};
    if (!r.best.empty()) {
      size.best = cost.Evaluate(r.best.front().layout);
      size.equivalents = r.best.front().equivalents;
    }
    if (r.scored == 0) {
      for (const std::string& w : UnrealisticJobWarnings(cost, *pins)) err << w << "\n";
    }
    if (!first) first = in;
    results.push_back(std::move(size));
  }
  // The best per GPU: the most tokens/s per GPU (ties: the smaller world).
  std::optional<size_t> best_per_gpu;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].best) continue;
    const double per_gpu = results[i].best->step.tokens_per_s / results[i].gpus;
    if (!best_per_gpu || per_gpu > results[*best_per_gpu].best->step.tokens_per_s / results[*best_per_gpu].gpus) {
      best_per_gpu = i;
    }
  }
  if (format == TableFormat::kJson) {
    nlohmann::ordered_json sizes_json = nlohmann::ordered_json::array();
    for (size_t i = 0; i < results.size(); ++i) {
      const SizeResult& r = results[i];
      nlohmann::ordered_json j = {{"gpus", r.gpus}, {"legal_and_fitting", r.legal}};
      if (r.best) {
        j["best"] = CandidateJson(*r.best);
        j["tokens_per_s_per_gpu"] = r.best->step.tokens_per_s / r.gpus;
        j["equivalent_layouts"] = r.equivalents;
      } else {
        j["best"] = nullptr;
      }
      j["best_per_gpu"] = best_per_gpu == i;
      sizes_json.push_back(j);
    }
    out << nlohmann::ordered_json{{"schema", kWorldSizesSchema},
                                  {"objective", Name(objective)},
                                  {"cluster", first->cluster.name},
                                  {"model", first->model.name},
                                  {"job", first->job.name},
                                  {"sizes", sizes_json}}
               .dump(1)
        << "\n";
    return best_per_gpu ? 0 : 1;
  }
  if (format == TableFormat::kCsv) {
    out << CsvRecord({"gpus", "layout", "step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "mfu", "peak_gib",
                      "best_per_gpu"});
    for (size_t i = 0; i < results.size(); ++i) {
      const SizeResult& r = results[i];
      if (!r.best) {
        out << CsvRecord({std::to_string(r.gpus), "", "", "", "", "", "", "false"});
        continue;
      }
      const StepBreakdown& st = r.best->step;
      out << CsvRecord({std::to_string(r.gpus), FormatLayout(r.best->layout), CsvNumber(st.step_time_s),
                        CsvNumber(st.tokens_per_s), CsvNumber(st.tokens_per_s / r.gpus), CsvNumber(st.mfu),
                        CsvNumber(r.best->memory.peak_gib()), best_per_gpu == i ? "true" : "false"});
    }
    return best_per_gpu ? 0 : 1;
  }
  const Inputs& in = *first;
  std::ostringstream head;
  head << "cluster " << in.cluster.name << " (" << in.cluster.total_gpus() << " x " << in.cluster.gpu.name
       << "), model " << in.model.name << ", job " << in.job.name << " (seq " << in.job.seq_len << ", global batch "
       << in.job.global_batch << "); objective " << Name(objective) << ", the best layout at each world size\n"
       << MemoryMarginLine(options, in.cluster.gpu.hbm_gib, MemoryLimit(options, in.cluster.gpu.hbm_gib).value())
       << "\n";
  out << WrapLines(head.str(), OutputColumns());
  TextTable table({"GPUs", "degrees", "options", "step", "tokens/s", "tokens/s per GPU", "MFU", "mem GiB", ""},
                  {Align::kRight, Align::kLeft, Align::kLeft, Align::kRight, Align::kRight, Align::kRight,
                   Align::kRight, Align::kRight, Align::kLeft});
  for (size_t i = 0; i < results.size(); ++i) {
    const SizeResult& r = results[i];
    if (!r.best) {
      table.AddRow({std::to_string(r.gpus), "no legal layout fits", "", "", "", "", "", "", ""});
      continue;
    }
    const Evaluation& e = *r.best;
    table.AddRow({std::to_string(r.gpus), ShortDegrees(e.layout), OptionsText(e.layout), Seconds(e.step.step_time_s),
                  WithCommas(static_cast<unsigned long long>(e.step.tokens_per_s)),
                  WithCommas(static_cast<unsigned long long>(e.step.tokens_per_s / r.gpus)),
                  Fixed(100 * e.step.mfu, 1) + "%", Fixed(e.memory.peak_gib(), 1),
                  best_per_gpu == i ? "<- best per GPU" : ""});
  }
  out << table.Render("  ", OutputColumns());
  if (!best_per_gpu) {
    out << "no legal layout fits at any size\n"
        << NoFitAdviceAtSize(options, sizes.back(), MemoryLimit(options, in.cluster.gpu.hbm_gib).value(), objective).text;
    return 1;
  }
  return 0;
}

}  // namespace

int RunPlan(const PlanOptions& options, std::ostream& out, std::ostream& err) {
  if (Status s = CheckPlanFlags(options); !s.ok()) return Usage(err, s);
  const TableFormat format = ParseTableFormat(options.format, options.json).value();  // checked above
  if (!options.gpus_range.empty()) return RunPlanSizes(options, format, out, err);
  auto pins = ParsePins(options.fix);
  if (!pins.ok()) return Usage(err, pins.status());
  const Objective objective = options.objective == "memory" ? Objective::kMemory : Objective::kThroughput;
  auto inputs = LoadInputs(options.inputs);
  if (!inputs.ok()) return Fail(err, inputs.status());
  Inputs in = inputs.value();
  WarnAboutRecipe(in, err);
  in.job = PinnedJob(in.job, *pins);
  if (Status s = CheckWorldFitsCluster(in, options.inputs.gpus ? "--gpus" : pins->world ? "--fix world=" : "the job's world_size"); !s.ok()) return Fail(err, s);
  auto model = CostModel::Create(in.cluster, in.model, in.job, in.calibration_use);
  if (!model.ok()) return Fail(err, model.status());
  const CostModel& cost = *model.value();
  auto limit = MemoryLimit(options, in.cluster.gpu.hbm_gib);
  if (!limit.ok()) return Usage(err, limit.status());
  WarnAboutCalibrationGpu(cost.comm_params(), in.cluster, err);

  SearchOptions search;
  // Distinct (the default): bit-equal classes collapsed by the search, and
  // twins (order only) by the table below; each of the best rows has at
  // most one twin per other order kept, so this many classes hold them.
  const bool distinct = !options.all;
  const int wanted = std::max({options.top, 2, options.simulate_top});  // the runner-up explains the winner
  const int64_t orders = std::max<int64_t>(1, static_cast<int64_t>(in.job.orders.size()));
  search.top = distinct ? static_cast<int>(std::min<int64_t>(kMaxTop, wanted * orders)) : wanted;
  search.threads = options.threads;
  search.max_peak_memory_gib = limit.value();
  search.distinct = distinct;
  const bool tty = ::isatty(2);
  const auto start = std::chrono::steady_clock::now();
  if (tty) {
    search.progress = [&](double fraction) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (elapsed > 1.0) err << "\rscoring layouts: " << Fixed(100 * fraction, 0) << "%" << std::flush;
    };
  }
  const CostScorer scorer(cost, objective);
  search.pins = &*pins;
  // The recipe's own layout, ranked against the search.
  std::optional<Evaluation> recipe;
  if (in.recipe) {
    auto layout = ParseLayout(in.recipe->layout, in.job.world_size, &in.job);
    if (!layout.ok()) return Fail(err, Status::Error("recipe " + in.recipe->name + ": " + layout.status().message()));
    recipe = cost.Evaluate(layout.value());
    if (recipe->violations.empty() && recipe->memory.fits) {
      const LayoutScore score = cost.Score(recipe->layout, objective == Objective::kMemory);
      search.rank_objective = score.objective;
    }
  }
  SearchResult result = SearchLayouts(cost.legality(), scorer, search);
  const double search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (tty && search_s > 1.0) err << "\r" << std::string(30, ' ') << "\r";
  if (!result.status.ok()) return Fail(err, result.status);
  if (options.stats || (tty && search_s > 1.0)) err << SearchStatsLine(result, search_s, search.threads) << "\n";
  if (result.scored == 0) {
    for (const std::string& w : UnrealisticJobWarnings(cost, *pins)) err << w << "\n";
  }
  // The candidates, numbered from 1 (#1 the best) in the table, the plan
  // file, the CSV and every --candidate flag: a twin of a better one is
  // left out (distinct), so the numbers agree everywhere.
  std::vector<Evaluation> evals;
  std::vector<uint64_t> same;  // layouts each candidate stands for (1 with --all)
  std::vector<Twins> twins;    // each candidate's twins (distinct)
  std::set<std::string> seen;
  for (const auto& s : result.best) {
    if (evals.size() == static_cast<size_t>(wanted)) break;
    if (distinct && !seen.insert(TwinKey(s.layout)).second) continue;
    evals.push_back(cost.Evaluate(s.layout));
    same.push_back(s.equivalents);
  }
  WarnAboutFitMisses(cost.comm_params(), err);
  const size_t shown_count = std::min<size_t>(evals.size(), options.top);
  std::vector<Evaluation> shown(evals.begin(), evals.begin() + shown_count);
  if (distinct) {
    for (const Evaluation& e : shown) twins.push_back(TwinsOf(cost, e.layout, limit.value(), objective));
  }

  PlanFileContents contents{&cost, Name(objective), shown, &result.enumeration};
  contents.recipe = recipe ? &*recipe : nullptr;
  contents.recipe_rank = result.better_than_reference + 1;
  std::optional<SimulatedRanking> ranking;
  if (options.simulate_top > 0 && !evals.empty()) {
    const std::vector<Evaluation> top(evals.begin(),
                                      evals.begin() + std::min<size_t>(evals.size(), options.simulate_top));
    auto r = RankBySimulation(cost, top);
    if (!r.ok()) return Fail(err, r.status());
    ranking = std::move(r).value();
  }
  // What to do next: why nothing fits, or a smaller world that does better.
  const PlanAdvice advice = format == TableFormat::kCsv ? PlanAdvice{}
                            : shown.empty()            ? NoFitAdvice(options, in, cost, result, limit.value(), objective)
                                                       : FewerGpusAdvice(options, in, evals.front(), limit.value(), objective);
  // Nothing fits: exit 1 in every format (doc/formats.md, Exit codes); the
  // JSON and CSV are printed all the same.
  const int answer = shown.empty() ? 1 : 0;
  const bool json = format == TableFormat::kJson;
  if (json || !options.output.empty()) {
    auto text = PlanFileJson(contents);
    if (!text.ok()) return Fail(err, text.status());
    if (ranking || distinct || limit.value() || !advice.json.is_null()) {
      auto doc = nlohmann::ordered_json::parse(text.value());
      if (ranking) doc["simulation"] = ranking->json;
      // The classes distinct collapsed, and each one's twins.
      if (distinct) {
        for (size_t i = 0; i < shown_count; ++i) {
          doc["candidates"][i]["equivalent_layouts"] = same[i];
          doc["candidates"][i]["twin_orders"] = twins[i].orders;
        }
      }
      if (limit.value()) {
        // Who set it: the default headroom, --headroom-gib, --max-mem-gib.
        std::string set_by = options.max_mem_gib ? "--max-mem-gib" : "";
        if (options.headroom_gib) set_by += (set_by.empty() ? "" : ", ") + std::string("--headroom-gib");
        doc["memory_limit"] = {{"max_peak_gib", *limit.value()},
                               {"refused", result.over_memory_limit},
                               {"headroom_gib", in.cluster.gpu.hbm_gib - *limit.value()},
                               {"set_by", set_by.empty() ? "default" : set_by}};
      }
      if (!advice.json.is_null()) doc["advice"] = advice.json;
      text = doc.dump(1) + "\n";
    }
    if (json) out << text.value();
    // A command that fails writes no file: with nothing that fits, FILE keeps
    // what it held (the plan is on stdout with --json).
    if (!options.output.empty() && answer == 0) {
      if (Status s = WriteOrPrint(text.value(), options.output, out, err); !s.ok()) return Fail(err, s);
    } else if (!options.output.empty()) {
      err << "foldplan: not writing " << options.output << ": no layout fits\n";
    }
    if (json) return answer;
  }
  if (format == TableFormat::kCsv) {
    out << CandidatesCsv(shown, same, twins);
    return answer;
  }
  const size_t columns = OutputColumns();
  // --why's table, whether or not a layout fits.
  const auto why_table = [&] {
    if (!options.why) return std::string();
    TextTable table({"rule", "rejected"}, {Align::kLeft, Align::kRight});
    for (int r = 0; r < kRuleCount; ++r) table.AddRow({Name(Rule(r)), WithCommas(result.enumeration.rejected[r])});
    if (limit.value()) table.AddRow({"memory_limit", WithCommas(result.over_memory_limit)});
    return "\nrejections:\n" + table.Render("  ", columns);
  };

  std::ostringstream text;  // fitted to the terminal's width at the end
  text << InputsLine(in) << "\n";
  text << "searched " << WithCommas(result.enumeration.candidates) << " candidates: "
       << WithCommas(result.scored) << " legal, "
       << WithCommas(result.enumeration.rejected[static_cast<size_t>(Rule::kFitsMemory)])
       << " of them do not fit in memory";
  if (limit.value()) {
    text << ", " << WithCommas(result.over_memory_limit) << " more exceed " << MemoryLimitText(options, *limit.value());
  }
  text << "; objective " << Name(objective) << "\n";
  text << MemoryMarginLine(options, in.cluster.gpu.hbm_gib, limit.value());
  if (distinct) {
    text << "distinct: layouts differing only in group order (twins) shown once, with the other orders; layouts of"
         << " equal cost to the bit counted once (--all shows every one)\n";
  }
  if (shown.empty()) {
    text << "\n" << advice.text << why_table();
    out << WrapLines(text.str(), columns);
    return answer;
  }
  text << "\n" << CandidatesTable(shown, distinct ? &twins : nullptr, columns);
  text << "\nbest layout (#1):\n" << BreakdownText(evals.front(), &in.job, columns);
  if (evals.size() > 1) {
    text << "\nwhy it wins:\n"
         << WhyItWinsText(evals[0], evals[1], objective, "the runner-up, #2 (" + CompactLayout(evals[1].layout) + ")");
  }
  if (const std::string precisions = OtherPrecisionsText(evals.front(), in, limit.value(), objective, options.threads);
      !precisions.empty()) {
    text << "\n" << precisions;
  }
  if (ranking) text << "\n" << ranking->text;
  if (recipe) {
    text << "\n" << RecipeComparison(evals.front(), *recipe, result.better_than_reference,
                                    result.enumeration.legal_count);
  }
  text << "\n" << MegatronText(evals.front().layout, in, columns);
  text << "\n" << TrainersText(evals.front(), in, search, objective);
  if (!advice.empty()) text << "\n" << advice.text;
  text << why_table();
  out << WrapLines(text.str(), columns);
  return answer;
}

int RunExplain(const ExplainOptions& options, std::ostream& out, std::ostream& err) {
  const bool from_plan = !options.plan.empty();
  if (from_plan) {
    // The plan file names the inputs and the layout.
    const InputOptions& i = options.inputs;
    const std::pair<bool, const char*> excluded[] = {
        {options.layout.has_value(), "--layout"}, {!i.recipe.empty(), "--recipe"}, {!i.cluster.empty(), "--cluster"},
        {!i.model.empty(), "--model"},            {!i.job.empty(), "--job"},       {i.gpus.has_value(), "--gpus"},
        {i.nodes.has_value(), "--nodes"}};
    for (const auto& [given, flag] : excluded) {
      if (given) return Usage(err, Status::Error(std::string(flag) + " with --plan: the plan names its inputs and layout"));
    }
    if (Status s = CheckCandidateNumber("--candidate", options.candidate); !s.ok()) return Usage(err, s);
  } else if (!options.layout && options.inputs.recipe.empty()) {
    return Usage(err, Status::Error("explain needs --layout (or --recipe, whose layout it explains, or --plan FILE)"));
  }
  if (!from_plan && options.candidate != 1) return Usage(err, Status::Error("--candidate needs --plan FILE"));
  if (Status s = CheckInputFlags(options.inputs); !s.ok()) return Usage(err, s);
  if (Status s = CheckLayoutText(options.layout); !s.ok()) return Usage(err, s);
  Inputs in;
  Layout parsed;
  if (from_plan) {
    auto plan = LoadPlanFile(options.plan, options.candidate);
    if (!plan.ok()) return Fail(err, plan.status());
    in.cluster = plan->cluster;
    in.model = plan->model;
    in.job = plan->job;
    if (!options.inputs.calibration.empty()) in.cluster.calibration = options.inputs.calibration;
    in.calibration_use.allow_other_gpu = options.inputs.force_calibration;
    parsed = plan->layout;
  } else {
    auto inputs = LoadInputs(options.inputs);
    if (!inputs.ok()) return Fail(err, inputs.status());
    in = inputs.value();
    WarnAboutRecipe(in, err);
    const int world = in.job.world_size > 0 ? in.job.world_size : in.cluster.total_gpus();
    const std::string& text = options.layout ? *options.layout : in.recipe->layout;
    auto layout = ParseLayout(text, world, &in.job);
    if (!layout.ok()) return Fail(err, layout.status());
    parsed = layout.value();
  }
  auto model = CostModel::Create(in.cluster, in.model, in.job, in.calibration_use);
  if (!model.ok()) return Fail(err, model.status());
  // Legality first: a layout with more virtual stages than the model can
  // fill has no pipeline to cost, and its evaluation would grow with them.
  const std::vector<Violation> violations = CheckLayout(parsed, model.value()->legality());
  const std::string illegal = violations.empty() ? "" : IllegalLayoutText(parsed, violations);
  const Layout& l = parsed;
  if (!l.explicit_stages && int64_t{l.pp} * l.vpp > int64_t{in.model.layers} + 2) {
    return Fail(err, Status::Error(illegal + "\nnot explained: " + std::to_string(int64_t{l.pp} * l.vpp) +
                                   " virtual stages cannot hold the model's " + std::to_string(in.model.layers) +
                                   " layers"));
  }
  WarnAboutCalibrationGpu(model.value()->comm_params(), in.cluster, err);
  const Evaluation e = model.value()->Evaluate(l);
  WarnAboutFitMisses(model.value()->comm_params(), err);
  const bool oom = !e.memory.fits;
  // 1 for a negative answer (illegal, or out of memory unless --allow-oom),
  // with the reason on stderr.
  auto answer = [&] {
    if (!illegal.empty()) return Fail(err, Status::Error(illegal));
    if (oom) {
      const std::string why = "layout " + FormatLayout(e.layout) + " does not fit in memory: " + OverHbmText(JudgeLayout(e));
      if (!options.allow_oom) return Fail(err, Status::Error(why));
      err << "note: " << why << " (--allow-oom)\n";
    }
    return 0;
  };
  if (options.json || !options.output.empty()) {
    PlanFileContents contents{model.value().get(), "explain", {e}, nullptr};
    auto plan = PlanFileJson(contents);
    if (!plan.ok()) return Fail(err, plan.status());
    if (options.json) out << nlohmann::ordered_json::parse(plan.value())["candidates"][0].dump(1) << "\n";
    if (!options.output.empty()) {
      // A plan of a layout that does not fit is written only when asked for.
      if (oom && !options.allow_oom) {
        err << "foldplan: not writing " << options.output << ": the layout does not fit in memory"
            << " (--allow-oom writes it)\n";
      } else if (Status s = WriteOrPrint(plan.value(), options.output, out, err); !s.ok()) {
        return Fail(err, s);
      }
    }
    if (options.json) return answer();
  }
  if (in.recipe) {
    out << InputsLine(in) << "\n";
    if (!in.recipe->inferred.empty()) {
      std::string keys;
      for (const std::string& k : in.recipe->inferred) keys += (keys.empty() ? "" : ", ") + k;
      out << "not stated by the source, inferred (see the recipe's description): " << keys << "\n";
    }
  }
  if (!e.violations.empty()) {
    out << "ILLEGAL: this layout breaks " << e.violations.size() << " rule"
        << (e.violations.size() > 1 ? "s" : "") << ":\n";
    for (const auto& v : e.violations) out << "  " << Name(v.rule) << ": " << v.detail << "\n";
    out << "its costs below are what the degrees imply, for comparison only\n\n";
  }
  out << WrapLines(BreakdownText(e, &in.job, OutputColumns()), OutputColumns());
  return answer();
}

}  // namespace foldplan
