#include "planner/layout.h"

#include <charconv>
#include <map>
#include <sstream>

#include "core/formats.h"
#include "core/nearest_name.h"
#include "inputs/checked_product.h"
#include "inputs/model.h"
#include "planner/legality.h"
#include "planner/pipeline.h"
#include "planner/pipeline_layout.h"

namespace foldplan {
namespace {

// Degrees and world: at most the largest world (core/formats.h); vpp and
// mbs: the job file's ranges (inputs/job.h); a virtual stage's layers: a
// model's (inputs/model.h). Products of degrees: CheckedProduct.
constexpr int kMaxDegree = static_cast<int>(kMaxWorldSize);

Result<int> ParsePositive(const std::string& key, const std::string& value, int max = kMaxDegree) {
  int out = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (ec != std::errc() || ptr != end || out < 1 || out > max) {
    return Status::Error("layout: " + key + "=" + value + ": expected an integer in [1, " + std::to_string(max) +
                         "]");
  }
  return out;
}

int MaxOf(const std::string& key) {
  if (key == "vpp") return kMaxVpp;
  if (key == "mbs") return kMaxMicroBatch;
  return kMaxDegree;
}

// The product of degrees named by `names` ("pp*tp*cp"), or the error that
// it exceeds the largest world: no layout can have it, whatever the job.
Result<int64_t> DegreeProduct(const std::string& names, std::initializer_list<int64_t> factors) {
  if (const std::optional<int64_t> p = CheckedProduct(factors)) return *p;
  std::string values;
  for (int64_t f : factors) values += (values.empty() ? "" : "*") + std::to_string(f);
  return Status::Error("layout: " + names + " = " + values + " is more than the largest world, " +
                       std::to_string(kMaxWorldSize) + " ranks");
}

// The products every layout forms from its degrees, within the largest
// world; `vpp` and `etp` as the layout will have them.
Status CheckDegreeProducts(int64_t pp, int64_t tp, int64_t cp, int64_t dp, int64_t ep, int64_t etp, int64_t edp,
                           int64_t vpp) {
  for (const Result<int64_t>& r : {DegreeProduct("pp*tp*cp*dp", {pp, tp, cp, dp}),
                                   DegreeProduct("pp*etp*ep*edp", {pp, etp, ep, edp}),
                                   DegreeProduct("pp*vpp", {pp, vpp})}) {
    if (!r.ok()) return r.status();
  }
  return Status();
}

Result<bool> ParseFlag(const std::string& key, const std::string& value) {
  if (value == "1" || value == "true") return true;
  if (value == "0" || value == "false") return false;
  return Status::Error("layout: " + key + "=" + value + ": expected 0 or 1");
}

Result<std::vector<int>> ParseStages(const std::string& value) {
  std::vector<int> stages;
  std::stringstream in(value);
  std::string part;
  while (std::getline(in, part, '/')) {
    auto n = ParsePositive("stages", part, kMaxLayers);
    if (!n.ok()) return Status::Error("layout: stages=" + value + ": expected layer counts in [1, " +
                                      std::to_string(kMaxLayers) + "] separated by '/'");
    if (stages.size() == static_cast<size_t>(kMaxWorldSize)) {
      return Status::Error("layout: stages= lists more than " + std::to_string(kMaxWorldSize) + " stages");
    }
    stages.push_back(n.value());
  }
  if (stages.empty()) return Status::Error("layout: stages= is empty");
  return stages;
}

template <class E, size_t N>
Result<E> ParseEnum(const std::string& key, const std::string& value,
                    const std::pair<const char*, E> (&names)[N]) {
  std::string allowed;
  for (const auto& [name, e] : names) {
    if (value == name) return e;
    allowed += (allowed.empty() ? "" : ", ") + std::string(name);
  }
  return Status::Error("layout: " + key + "=" + value + ": expected one of " + allowed);
}

constexpr std::pair<const char*, CpStyle> kCpStyles[] = {{"ulysses", CpStyle::kUlysses},
                                                         {"ring", CpStyle::kRing}};
constexpr std::pair<const char*, Placement> kPlacements[] = {{"linear", Placement::kLinear},
                                                             {"packed", Placement::kPacked}};

constexpr const char* kKeys =
    "tp, cp, pp, ep, etp, dp, edp, vpp, mbs, order, cp_style, recompute, placement, dispatcher, "
    "a2a_overlap, precision, fsdp, tp_overlap, cuda_graphs, schedule, stages, pp_layout, world";

// One key=value into `pins`.
Status ReadKey(const std::string& key, const std::string& value, LayoutPins* pins) {
  const std::map<std::string, std::optional<int>*> degrees = {
      {"world", &pins->world}, {"pp", &pins->pp}, {"vpp", &pins->vpp}, {"dp", &pins->dp},
      {"cp", &pins->cp},       {"tp", &pins->tp}, {"ep", &pins->ep},   {"etp", &pins->etp},
      {"edp", &pins->edp},     {"mbs", &pins->mbs}};
  const std::map<std::string, std::optional<bool>*> flags = {
      {"a2a_overlap", &pins->a2a_overlap}, {"fsdp", &pins->fsdp}, {"tp_overlap", &pins->tp_overlap}};
  if (auto it = degrees.find(key); it != degrees.end()) {
    auto n = ParsePositive(key, value, MaxOf(key));
    if (!n.ok()) return n.status();
    *it->second = n.value();
  } else if (auto f = flags.find(key); f != flags.end()) {
    auto b = ParseFlag(key, value);
    if (!b.ok()) return b.status();
    *f->second = b.value();
  } else if (key == "order") {
    pins->order = value;
  } else if (key == "cp_style") {
    auto e = ParseEnum(key, value, kCpStyles);
    if (!e.ok()) return e.status();
    pins->cp_style = e.value();
  } else if (key == "recompute") {
    auto r = ParseRecompute(value);
    if (!r.ok()) return Status::Error("layout: recompute=" + value + ": " + r.status().message());
    pins->recompute = r.value();
  } else if (key == "placement") {
    auto e = ParseEnum(key, value, kPlacements);
    if (!e.ok()) return e.status();
    pins->placement = e.value();
  } else if (key == "dispatcher") {
    const auto d = ParseDispatcher(value);
    if (!d) return Status::Error("layout: dispatcher=" + value + ": expected one of " + DispatcherChoices());
    pins->dispatcher = *d;
  } else if (key == "precision") {
    const auto p = ParsePrecision(value);
    if (!p) return Status::Error("layout: precision=" + value + ": expected one of " + PrecisionChoices());
    pins->precision = *p;
  } else if (key == "cuda_graphs") {
    auto g = ParseCudaGraphs(value);
    if (!g.ok()) return Status::Error("layout: cuda_graphs=" + value + ": " + g.status().message());
    pins->cuda_graphs = g.value();
  } else if (key == "schedule") {
    const auto schedule = PipelineScheduleNamed(value);
    if (!schedule) {
      return Status::Error("layout: schedule=" + value + ": expected one of " + PipelineScheduleChoices());
    }
    pins->schedule = *schedule;
  } else if (key == "stages") {
    if (pins->pp_layout) return Status::Error("layout: give stages= or pp_layout=, not both");
    auto s = ParseStages(value);
    if (!s.ok()) return s.status();
    pins->stages = s.value();
  } else if (key == "pp_layout") {
    if (pins->stages) return Status::Error("layout: give stages= or pp_layout=, not both");
    auto p = ParsePipelineLayout(value);
    if (!p.ok()) return Status::Error("layout: pp_layout=" + value + ": " + p.status().message());
    pins->stages = p->decoder;
    pins->stage_mtp = p->mtp;
    pins->pp_layout = true;
  } else {
    return Status::Error("layout: unknown key \"" + key + "\"; expected " + kKeys + DidYouMean(key, ChoiceNames(kKeys)));
  }
  return Status();
}

}  // namespace

bool LayoutPins::empty() const {
  return !world && !pp && !vpp && !dp && !cp && !tp && !ep && !etp && !edp && !mbs && !order && !cp_style &&
         !recompute && !placement && !dispatcher && !a2a_overlap && !precision && !fsdp && !tp_overlap &&
         !cuda_graphs && !schedule && !stages;
}

Result<LayoutPins> ParseLayoutPins(const std::string& text) {
  // An empty text or item is a slip (a variable that was not set, a doubled
  // comma), not a request for the defaults.
  if (text.empty()) return Status::Error("layout: empty; expected key=value pairs such as tp=2,pp=8");
  LayoutPins pins;
  std::map<std::string, bool> given;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) return Status::Error("layout: \"" + text + "\": an empty item (expected key=value between commas)");
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      return Status::Error("layout: \"" + item + "\": expected key=value");
    }
    const std::string key = item.substr(0, eq);
    if (given[key]) return Status::Error("layout: " + key + " given twice");
    given[key] = true;
    if (Status s = ReadKey(key, item.substr(eq + 1), &pins); !s.ok()) return s;
  }
  const int tp = pins.tp.value_or(1);
  if (Status s = CheckDegreeProducts(pins.pp.value_or(1), tp, pins.cp.value_or(1), pins.dp.value_or(1),
                                     pins.ep.value_or(1), pins.etp.value_or(tp), pins.edp.value_or(1),
                                     pins.vpp.value_or(1));
      !s.ok()) {
    return s;
  }
  return pins;
}

