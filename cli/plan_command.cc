// `foldplan plan` and `foldplan explain`: the cost model wired to the search.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/simulate_command.h"
#include "cli/output.h"
#include "core/text_table.h"
#include "costmodel/evaluate.h"
#include "costmodel/plan_file.h"
#include "planner/legality.h"
#include "planner/pipeline_split.h"
#include "planner/search.h"

namespace foldplan {
namespace {

using Align = TextTable::Align;


std::string Seconds(double s) {
  if (s >= 1) return Fixed(s, 2) + " s";
  if (s >= 1e-3) return Fixed(s * 1e3, 1) + " ms";
  return Fixed(s * 1e6, 0) + " us";
}

std::string Options(const Layout& l) {
  std::string out = "mbs" + std::to_string(l.mbs) + " " + Name(l.recompute);
  if (l.cp > 1) out += std::string(" ") + Name(l.cp_style);
  if (l.order != kDefaultOrder) out += " " + l.order;
  if (l.placement != Placement::kLinear) out += std::string(" ") + Name(l.placement);
  const std::string recipe = ShortRecipe(l);
  return recipe.empty() ? out : out + " " + recipe;
}

// The largest exposed communication kinds, "ep_dispatch 12 ms, tp_ag 3 ms".
std::string TopExposed(const Evaluation& e, size_t n) {
  std::vector<CommKindCost> kinds = e.comm;
  std::sort(kinds.begin(), kinds.end(),
            [](const auto& a, const auto& b) { return a.exposed_s > b.exposed_s; });
  std::string out;
  for (size_t i = 0; i < kinds.size() && i < n; ++i) {
    if (kinds[i].exposed_s <= 0) break;
    out += (out.empty() ? "" : ", ") + kinds[i].name + " " + Seconds(kinds[i].exposed_s);
  }
  return out.empty() ? "-" : out;
}

std::string CandidatesTable(const std::vector<Evaluation>& evals) {
  TextTable table({"#", "degrees", "options", "step", "tokens/s", "MFU", "mem GiB", "exposed comm per step"},
                  {Align::kRight, Align::kLeft, Align::kLeft, Align::kRight, Align::kRight,
                   Align::kRight, Align::kRight, Align::kLeft});
  for (size_t i = 0; i < evals.size(); ++i) {
    const Evaluation& e = evals[i];
    table.AddRow({std::to_string(i + 1), ShortDegrees(e.layout), Options(e.layout), Seconds(e.step.step_time_s),
                  WithCommas(static_cast<unsigned long long>(e.step.tokens_per_s)),
                  Fixed(100 * e.step.mfu, 1) + "%", Fixed(e.memory.peak_gib(), 1), TopExposed(e, 3)});
  }
  return table.Render("  ");
}

std::string Breakdown(const Evaluation& e) {
  const StepBreakdown& s = e.step;
  std::string out;
  out += "  layout       " + FormatLayout(e.layout) + "\n";
  out += "  step         " + Seconds(s.step_time_s) + " = pipeline " + Seconds(s.pipeline_s) +
         " (of which bubble " + Seconds(s.bubble_s) + ") + exposed data-parallel " +
         Seconds(s.dp_exposed_s) + " + optimizer " + Seconds(s.optimizer_s) + "\n";
  out += "  pipeline     " + std::string(Name(e.pipeline.schedule)) + ", " + e.pipeline.LayoutText() +
         (e.pipeline_chosen ? " (chosen: the layers do not divide over pp x vpp)" : "") + "\n";
  out += "  per micro-batch on stage " + std::to_string(s.slowest_stage) + ": compute " +
         Seconds(s.stage_compute_s) + " + exposed communication " + Seconds(s.stage_exposed_comm_s) +
         ", " + std::to_string(s.microbatches) + " micro-batches\n";
  out += "  throughput   " + WithCommas(static_cast<unsigned long long>(s.tokens_per_s)) +
         " tokens/s, MFU " + Fixed(100 * s.mfu, 1) + "% (" + Fixed(s.model_flops_per_token / 1e9, 2) +
         " GFLOP per token, causal attention; " + Fixed(100 * s.mfu_full_attention, 1) +
         "% counting full attention as Megatron did before core v0.12; see doc/cost-model.md)\n";
  TextTable comm({"communication", "total per step", "exposed"}, {Align::kLeft, Align::kRight, Align::kRight});
  for (const auto& c : e.comm) comm.AddRow({c.name, Seconds(c.total_s), Seconds(c.exposed_s)});
  out += "\n" + comm.Render("  ");
  TextTable mem({"memory (stage " + std::to_string(e.memory.worst_stage) + ")", "GiB", "how"},
                {Align::kLeft, Align::kRight, Align::kLeft});
  for (const auto& t : e.memory.terms) {
    if (t.bytes == 0) continue;
    mem.AddRow({t.name, Fixed(t.bytes / kBytesPerGiB, 2), t.note});
  }
  mem.AddRow({"peak", Fixed(e.memory.peak_gib(), 2),
              std::string(e.memory.fits ? "fits" : "DOES NOT FIT") + " in " + Fixed(e.memory.hbm_gib, 1) + " GiB"});
  out += "\n" + mem.Render("  ");
  return out;
}

// Why `a` beats `b`: the components of the step that differ, largest first,
// and both peaks.
std::string StepDifferences(const Evaluation& a, const Evaluation& b) {
  std::vector<std::pair<std::string, double>> deltas = {
      {"compute per micro-batch x micro-batches",
       (b.step.stage_compute_s * b.step.microbatches) - (a.step.stage_compute_s * a.step.microbatches)},
      {"exposed communication in the pipeline",
       (b.step.stage_exposed_comm_s * b.step.microbatches) - (a.step.stage_exposed_comm_s * a.step.microbatches)},
      {"pipeline bubble", b.step.bubble_s - a.step.bubble_s},
      {"exposed data-parallel traffic", b.step.dp_exposed_s - a.step.dp_exposed_s},
      {"optimizer step", b.step.optimizer_s - a.step.optimizer_s},
  };
  std::sort(deltas.begin(), deltas.end(),
            [](const auto& x, const auto& y) { return std::abs(x.second) > std::abs(y.second); });
  std::string out;
  for (const auto& [what, d] : deltas) {
    if (std::abs(d) < 1e-6) continue;
    out += "    " + std::string(d > 0 ? "+" : "-") + Seconds(std::abs(d)) + "  " + what + "\n";
  }
  out += "  peak memory " + Fixed(a.memory.peak_gib(), 1) + " GiB vs " + Fixed(b.memory.peak_gib(), 1) + " GiB\n";
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
  std::string out = "the recipe's layout (" + ShortDegrees(recipe.layout) + ", " + Options(recipe.layout) + "):\n";
  if (!recipe.violations.empty()) {
    out += "  is illegal here:\n";
    for (const auto& v : recipe.violations) out += "    " + std::string(Name(v.rule)) + ": " + v.detail + "\n";
    return out;
  }
  out += "  step " + Seconds(recipe.step.step_time_s) + ", " +
         WithCommas(static_cast<unsigned long long>(recipe.step.tokens_per_s)) + " tokens/s, MFU " +
         Fixed(100 * recipe.step.mfu, 1) + "%, peak memory " + Fixed(recipe.memory.peak_gib(), 1) + " GiB";
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
           " vs " + Seconds(recipe.step.step_time_s) + " per step, " + Seconds(recipe.step.step_time_s - best.step.step_time_s) + " less):\n" + StepDifferences(best, recipe);
  } else {
    out += "  it is faster than every fitting layout of the search (" + Seconds(recipe.step.step_time_s) +
           " vs " + Seconds(best.step.step_time_s) + ")\n";
  }
  return out;
}

// The best layout's Megatron-LM arguments on one line, or why it has none.
std::string MegatronText(const Layout& layout, const Inputs& in) {
  Result<std::vector<std::string>> args = MegatronArguments(layout, in.cluster, &in.model, &in.job);
  if (!args.ok()) return "megatron: " + args.status().message() + "\n";
  std::string line;
  for (const std::string& a : args.value()) line += (line.empty() ? "" : " ") + a;
  return "megatron-lm arguments (foldplan ranks --format megatron prints them one per line):\n  " + line + "\n";
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
  return CheckInputFlags(o.inputs);
}

// "peak 91.3 GiB on stage 2 > 79.6 GiB of HBM", for an explained layout that does not fit.
std::string OomText(const Evaluation& e) {
  return "peak " + Fixed(e.memory.peak_gib(), 1) + " GiB on stage " + std::to_string(e.memory.worst_stage) +
         " > " + Fixed(e.memory.hbm_gib, 1) + " GiB of HBM";
}

}  // namespace

