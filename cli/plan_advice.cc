// plan's advice (cli/plan_advice.h): what to change when nothing fits, and
// a smaller world when it does better. Every figure is a search's.
#include "cli/plan_advice.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "cli/output.h"
#include "cli/plan_text.h"
#include "core/text_table.h"
#include "planner/enumerate.h"
#include "planner/legality.h"

namespace foldplan {
namespace {

// ---------------------------------------------------------------------------
// Scorers the advice searches with.

// Passes a cap on the objective down as a pruning bound: a layout whose
// objective is proven above `cap` comes back pruned, as it would under a
// search that had already kept a better one. Nothing else changes, so the
// best it finds is the search's best whenever that is at most `cap`.
class CappedSink : public ScoreSink {
 public:
  CappedSink(ScoreSink& inner, double cap) : inner_(inner), cap_(cap) {}
  double PruneAbove() const override { return std::min(inner_.PruneAbove(), cap_); }
  void Scored(const Layout& layout, const LayoutScore& score) override { inner_.Scored(layout, score); }
  void ScoredAlike(const LayoutScore& score, uint64_t count) override { inner_.ScoredAlike(score, count); }

 private:
  ScoreSink& inner_;
  double cap_;
};

class CappedScorer : public LayoutScorer {
 public:
  CappedScorer(const LayoutScorer& inner, double cap) : inner_(inner), cap_(cap) {}
  LayoutScore Score(const Layout& layout) const override { return inner_.ScoreBounded(layout, cap_); }
  LayoutScore ScoreBounded(const Layout& layout, double prune_above) const override {
    return inner_.ScoreBounded(layout, std::min(prune_above, cap_));
  }
  void ScoreFamily(const LayoutFamily& family, ScoreSink& sink) const override {
    CappedSink capped(sink, cap_);
    inner_.ScoreFamily(family, capped);
  }

 private:
  const LayoutScorer& inner_;
  double cap_;
};

// Every legal layout "fits", its objective its peak: the search's best is
// then the legal layout of the smallest peak (ties: the smaller canonical
// text). The peak is the cost model's Score's, bit for bit; the step time
// is never computed (Score with the memory objective prunes at any bound
// below the peak).
class SmallestPeakScorer : public LayoutScorer {
 public:
  explicit SmallestPeakScorer(const CostModel& cost) : cost_(cost) {}
  LayoutScore Score(const Layout& layout) const override {
    return ScoreBounded(layout, std::numeric_limits<double>::infinity());
  }
  LayoutScore ScoreBounded(const Layout& layout, double prune_above) const override {
    const double peak = cost_.Score(layout, /*minimise_memory=*/true, /*prune_above=*/-1).peak_memory_gib;
    LayoutScore s;
    s.fits = true;
    s.peak_memory_gib = peak;
    if (peak > prune_above) {
      s.pruned = true;
    } else {
      s.objective = peak;
    }
    return s;
  }