int Layout::layers_on_stage(int p) const {
  int layers = 0;
  for (size_t c = 0; c < stage_layers.size(); ++c) {
    if (PipelineRankOf(schedule_or_default(), pp, static_cast<int>(c)) == p) layers += stage_layers[c];
  }
  return layers;
}

std::optional<PipelineSchedule> Layout::non_default_schedule() const {
  if (schedule && *schedule != DefaultSchedule(vpp)) return schedule;
  return std::nullopt;
}

Result<Layout> ParseLayout(const std::string& text, int default_world, const JobSpec* job) {
  Result<LayoutPins> parsed = ParseLayoutPins(text);
  if (!parsed.ok()) return parsed.status();
  return LayoutFromPins(parsed.value(), default_world, job);
}

Result<Layout> LayoutFromPins(const LayoutPins& k, int default_world, const JobSpec* job) {

  Layout layout;
  if (job) {  // the job's first candidate of every choice
    layout.mbs = job->micro_batch_sizes.front();
    layout.vpp = job->vpp.front();
    layout.order = job->orders.front();
    layout.cp_style = job->cp_styles.front();
    layout.recompute = job->recompute.front();
    layout.dispatcher = job->dispatchers.front();
    layout.a2a_overlap = job->a2a_overlap.front();
    layout.precision = job->precisions.front();
    layout.fsdp = job->fsdp.front();
    layout.tp_overlap = job->tp_overlap.front();
    layout.cuda_graphs = job->cuda_graphs.front();
  }
  layout.pp = k.pp.value_or(1);
  layout.vpp = k.vpp.value_or(layout.vpp);
  layout.cp = k.cp.value_or(1);
  layout.tp = k.tp.value_or(1);
  layout.ep = k.ep.value_or(1);
  layout.etp = k.etp.value_or(layout.tp);  // Megatron: ETP defaults to TP
  layout.mbs = k.mbs.value_or(layout.mbs);
  layout.order = k.order.value_or(layout.order);
  layout.cp_style = k.cp_style.value_or(layout.cp_style);
  layout.recompute = k.recompute.value_or(layout.recompute);
  layout.placement = k.placement.value_or(layout.placement);
  layout.dispatcher = k.dispatcher.value_or(layout.dispatcher);
  layout.a2a_overlap = k.a2a_overlap.value_or(layout.a2a_overlap);
  layout.precision = k.precision.value_or(layout.precision);
  layout.fsdp = k.fsdp.value_or(layout.fsdp);
  layout.tp_overlap = k.tp_overlap.value_or(layout.tp_overlap);
  layout.cuda_graphs = k.cuda_graphs.value_or(layout.cuda_graphs);
  if (k.schedule) {
    layout.schedule = k.schedule;
  } else if (job && !job->pipeline_schedules.empty()) {
    // The job's first schedule that runs the layout's pp and vpp (of a job
    // listing 1f1b, interleaved-1f1b, ...: 1f1b at vpp 1, the interleaved
    // one at vpp 2), else its first: as for the other options, the first
    // candidate, but one the layout's degrees can run.
    layout.schedule = job->pipeline_schedules.front();
    for (PipelineSchedule s : job->pipeline_schedules) {
      Layout probe = layout;
      probe.schedule = s;
      if (rules::ScheduleFits(0, probe)) {
        layout.schedule = s;
        break;
      }
    }
  }
  if (k.stages) {
    layout.stage_layers = *k.stages;
    layout.explicit_stages = true;
    layout.pp_layout_given = k.pp_layout;
    if (k.stage_mtp) layout.stage_mtp = *k.stage_mtp;
  }

  // The world size: given, or derived from explicit dp / edp, or the default.
  // Every product of degrees is checked (the job's vpp may be new here).
  if (Status s = CheckDegreeProducts(layout.pp, layout.tp, layout.cp, k.dp.value_or(1), layout.ep, layout.etp,
                                     k.edp.value_or(1), layout.vpp);
      !s.ok()) {
    return s;
  }
  const int64_t dense_block = *CheckedProduct({layout.pp, layout.tp, layout.cp});
  const int64_t expert_block = *CheckedProduct({layout.pp, layout.etp, layout.ep});
  int64_t world = default_world;
  if (k.world) world = *k.world;
  else if (k.dp) world = dense_block * *k.dp;     // within the largest world: checked above
  else if (k.edp) world = expert_block * *k.edp;
  if (world < 1) return Status::Error("layout: no world size (give world=N or dp=N)");
  if (world > kMaxDegree) {
    return Status::Error("layout: world " + std::to_string(world) + " is larger than " +
                         std::to_string(kMaxDegree) + " ranks");
  }
  layout.world = static_cast<int>(world);
  if (world % dense_block != 0) {
    return Status::Error("layout: pp*tp*cp = " + std::to_string(dense_block) +
                         " does not divide the world size " + std::to_string(world));
  }
  if (world % expert_block != 0) {
    return Status::Error("layout: pp*etp*ep = " + std::to_string(expert_block) +
                         " does not divide the world size " + std::to_string(world));
  }
  const int dp = static_cast<int>(world / dense_block);
  const int edp = static_cast<int>(world / expert_block);
  if (k.dp && *k.dp != dp) {
    return Status::Error("layout: dp=" + std::to_string(*k.dp) + " but world " + std::to_string(world) +
                         " / (pp*tp*cp) gives dp=" + std::to_string(dp));
  }
  if (k.edp && *k.edp != edp) {
    return Status::Error("layout: edp=" + std::to_string(*k.edp) + " but world " + std::to_string(world) +
                         " / (pp*etp*ep) gives edp=" + std::to_string(edp));
  }
  layout.dp = dp;
  layout.edp = edp;
  const int64_t stages = *CheckedProduct({layout.pp, layout.vpp});
  if (layout.explicit_stages && static_cast<int64_t>(layout.stage_layers.size()) != stages) {
    return Status::Error(std::string("layout: ") + (layout.pp_layout_given ? "pp_layout" : "stages=") + " lists " +
                         std::to_string(layout.stage_layers.size()) + " stages but pp*vpp = " +
                         std::to_string(stages));
  }
  return layout;
}