int RunPlan(const PlanOptions& options, std::ostream& out, std::ostream& err) {
  if (Status s = CheckPlanFlags(options); !s.ok()) return Usage(err, s);
  auto pins = ParsePins(options.fix);
  if (!pins.ok()) return Usage(err, pins.status());
  const Objective objective = options.objective == "memory" ? Objective::kMemory : Objective::kThroughput;
  auto inputs = LoadInputs(options.inputs);
  if (!inputs.ok()) return Fail(err, inputs.status());
  Inputs in = inputs.value();
  WarnAboutRecipe(in, err);
  in.job = PinnedJob(in.job, *pins);
  auto model = CostModel::Create(in.cluster, in.model, in.job, in.calibration_use);
  if (!model.ok()) return Fail(err, model.status());
  const CostModel& cost = *model.value();
  WarnAboutCalibrationGpu(cost.comm_params(), in.cluster, err);

  SearchOptions search;
  search.top = std::max({options.top, 2, options.simulate_top});  // the runner-up explains the winner
  search.threads = options.threads;
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
  if (tty && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > 1.0) {
    err << "\r" << std::string(30, ' ') << "\r";
  }
  if (!result.status.ok()) return Fail(err, result.status);
  std::vector<Evaluation> evals;
  for (const auto& s : result.best) evals.push_back(cost.Evaluate(s.layout));
  WarnAboutFitMisses(cost.comm_params(), err);
  std::vector<Evaluation> shown(evals.begin(), evals.begin() + std::min<size_t>(evals.size(), options.top));

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
  if (options.json || !options.output.empty()) {
    auto text = PlanFileJson(contents);
    if (!text.ok()) return Fail(err, text.status());
    if (ranking) {
      auto doc = nlohmann::ordered_json::parse(text.value());
      doc["simulation"] = ranking->json;
      text = doc.dump(1) + "\n";
    }
    if (options.json) out << text.value();
    if (!options.output.empty()) {
      if (Status s = WriteOrPrint(text.value(), options.output, out, err); !s.ok()) return Fail(err, s);
    }
    if (options.json) return 0;
  }

  out << InputsLine(in) << "\n";
  out << "searched " << WithCommas(result.enumeration.candidates) << " candidates: "
      << WithCommas(result.scored) << " legal, "
      << WithCommas(result.enumeration.rejected[static_cast<size_t>(Rule::kFitsMemory)])
      << " of them do not fit in memory; objective " << Name(objective) << "\n";
  if (shown.empty()) {
    out << "no legal layout fits; `foldplan enumerate --why` and `foldplan explain` show why\n";
    return 1;
  }
  out << "\n" << CandidatesTable(shown);
  out << "\nbest layout:\n" << Breakdown(evals.front());
  if (evals.size() > 1) out << "\nwhy it wins:\n" << "  the runner-up (" + ShortDegrees(evals[1].layout) + ", " + Options(evals[1].layout) +
                               ") takes " + Seconds(evals[1].step.step_time_s - evals[0].step.step_time_s) +
                               " longer per step:\n" + StepDifferences(evals[0], evals[1]);
  if (ranking) out << "\n" << ranking->text;
  if (recipe) {
    out << "\n" << RecipeComparison(evals.front(), *recipe, result.better_than_reference,
                                   result.enumeration.legal_count);
  }
  out << "\n" << MegatronText(evals.front().layout, in);
  if (options.why) {
    TextTable table({"rule", "rejected"}, {Align::kLeft, Align::kRight});
    for (int r = 0; r < kRuleCount; ++r) table.AddRow({Name(Rule(r)), WithCommas(result.enumeration.rejected[r])});
    out << "\nrejections:\n" << table.Render("  ");
  }
  return 0;
}