 private:
  const CostModel& cost_;
};

// ---------------------------------------------------------------------------
// A variant of the command: its options searched as plan searches them.

struct Variant {
  Status status;  // not ok: the variant's inputs were refused (the message says why)
  std::optional<Inputs> in;
  std::unique_ptr<CostModel> cost;
  SearchResult result;
  std::optional<Evaluation> best;          // the best fitting layout, costed in full
  std::optional<Evaluation> smallest_peak; // when none fits and it was asked for
};

// `options`' inputs loaded, pinned and searched for the best layout under
// `limit_gib`; with `cap_s`, layouts slower than that many seconds a step
// may be pruned (the search's bound).
// With `smallest_peak`, a second search finds the smallest peak when no
// layout fits.
Variant SearchVariant(const PlanOptions& options, std::optional<double> limit_gib, Objective objective,
                      std::optional<double> cap_s, bool smallest_peak) {
  Variant v;
  auto pins = ParsePins(options.fix);
  if (!pins.ok()) {
    v.status = pins.status();
    return v;
  }
  auto inputs = LoadInputs(options.inputs);
  if (!inputs.ok()) {
    v.status = inputs.status();
    return v;
  }
  Inputs in = std::move(inputs).value();
  in.job = PinnedJob(in.job, *pins);
  if (Status s = CheckWorldFitsCluster(in, "--gpus"); !s.ok()) {
    v.status = s;
    return v;
  }
  auto model = CostModel::Create(in.cluster, in.model, in.job, in.calibration_use);
  if (!model.ok()) {
    v.status = model.status();
    return v;
  }
  v.cost = std::move(model).value();
  v.in = std::move(in);
  SearchOptions search;
  search.top = 1;
  search.threads = options.threads;
  search.pins = &*pins;
  search.max_peak_memory_gib = limit_gib;
  const CostScorer scorer(*v.cost, objective);
  const CappedScorer capped(scorer, cap_s.value_or(std::numeric_limits<double>::infinity()));
  v.result = SearchLayouts(v.cost->legality(), cap_s ? static_cast<const LayoutScorer&>(capped) : scorer, search);
  if (!v.result.status.ok()) {
    v.status = v.result.status;
    return v;
  }
  if (!v.result.best.empty()) {
    v.best = v.cost->Evaluate(v.result.best.front().layout);
  } else if (smallest_peak && v.result.scored > 0) {
    search.max_peak_memory_gib.reset();
    const SearchResult peak = SearchLayouts(v.cost->legality(), SmallestPeakScorer(*v.cost), search);
    if (peak.status.ok() && !peak.best.empty()) v.smallest_peak = v.cost->Evaluate(peak.best.front().layout);
  }
  return v;
}

// ---------------------------------------------------------------------------
// Command lines.

std::string Quoted(const std::string& value) {
  const bool plain = !value.empty() && value.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                               "0123456789_./:=,+-@%") == std::string::npos;
  if (plain) return value;
  std::string out = "'";
  for (char c : value) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string Number(double v) {
  // The shortest fixed-point text that reads back as v ("20", "0.5").
  for (int digits = 0; digits <= 9; ++digits) {
    char text[64];
    std::snprintf(text, sizeof text, "%.*f", digits, v);
    if (std::strtod(text, nullptr) == v) return text;
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

// --fix without the keys in `drop`, with `add` appended ("" for none).
std::optional<std::string> FixWith(const std::optional<std::string>& fix, const std::vector<std::string>& drop,
                                   const std::string& add = "") {
  std::string out;
  if (fix) {
    size_t at = 0;
    while (at <= fix->size()) {
      const size_t end = std::min(fix->find(',', at), fix->size());
      const std::string item = fix->substr(at, end - at);
      const std::string key = item.substr(0, item.find('='));
      if (!item.empty() && std::find(drop.begin(), drop.end(), key) == drop.end()) {
        out += (out.empty() ? "" : ",") + item;
      }
      at = end + 1;
    }
  }
  if (!add.empty()) out += (out.empty() ? "" : ",") + add;
  if (out.empty()) return std::nullopt;
  return out;
}

// The flags of `options` that differ from `base`'s, for "(--nodes 64)".
std::string ChangedFlags(const PlanOptions& base, const PlanOptions& options) {
  const std::string all = PlanCommandLine(options);
  const std::string before = PlanCommandLine(base) + " ";
  // Flags are "--name value" pairs or "--name" alone; a flag is changed when
  // its text is not in the base command's.
  std::string out;
  size_t at = std::string("foldplan plan").size();
  while (at < all.size()) {
    const size_t start = all.find("--", at);
    if (start == std::string::npos) break;
    size_t next = all.find(" --", start + 2);
    if (next == std::string::npos) next = all.size();
    const std::string flag = all.substr(start, next - start);
    if (before.find(" " + flag + " ") == std::string::npos) out += (out.empty() ? "" : " ") + flag;
    at = next;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Text pieces.

std::string Gib(double gib) {
  if (gib >= 1000) return WithCommas(static_cast<unsigned long long>(std::llround(gib))) + " GiB";
  return Fixed(gib, 1) + " GiB";
}

std::string Tokens(double tokens_per_s) {
  return WithCommas(static_cast<unsigned long long>(tokens_per_s)) + " tokens/s";
}

std::string LayoutShort(const Layout& l) { return CompactLayout(l); }

int WorldOf(const Inputs& in) { return in.job.world_size > 0 ? in.job.world_size : in.cluster.total_gpus(); }

// "the limit": HBM, or the plan's memory limit.
std::string LimitText(const Inputs& in, std::optional<double> limit_gib) {
  if (limit_gib && *limit_gib < in.cluster.gpu.hbm_gib) {
    return "the peak limit of " + Gib(*limit_gib) + " (of " + Gib(in.cluster.gpu.hbm_gib) + " of HBM)";
  }
  return Gib(in.cluster.gpu.hbm_gib) + " of HBM";
}

double LimitOf(const Inputs& in, std::optional<double> limit_gib) {
  return limit_gib ? std::min(*limit_gib, in.cluster.gpu.hbm_gib) : in.cluster.gpu.hbm_gib;
}

nlohmann::ordered_json LayoutFigures(const Evaluation& e, int gpus) {
  return {{"layout", FormatLayout(e.layout)},
          {"gpus", gpus},
          {"peak_gib", e.memory.peak_gib()},
          {"step_time_s", e.step.step_time_s},
          {"tokens_per_s", e.step.tokens_per_s}};
}

// One change tried: what, how (the flags), and what the search found.
struct Change {
  std::string what;      // "more GPUs", "FSDP", ...
  std::string flags;     // the flags that make it ("" when not tried)
  std::string skipped;   // why it was not tried ("" when tried)
  std::string command;   // the whole command, when it fits
  int gpus = 0;
  std::optional<Evaluation> best;           // fits: the best layout
  std::optional<Evaluation> smallest_peak;  // does not fit: the smallest peak
  std::string error;                        // the variant's inputs were refused
};

std::string ChangeLine(const Change& c, const Inputs& in, std::optional<double> limit_gib) {
  std::string out = "  " + c.what;
  if (!c.skipped.empty()) return out + ": " + c.skipped + "\n";
  out += " (" + c.flags + "): ";
  if (!c.error.empty()) return out + "refused: " + c.error + "\n";
  if (c.best) {
    const Evaluation& e = *c.best;
    return out + "fits on " + WithCommas(c.gpus) + " GPUs: " + LayoutShort(e.layout) + "; peak " +
           Gib(e.memory.peak_gib()) + ", step " + Seconds(e.step.step_time_s) + ", " + Tokens(e.step.tokens_per_s) +
           "\n      " + c.command + "\n";
  }
  if (c.smallest_peak) {
    const double peak = c.smallest_peak->memory.peak_gib();
    return out + "still does not fit: smallest peak " + Gib(peak) + ", " + Gib(peak - LimitOf(in, limit_gib)) +
           " over (" + LayoutShort(c.smallest_peak->layout) + ", step " + Seconds(c.smallest_peak->step.step_time_s) +
           ")\n";
  }
  return out + "no legal layout\n";
}

nlohmann::ordered_json ChangeJson(const Change& c) {
  nlohmann::ordered_json j = {{"change", c.what}};
  if (!c.skipped.empty()) {
    j["skipped"] = c.skipped;
    return j;
  }
  j["flags"] = c.flags;
  if (!c.error.empty()) {
    j["error"] = c.error;
    return j;
  }
  j["fits"] = c.best.has_value();
  if (c.best) {
    j["best"] = LayoutFigures(*c.best, c.gpus);
    j["command"] = c.command;
  } else if (c.smallest_peak) {
    j["smallest_peak"] = LayoutFigures(*c.smallest_peak, c.gpus);
  } else {
    j["legal"] = false;
  }
  return j;
}

Change Skipped(std::string what, std::string why) {
  Change c;
  c.what = std::move(what);
  c.skipped = std::move(why);
  return c;
}

// A variant searched into a Change.
Change Tried(std::string what, const PlanOptions& base, const PlanOptions& variant, std::optional<double> limit_gib,
             Objective objective) {
  Change c;
  c.what = std::move(what);
  c.flags = ChangedFlags(base, variant);
  const Variant v = SearchVariant(variant, limit_gib, objective, std::nullopt, /*smallest_peak=*/true);
  if (!v.status.ok()) {
    c.error = v.status.message();
    return c;
  }
  c.gpus = WorldOf(*v.in);
  c.best = v.best;
  c.smallest_peak = v.smallest_peak;
  if (c.best) c.command = PlanCommandLine(variant);
  return c;
}

// The options of `base` planning `gpus` GPUs on a cluster grown (in whole
// NVLink domains) when the loaded one holds fewer. Null for a recipe (it
// names its world) or a cluster that cannot be read.
std::optional<PlanOptions> WithWorld(const PlanOptions& base, const Inputs& in, int64_t gpus) {
  if (!base.inputs.recipe.empty() || gpus > kMaxWorldSize) return std::nullopt;
  PlanOptions o = base;
  o.gpus_range.clear();
  o.fix = FixWith(base.fix, {"world"});
  const ClusterSpec& c = in.cluster;  // cut to the job's gpus_per_domain, if any
  if (gpus % c.gpus_per_node != 0) return std::nullopt;
  if (gpus <= c.total_gpus()) {
    o.inputs.gpus = gpus == c.total_gpus() && !base.inputs.gpus ? std::nullopt : std::optional<int>(gpus);
    return o;
  }
  // Grow the cluster: whole domains of the cut size, each domain the
  // cluster file's nodes (LoadWholeCluster refuses anything else).
  InputOptions whole = base.inputs;
  whole.gpus_per_domain.reset();
  auto file = LoadClusterAlone(whole);
  if (!file.ok()) return std::nullopt;
  const int domain_gpus = c.nvlink_domain_gpus;  // per domain as used
  const int64_t domains = (gpus + domain_gpus - 1) / domain_gpus;
  const int64_t nodes = domains * file->nodes_per_domain();
  if (nodes * file->gpus_per_node > kMaxWorldSize) return std::nullopt;
  o.inputs.nodes = static_cast<int>(nodes);
  o.inputs.gpus = gpus == domains * domain_gpus && !base.inputs.gpus ? std::nullopt : std::optional<int>(gpus);
  return o;
}

// The smallest world that fits, from world x 2 up to x kMoreGpusMaxFactor:
// the doublings until one fits, then up to kMoreGpusBetween whole-node
// worlds evenly spaced between it and the last that did not, ascending: the
// first of those that fits, else the doubling.
Change MoreGpus(const PlanOptions& base, const Inputs& in, std::optional<double> limit_gib, Objective objective) {
  Change c;
  c.what = "more GPUs";
  if (!base.inputs.recipe.empty()) {
    c.skipped = "not tried: the recipe names its world (plan its cluster and model with --gpus or --nodes)";
    return c;
  }
  const int64_t world = WorldOf(in);
  const int node = in.cluster.gpus_per_node;
  std::optional<Variant> found;
  std::optional<PlanOptions> found_options;
  int64_t below = world;
  std::optional<PlanOptions> last_options;
  for (int factor = 2; factor <= kMoreGpusMaxFactor; factor *= 2) {
    // Whole nodes.
    const int64_t grown = (world * factor + node - 1) / node * node;
    if (grown > kMoreGpusMaxWorld) break;
    const auto o = WithWorld(base, in, grown);
    if (!o) break;
    Variant v = SearchVariant(*o, limit_gib, objective, std::nullopt, /*smallest_peak=*/false);
    if (!v.status.ok()) break;
    if (v.best) {
      found = std::move(v);
      found_options = o;
      // Between the last world that did not fit and this one: at most
      // kMoreGpusBetween evenly spaced whole-node worlds, ascending.
      const int64_t hi = grown;
      const int64_t between = std::min<int64_t>((hi - below) / node - 1, kMoreGpusBetween);
      int64_t tried = below;
      for (int64_t i = 1; i <= between; ++i) {
        const int64_t mid = (below + (hi - below) * i / (between + 1)) / node * node;
        if (mid <= tried || mid >= hi) continue;
        tried = mid;
        const auto om = WithWorld(base, in, mid);
        if (!om) continue;
        Variant vm = SearchVariant(*om, limit_gib, objective, std::nullopt, false);
        if (vm.status.ok() && vm.best) {
          found = std::move(vm);
          found_options = om;
          break;
        }
      }
      break;
    }
    below = grown;
    last_options = o;
  }
  if (found) {
    c.flags = ChangedFlags(base, *found_options);
    c.gpus = WorldOf(*found->in);
    c.best = found->best;
    c.command = PlanCommandLine(*found_options);
    return c;
  }
  if (!last_options) {
    c.skipped = "not tried: the cluster cannot grow to twice the world within " + WithCommas(kMoreGpusMaxWorld) +
                " GPUs, the most this advice searches";
    return c;
  }
  // None fits up to the largest world tried: its smallest peak.
  Change at = Tried(c.what, base, *last_options, limit_gib, objective);
  at.what = c.what;
  at.flags += "; " + WithCommas(below) + " GPUs, the most tried";
  return at;
}

bool Has(const std::vector<Recompute>& list, Recompute r) {
  return std::find(list.begin(), list.end(), r) != list.end();
}

// The recompute sets tried beside the job's: full, then Megatron's module
// sets from the lightest usual one (the Megatron-MoE recipes') to every
// module, those naming what the model lacks (MLA, dense layers, shared
// experts, experts) left out.
std::vector<Recompute> RecomputeTries(const ModelSpec& model) {
  const bool mla = model.mla.has_value();
  const bool moe = model.is_moe();
  const bool shared = moe && model.moe->shared_experts > 0;
  const bool dense = !moe || model.moe->first_k_dense > 0 || model.moe->layer_freq > 1;
  std::vector<std::string> names = {"full", "selective"};
  if (moe) {
    names.push_back(mla ? "moe_act+layernorm+mla_up_proj" : "moe_act+layernorm");
    names.push_back("moe+layernorm");
  }
  std::string every = "core_attn+layernorm";
  if (mla) every += "+mla_up_proj";
  if (dense) every += "+mlp";
  if (moe) every += "+moe";
  if (shared) every += "+shared_experts";
  names.push_back(every);
  std::vector<Recompute> out;
  for (const std::string& name : names) {
    if (auto r = ParseRecompute(name); r.ok() && !Has(out, r.value())) out.push_back(r.value());
  }
  return out;
}

std::string Joined(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The one choice a fitting search made: its command names only it.
PlanOptions Narrowed(PlanOptions o, const Change& c, const std::string& what) {
  if (!c.best) return o;
  const Layout& l = c.best->layout;
  if (what == "recompute") o.inputs.recompute = Name(l.recompute);
  if (what == "precision") o.inputs.precision = Name(l.precision);
  return o;
}

// Rules that reject part of every search's candidates by construction (the
// enumeration walks degrees whose products need not match the world).
bool ByConstruction(Rule r) {
  return r == Rule::kVppNeedsPp || r == Rule::kDenseProduct || r == Rule::kExpertProduct;
}

// The rules that rejected the most candidates (fits_memory and those
// ByConstruction aside), at most `n`.
std::vector<std::pair<Rule, uint64_t>> TopRules(const Enumeration& e, size_t n) {
  std::vector<std::pair<Rule, uint64_t>> rules;
  for (int r = 0; r < kRuleCount; ++r) {
    if (Rule(r) != Rule::kFitsMemory && !ByConstruction(Rule(r)) && e.rejected[r] > 0) {
      rules.push_back({Rule(r), e.rejected[r]});
    }
  }
  std::stable_sort(rules.begin(), rules.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (rules.size() > n) rules.resize(n);
  return rules;
}

}  // namespace

Status CheckWorldFitsCluster(const Inputs& in, const std::string& origin) {
  if (in.job.world_size <= in.cluster.total_gpus()) return Status();
  const int64_t need = in.job.world_size;
  const ClusterSpec& c = in.cluster;
  std::string hint;
  if (in.job.gpus_per_domain == 0 && c.nvlink_domain_gpus % c.gpus_per_node == 0) {
    const int64_t domains = (need + c.nvlink_domain_gpus - 1) / c.nvlink_domain_gpus;
    const int64_t nodes = domains * c.nodes_per_domain();
    if (nodes * c.gpus_per_node <= kMaxWorldSize) hint = "; --nodes " + std::to_string(nodes) + " would hold it";
  }
  return Status::Error(origin + ": " + std::to_string(need) + " GPUs is more than cluster " + c.name + " holds (" +
                       std::to_string(c.total_gpus()) + ")" + hint);
}

std::string PlanCommandLine(const PlanOptions& o) {
  std::string out = "foldplan plan";
  const auto add = [&](const char* flag, const std::string& value) { out += std::string(" ") + flag + " " + Quoted(value); };
  const auto add_int = [&](const char* flag, const std::optional<int>& v) {
    if (v) add(flag, std::to_string(*v));
  };
  const auto add_str = [&](const char* flag, const std::optional<std::string>& v) {
    if (v) add(flag, *v);
  };
  const InputOptions& i = o.inputs;
  if (!i.recipe.empty()) add("--recipe", i.recipe);
  if (!i.cluster.empty()) add("--cluster", i.cluster);
  add_int("--nodes", i.nodes);
  if (!i.model.empty()) add("--model", i.model);
  if (!i.job.empty()) add("--job", i.job);
  add_int("--gpus", i.gpus);
  add_int("--gpus-per-domain", i.gpus_per_domain);
  add_int("--seq", i.seq);
  add_int("--global-batch", i.global_batch);
  add_int("--micro-batch", i.micro_batch);
  add_str("--precision", i.precision);
  add_str("--recompute", i.recompute);
  add_str("--cuda-graphs", i.cuda_graphs);
  add_str("--dispatcher", i.dispatcher);
  add_str("--cp-style", i.cp_style);
  add_str("--fsdp", i.fsdp);
  add_str("--tp-overlap", i.tp_overlap);
  add_str("--a2a-overlap", i.a2a_overlap);
  add_str("--schedule", i.schedule);
  add_str("--attention-backend", i.attention_backend);
  add_str("--trainer", i.trainer);
  add_int("--mtp", i.mtp);
  if (i.capacity_factor) add("--capacity-factor", Number(*i.capacity_factor));
  if (i.routing_imbalance) add("--routing-imbalance", Number(*i.routing_imbalance));
  if (!i.calibration.empty()) add("--calibration", i.calibration);
  if (i.force_calibration) out += " --force-calibration";
  if (o.objective != "throughput") add("--objective", o.objective);
  add_str("--fix", o.fix);
  if (o.max_mem_gib) add("--max-mem-gib", Number(*o.max_mem_gib));
  if (o.headroom_gib) add("--headroom-gib", Number(*o.headroom_gib));
  return out;
}

PlanAdvice NoFitAdvice(const PlanOptions& options, const Inputs& in, const CostModel& cost,
                       const SearchResult& result, std::optional<double> limit_gib, Objective objective) {
  PlanAdvice advice;
  const Enumeration& e = result.enumeration;
  if (result.scored == 0) {
    // Nothing legal: the rules to look at first.
    if (e.candidates == 0) {
      advice.text = "no layout is legal: no candidate agrees with --fix " + options.fix.value_or("") +
                    " (its degrees must divide the world, " + WithCommas(e.world) + " GPUs)\n";
      advice.json = {{"no_legal_layout", {{"candidates", 0}, {"top_rules", nlohmann::ordered_json::array()}}}};
      return advice;
    }
    advice.text = "no layout is legal: of " + WithCommas(e.candidates) +
                  " candidates, the rules that rejected the most (leaving out vpp_needs_pp, dense_product and "
                  "expert_product, which reject part of every search's candidates):\n";
    nlohmann::ordered_json rules = nlohmann::ordered_json::array();
    for (const auto& [rule, count] : TopRules(e, 3)) {
      advice.text += "  " + std::string(Name(rule)) + " " + WithCommas(count) + ": " + Info(rule).statement + "\n";
      rules.push_back({{"rule", Name(rule)}, {"rejected", count}, {"statement", Info(rule).statement}});
    }
    advice.text += "(`--why` lists every rule; `foldplan enumerate --layout L` names the rules one layout breaks)\n";
    advice.json = {{"no_legal_layout", {{"candidates", e.candidates}, {"top_rules", rules}}}};
    return advice;
  }
  // Legal, but none fits: the smallest peak.
  const double limit = LimitOf(in, limit_gib);
  SearchOptions peak_search;
  peak_search.top = 1;
  peak_search.threads = options.threads;
  auto pins = ParsePins(options.fix);
  if (pins.ok()) peak_search.pins = &*pins;
  const SearchResult peak = SearchLayouts(cost.legality(), SmallestPeakScorer(cost), peak_search);
  nlohmann::ordered_json json;
  std::string& t = advice.text;
  t = "no legal layout fits: none of the " + WithCommas(result.scored) + " legal layouts peaks under " +
      LimitText(in, limit_gib) + "\n";
  if (peak.status.ok() && !peak.best.empty()) {
    const Evaluation s = cost.Evaluate(peak.best.front().layout);
    const double over = s.memory.peak_gib() - limit;
    t += "smallest peak: " + Gib(s.memory.peak_gib()) + ", " + Gib(over) + " over, on stage " +
         std::to_string(s.memory.worst_stage) + " of " + LayoutShort(s.layout) + "\n";
    std::vector<MemoryTerm> terms = s.memory.terms;
    std::stable_sort(terms.begin(), terms.end(), [](const MemoryTerm& a, const MemoryTerm& b) { return a.bytes > b.bytes; });
    std::vector<std::string> largest;
    nlohmann::ordered_json terms_json = nlohmann::ordered_json::array();
    // The largest, until they make 90% of the peak (at most four; none under 1%).
    double shown = 0;
    for (size_t i = 0; i < terms.size() && largest.size() < 4 && shown < 0.9 * s.memory.peak_bytes; ++i) {
      if (terms[i].bytes < 0.01 * s.memory.peak_bytes) break;
      shown += terms[i].bytes;
      const double gib = terms[i].bytes / kBytesPerGiB;
      largest.push_back(std::string(terms[i].name) + " " + Gib(gib) + " (" +
                        Fixed(100 * terms[i].bytes / s.memory.peak_bytes, 0) + "%)");
      terms_json.push_back({{"name", terms[i].name}, {"gib", gib}});
    }
    t += "  its largest memory terms: " + Joined(largest, ", ") + "\n";
    json["smallest_peak"] = {{"layout", FormatLayout(s.layout)},
                             {"peak_gib", s.memory.peak_gib()},
                             {"limit_gib", limit},
                             {"over_gib", over},
                             {"worst_stage", s.memory.worst_stage},
                             {"largest_terms", terms_json}};
  }
  // The changes, each searched.
  PlanOptions base = options;
  base.gpus_range.clear();
  std::vector<Change> changes;
  changes.push_back(MoreGpus(base, in, limit_gib, objective));
  const JobSpec& job = in.job;
  {
    const bool has_fsdp = std::find(job.fsdp.begin(), job.fsdp.end(), true) != job.fsdp.end();
    if (has_fsdp) {
      changes.push_back(Skipped("FSDP", "already among the candidates searched"));
    } else {
      PlanOptions o = base;
      o.inputs.fsdp = "1";
      o.fix = FixWith(base.fix, {"fsdp"});
      changes.push_back(Tried("FSDP", base, o, limit_gib, objective));
    }
  }
  // A change searched over several candidates: its flags and command name
  // only the candidate that won (`key`: the layout key that narrows it).
  auto tried_narrowed = [&](const char* what, const PlanOptions& o, const char* key) {
    Change c = Tried(what, base, o, limit_gib, objective);
    if (c.best) {
      const PlanOptions narrowed = Narrowed(o, c, key);
      c.flags = ChangedFlags(base, narrowed);
      c.command = PlanCommandLine(narrowed);
    }
    return c;
  };
  {
    std::vector<std::string> names;
    for (Recompute r : RecomputeTries(in.model)) {
      if (!Has(job.recompute, r)) names.push_back(Name(r));
    }
    if (names.empty()) {
      changes.push_back(Skipped("recompute", "full and the usual module sets are already among the candidates searched"));
    } else {
      PlanOptions o = base;
      o.inputs.recompute = Joined(names, ",");
      o.fix = FixWith(base.fix, {"recompute"});
      changes.push_back(tried_narrowed("recompute", o, "recompute"));
    }
  }
  {
    const int least = *std::min_element(job.micro_batch_sizes.begin(), job.micro_batch_sizes.end());
    if (least == 1) {
      changes.push_back(Skipped("micro-batch 1", "already among the candidates searched"));
    } else {
      PlanOptions o = base;
      o.inputs.micro_batch = 1;
      o.fix = FixWith(base.fix, {"mbs"});
      changes.push_back(Tried("micro-batch 1", base, o, limit_gib, objective));
    }
  }
  {
    std::vector<std::string> fp8;
    for (int p = 0; p < kPrecisionCount; ++p) {
      const Precision precision = Precision(p);
      if (!IsFp8(precision) || !rules::PrecisionProblem(in.cluster.gpu, precision).empty()) continue;
      if (std::find(job.precisions.begin(), job.precisions.end(), precision) != job.precisions.end()) continue;
      fp8.push_back(Name(precision));
    }
    if (fp8.empty()) {
      changes.push_back(Skipped("FP8", "every FP8 recipe " + in.cluster.gpu.name + " runs is already among the candidates, or it runs none"));
    } else {
      PlanOptions o = base;
      o.inputs.precision = Joined(fp8, ",");
      o.fix = FixWith(base.fix, {"precision"});
      changes.push_back(tried_narrowed("FP8", o, "precision"));
    }
  }
  t += "changes, each searched by the cost model (the best layout that fits, or the smallest peak when none does):\n";
  nlohmann::ordered_json changes_json = nlohmann::ordered_json::array();
  for (const Change& c : changes) {
    t += ChangeLine(c, in, limit_gib);
    changes_json.push_back(ChangeJson(c));
  }
  json["changes"] = changes_json;
  advice.json = {{"no_fit", json}};
  return advice;
}

PlanAdvice NoFitAdviceAtSize(const PlanOptions& options, int gpus, std::optional<double> limit_gib,
                             Objective objective) {
  PlanOptions at = options;
  at.gpus_range.clear();
  at.inputs.gpus = gpus;
  auto pins = ParsePins(at.fix);
  if (!pins.ok()) return {};
  auto inputs = LoadInputs(at.inputs);
  if (!inputs.ok()) return {};
  Inputs in = std::move(inputs).value();
  in.job = PinnedJob(in.job, *pins);
  auto model = CostModel::Create(in.cluster, in.model, in.job, in.calibration_use);
  if (!model.ok()) return {};
  SearchOptions search;
  search.top = 1;
  search.threads = options.threads;
  search.pins = &*pins;
  search.max_peak_memory_gib = limit_gib;
  const SearchResult r = SearchLayouts(model.value()->legality(), CostScorer(*model.value(), objective), search);
  if (!r.status.ok()) return {};
  // The advice's commands plan that size: all the cluster, or --gpus.
  PlanOptions shown = at;
  if (gpus == in.cluster.total_gpus()) shown.inputs.gpus.reset();
  PlanAdvice advice = NoFitAdvice(shown, in, *model.value(), r, limit_gib, objective);
  advice.text = "at " + WithCommas(gpus) + " GPUs, the largest size:\n" + advice.text;
  return advice;
}

namespace {

// A smaller world tried for the fewer-GPUs advice: its GPU count and the
// flags that give it (--gpus, --gpus-per-domain), and why it is a candidate.
struct WorldCandidate {
  int gpus = 0;
  std::optional<int> gpus_per_domain;
  std::string why;
};

int TwoAdic(int64_t n) {
  int v = 0;
  while (n > 0 && n % 2 == 0) {
    n /= 2;
    ++v;
  }
  return v;
}

// The candidate smaller worlds (doc/usage.md, `foldplan plan`), at most five,
// largest first, each at least half the world, in whole nodes:
//  1. the largest world below with more factors of two (288 -> 256): more
//     degrees divide it;
//  2. on multi-node NVLink domains of a size not a power of two (NVL72),
//     the largest power of two of whole nodes from every domain the world
//     uses (64 of 72: --gpus-per-domain 64);
//  3. one whole multi-node domain dropped (288 -> 216);
//  4. three quarters and half of the world, in whole domains (or nodes):
//     where the global batch, not the GPUs, limits the step.
std::vector<WorldCandidate> FewerGpuWorlds(const Inputs& in) {
  const ClusterSpec& c = in.cluster;
  const int world = WorldOf(in);
  const int node = c.gpus_per_node;
  const int domain = c.nvlink_domain_gpus;
  std::vector<WorldCandidate> out;
  const auto add = [&](int64_t gpus, std::optional<int> per_domain, const std::string& why) {
    if (gpus < 1 || gpus >= world || 2 * gpus < world || gpus % node != 0) return;
    for (const WorldCandidate& w : out) {
      if (w.gpus == gpus && w.gpus_per_domain == per_domain) return;
    }
    out.push_back({static_cast<int>(gpus), per_domain, why});
  };
  const int v = TwoAdic(world);
  if (v < 30) {
    const int64_t m = int64_t{1} << (v + 1);
    add((world - 1) / m * m, std::nullopt, "more factors of two");
  }
  const bool whole_domains = world % domain == 0;
  if (in.job.gpus_per_domain == 0 && domain > node && (domain & (domain - 1)) != 0 && whole_domains) {
    int g = 1;
    while (g * 2 <= domain) g *= 2;
    while (g >= node && g % node != 0) g /= 2;
    if (g >= node) add(int64_t{world / domain} * g, g, std::to_string(g) + " of every " + std::to_string(domain) + "-GPU domain");
  }
  if (domain > node && whole_domains && world / domain >= 2) add(world - domain, std::nullopt, "one NVLink domain dropped");
  const int unit = whole_domains && domain <= world / 2 ? domain : node;
  add(int64_t{world} * 3 / 4 / unit * unit, std::nullopt, "three quarters of the world");
  add(int64_t{world} / 2 / unit * unit, std::nullopt, "half the world");
  std::stable_sort(out.begin(), out.end(), [](const WorldCandidate& a, const WorldCandidate& b) { return a.gpus > b.gpus; });
  if (out.size() > 5) out.resize(5);
  return out;
}

}  // namespace

PlanAdvice FewerGpusAdvice(const PlanOptions& options, const Inputs& in, const Evaluation& best,
                           std::optional<double> limit_gib, Objective objective) {
  PlanAdvice advice;
  if (objective != Objective::kThroughput || !options.inputs.recipe.empty()) return advice;
  if (auto pins = ParsePins(options.fix); !pins.ok() || pins->world) return advice;
  const int world = WorldOf(in);
  const double cap_s = best.step.step_time_s / (1 - kFewerGpusTolerance);
  struct Found {
    WorldCandidate world;
    PlanOptions options;
    Evaluation best;
  };
  std::vector<Found> found;
  for (const WorldCandidate& w : FewerGpuWorlds(in)) {
    PlanOptions o = options;
    o.gpus_range.clear();
    if (w.gpus_per_domain) o.inputs.gpus_per_domain = w.gpus_per_domain;
    const int held = w.gpus_per_domain ? in.cluster.domains() * *w.gpus_per_domain : in.cluster.total_gpus();
    o.inputs.gpus = w.gpus == held && !options.inputs.gpus ? std::nullopt : std::optional<int>(w.gpus);
    const Variant v = SearchVariant(o, limit_gib, objective, cap_s, /*smallest_peak=*/false);
    if (!v.status.ok() || !v.best) continue;
    if (v.best->step.tokens_per_s < (1 - kFewerGpusTolerance) * best.step.tokens_per_s) continue;
    found.push_back({w, o, *v.best});
  }
  if (found.empty()) return advice;
  // The most tokens/s first (ties: fewer GPUs).
  std::stable_sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    if (a.best.step.tokens_per_s != b.best.step.tokens_per_s) return a.best.step.tokens_per_s > b.best.step.tokens_per_s;
    return a.world.gpus < b.world.gpus;
  });
  std::string& t = advice.text;
  const double full = best.step.tokens_per_s;
  t = "fewer GPUs: all " + WithCommas(world) + " give " + Tokens(full) + " (" +
      WithCommas(static_cast<unsigned long long>(full / world)) + " per GPU); of the smaller worlds tried on this " +
      "cluster, these give more, or within " + Fixed(100 * kFewerGpusTolerance, 0) + "% with fewer GPUs:\n";
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Found& f : found) {
    const double gain = f.best.step.tokens_per_s / full - 1;
    const std::string flags = ChangedFlags(options, f.options);
    t += "  " + WithCommas(f.world.gpus) + " GPUs, " + f.world.why + " (" + flags + "): " +
         Tokens(f.best.step.tokens_per_s) + " (" + (gain >= 0 ? "+" : "") + Fixed(100 * gain, 1) + "%), " +
         WithCommas(static_cast<unsigned long long>(f.best.step.tokens_per_s / f.world.gpus)) + " per GPU, step " +
         Seconds(f.best.step.step_time_s) + ": " + LayoutShort(f.best.layout) + "\n";
    t += "      " + PlanCommandLine(f.options) + "\n";
    nlohmann::ordered_json j = LayoutFigures(f.best, f.world.gpus);
    j["why"] = f.world.why;
    j["flags"] = flags;
    j["command"] = PlanCommandLine(f.options);
    j["gain"] = gain;
    list.push_back(j);
  }
  advice.json = {{"fewer_gpus", {{"tolerance", kFewerGpusTolerance}, {"world", world}, {"tokens_per_s", full}, {"worlds", list}}}};
  return advice;
}

}  // namespace foldplan