std::string FormatLayout(const Layout& l) {
  std::ostringstream s;
  s << "tp=" << l.tp << ",cp=" << l.cp << ",dp=" << l.dp << ",pp=" << l.pp << ",ep=" << l.ep
    << ",etp=" << l.etp << ",edp=" << l.edp << ",vpp=" << l.vpp;
  if (const auto schedule = l.non_default_schedule()) s << ",schedule=" << Name(*schedule);
  s << ",mbs=" << l.mbs
    << ",order=" << l.order << ",cp_style=" << Name(l.cp_style)
    << ",recompute=" << Name(l.recompute) << ",placement=" << Name(l.placement)
    << ",dispatcher=" << Name(l.dispatcher) << ",a2a_overlap=" << (l.a2a_overlap ? 1 : 0)
    << ",precision=" << Name(l.precision) << ",fsdp=" << (l.fsdp ? 1 : 0)
    << ",tp_overlap=" << (l.tp_overlap ? 1 : 0);
  // Eager (the default) is left out, as the implied schedule is.
  if (!l.cuda_graphs.none()) s << ",cuda_graphs=" << Name(l.cuda_graphs);
  s << ",world=" << l.world;
  if (l.pp_layout_given) {
    s << ",pp_layout=" << FormatPipelineLayout(l.stage_layers, l.stage_mtp);
  } else if (l.explicit_stages) {
    s << ",stages=";
    for (size_t i = 0; i < l.stage_layers.size(); ++i) s << (i ? "/" : "") << l.stage_layers[i];
  }
  return s.str();
}

std::string ShortRecipe(const Layout& l) {
  std::string out;
  auto add = [&](const std::string& word) { out += (out.empty() ? "" : " ") + word; };
  if (const auto schedule = l.non_default_schedule()) add(Name(*schedule));
  if (l.dispatcher != Dispatcher::kAllToAll) add(Name(l.dispatcher));
  if (l.a2a_overlap) add("a2a-overlap");
  if (l.precision != Precision::kBF16) add(Name(l.precision));
  if (l.fsdp) add("fsdp");
  if (l.tp_overlap) add("tp-overlap");
  if (!l.cuda_graphs.none()) add("graphs:" + Name(l.cuda_graphs));
  return out;
}

std::string ShortDegrees(const Layout& l) {
  std::ostringstream s;
  s << "tp" << l.tp << " cp" << l.cp << " dp" << l.dp << " pp" << l.pp;
  if (l.vpp > 1) s << "x" << l.vpp;
  s << " | ep" << l.ep << " etp" << l.etp << " edp" << l.edp;
  return s.str();
}

}  // namespace foldplan