int RunExplain(const ExplainOptions& options, std::ostream& out, std::ostream& err) {
  if (!options.layout && options.inputs.recipe.empty()) {
    return Usage(err, Status::Error("explain needs --layout (or --recipe, whose layout it explains)"));
  }
  if (Status s = CheckInputFlags(options.inputs); !s.ok()) return Usage(err, s);
  if (Status s = CheckLayoutText(options.layout); !s.ok()) return Usage(err, s);
  auto inputs = LoadInputs(options.inputs);
  if (!inputs.ok()) return Fail(err, inputs.status());
  const Inputs& in = inputs.value();
  WarnAboutRecipe(in, err);
  const int world = in.job.world_size > 0 ? in.job.world_size : in.cluster.total_gpus();
  const std::string& text = options.layout ? *options.layout : in.recipe->layout;
  auto layout = ParseLayout(text, world, &in.job);
  if (!layout.ok()) return Fail(err, layout.status());
  auto model = CostModel::Create(in.cluster, in.model, in.job, in.calibration_use);
  if (!model.ok()) return Fail(err, model.status());
  // Legality first: a layout with more virtual stages than the model can
  // fill has no pipeline to cost, and its evaluation would grow with them.
  const std::vector<Violation> violations = CheckLayout(layout.value(), model.value()->legality());
  const std::string illegal = violations.empty() ? "" : IllegalLayoutText(layout.value(), violations);
  const Layout& l = layout.value();
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
      const std::string why = "layout " + FormatLayout(e.layout) + " does not fit in memory: " + OomText(e);
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
  out << Breakdown(e);
  return answer();
}

}  // namespace foldplan
