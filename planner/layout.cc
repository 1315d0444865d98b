#include "planner/layout.h"

#include <charconv>
#include <map>
#include <sstream>

#include "core/formats.h"
#include "planner/pipeline_layout.h"

namespace foldplan {
namespace {

// Degrees and counts: at most the largest world, so that products of two
// fit comfortably in 64 bits.
constexpr int kMaxDegree = static_cast<int>(kMaxWorldSize);

Result<int> ParsePositive(const std::string& key, const std::string& value) {
  int out = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (ec != std::errc() || ptr != end || out < 1 || out > kMaxDegree) {
    return Status::Error("layout: " + key + "=" + value + ": expected a positive integer up to " +
                         std::to_string(kMaxDegree));
  }
  return out;
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
    auto n = ParsePositive("stages", part);
    if (!n.ok()) return Status::Error("layout: stages=" + value +
                                      ": expected layer counts >= 1 separated by '/'");
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
    "a2a_overlap, precision, fsdp, tp_overlap, stages, pp_layout, world";

// One key=value into `pins`.
Status ReadKey(const std::string& key, const std::string& value, LayoutPins* pins) {
  const std::map<std::string, std::optional<int>*> degrees = {
      {"world", &pins->world}, {"pp", &pins->pp}, {"vpp", &pins->vpp}, {"dp", &pins->dp},
      {"cp", &pins->cp},       {"tp", &pins->tp}, {"ep", &pins->ep},   {"etp", &pins->etp},
      {"edp", &pins->edp},     {"mbs", &pins->mbs}};
  const std::map<std::string, std::optional<bool>*> flags = {
      {"a2a_overlap", &pins->a2a_overlap}, {"fsdp", &pins->fsdp}, {"tp_overlap", &pins->tp_overlap}};
  if (auto it = degrees.find(key); it != degrees.end()) {
    auto n = ParsePositive(key, value);
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
    return Status::Error("layout: unknown key \"" + key + "\"; expected " + kKeys);
  }
  return Status();
}

}  // namespace

bool LayoutPins::empty() const {
  return !world && !pp && !vpp && !dp && !cp && !tp && !ep && !etp && !edp && !mbs && !order && !cp_style &&
         !recompute && !placement && !dispatcher && !a2a_overlap && !precision && !fsdp && !tp_overlap &&
         !stages;
}

Result<LayoutPins> ParseLayoutPins(const std::string& text) {
  LayoutPins pins;
  std::map<std::string, bool> given;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      return Status::Error("layout: \"" + item + "\": expected key=value");
    }
    const std::string key = item.substr(0, eq);
    if (given[key]) return Status::Error("layout: " + key + " given twice");
    given[key] = true;
    if (Status s = ReadKey(key, item.substr(eq + 1), &pins); !s.ok()) return s;
  }
  return pins;
}

int Layout::layers_on_stage(int p) const {
  int layers = 0;
  for (size_t v = static_cast<size_t>(p); v < stage_layers.size(); v += static_cast<size_t>(pp)) {
    layers += stage_layers[v];
  }
  return layers;
}

Result<Layout> ParseLayout(const std::string& text, int default_world, const JobSpec* job) {
  Result<LayoutPins> parsed = ParseLayoutPins(text);
  if (!parsed.ok()) return parsed.status();
  const LayoutPins& k = parsed.value();

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
  if (k.stages) {
    layout.stage_layers = *k.stages;
    layout.explicit_stages = true;
    layout.pp_layout_given = k.pp_layout;
    if (k.stage_mtp) layout.stage_mtp = *k.stage_mtp;
  }

  // The world size: given, or derived from explicit dp / edp, or the default.
  // Products in 64 bits: each degree is at most 2^20.
  const long long dense_block = 1LL * layout.pp * layout.tp * layout.cp;
  const long long expert_block = 1LL * layout.pp * layout.etp * layout.ep;
  long long world = default_world;
  if (k.world) world = *k.world;
  else if (k.dp) world = dense_block * *k.dp;
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
  if (layout.explicit_stages && static_cast<long long>(layout.stage_layers.size()) != 1LL * layout.pp * layout.vpp) {
    return Status::Error(std::string("layout: ") + (layout.pp_layout_given ? "pp_layout" : "stages=") + " lists " +
                         std::to_string(layout.stage_layers.size()) + " stages but pp*vpp = " +
                         std::to_string(1LL * layout.pp * layout.vpp));
  }
  return layout;
}

std::string FormatLayout(const Layout& l) {
  std::ostringstream s;
  s << "tp=" << l.tp << ",cp=" << l.cp << ",dp=" << l.dp << ",pp=" << l.pp << ",ep=" << l.ep
    << ",etp=" << l.etp << ",edp=" << l.edp << ",vpp=" << l.vpp << ",mbs=" << l.mbs
    << ",order=" << l.order << ",cp_style=" << Name(l.cp_style)
    << ",recompute=" << Name(l.recompute) << ",placement=" << Name(l.placement)
    << ",dispatcher=" << Name(l.dispatcher) << ",a2a_overlap=" << (l.a2a_overlap ? 1 : 0)
    << ",precision=" << Name(l.precision) << ",fsdp=" << (l.fsdp ? 1 : 0)
    << ",tp_overlap=" << (l.tp_overlap ? 1 : 0) << ",world=" << l.world;
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
  if (l.dispatcher != Dispatcher::kAllToAll) add(Name(l.dispatcher));
  if (l.a2a_overlap) add("a2a-overlap");
  if (l.precision != Precision::kBF16) add(Name(l.precision));
  if (l.fsdp) add("fsdp");
  if (l.tp_overlap) add("tp-overlap");
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
