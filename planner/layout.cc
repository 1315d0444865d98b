#include "planner/layout.h"

#include <charconv>
#include <map>
#include <sstream>

namespace foldplan {
namespace {

Result<int> ParsePositive(const std::string& key, const std::string& value) {
  int out = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (ec != std::errc() || ptr != end || out < 1) {
    return Status::Error("layout: " + key + "=" + value + ": expected a positive integer");
  }
  return out;
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
constexpr std::pair<const char*, Recompute> kRecomputes[] = {
    {"none", Recompute::kNone}, {"selective", Recompute::kSelective}, {"full", Recompute::kFull}};
constexpr std::pair<const char*, Placement> kPlacements[] = {{"linear", Placement::kLinear},
                                                             {"packed", Placement::kPacked}};

}  // namespace

int Layout::layers_on_stage(int p) const {
  int layers = 0;
  for (size_t v = static_cast<size_t>(p); v < stage_layers.size(); v += static_cast<size_t>(pp)) {
    layers += stage_layers[v];
  }
  return layers;
}

Result<Layout> ParseLayout(const std::string& text, int default_world) {
  std::map<std::string, std::string> kv;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      return Status::Error("layout: \"" + item + "\": expected key=value");
    }
    const std::string key = item.substr(0, eq);
    if (kv.count(key)) return Status::Error("layout: " + key + " given twice");
    kv[key] = item.substr(eq + 1);
  }

  Layout layout;
  std::map<std::string, int*> degrees = {
      {"world", &layout.world}, {"pp", &layout.pp}, {"vpp", &layout.vpp}, {"dp", &layout.dp},
      {"cp", &layout.cp},       {"tp", &layout.tp}, {"ep", &layout.ep},   {"etp", &layout.etp},
      {"edp", &layout.edp},     {"mbs", &layout.mbs}};
  for (const auto& [key, value] : kv) {
    if (auto it = degrees.find(key); it != degrees.end()) {
      auto n = ParsePositive(key, value);
      if (!n.ok()) return n.status();
      *it->second = n.value();
    } else if (key == "order") {
      layout.order = value;
    } else if (key == "cp_style") {
      auto e = ParseEnum(key, value, kCpStyles);
      if (!e.ok()) return e.status();
      layout.cp_style = e.value();
    } else if (key == "recompute") {
      auto e = ParseEnum(key, value, kRecomputes);
      if (!e.ok()) return e.status();
      layout.recompute = e.value();
    } else if (key == "placement") {
      auto e = ParseEnum(key, value, kPlacements);
      if (!e.ok()) return e.status();
      layout.placement = e.value();
    } else if (key == "stages") {
      auto s = ParseStages(value);
      if (!s.ok()) return s.status();
      layout.stage_layers = s.value();
      layout.explicit_stages = true;
    } else {
      return Status::Error("layout: unknown key \"" + key +
                           "\"; expected tp, cp, pp, ep, etp, dp, edp, vpp, mbs, order, "
                           "cp_style, recompute, placement, stages, world");
    }
  }
  if (!kv.count("etp")) layout.etp = layout.tp;  // Megatron: ETP defaults to TP

  // The world size: given, or derived from explicit dp / edp, or the default.
  if (!kv.count("world")) {
    if (kv.count("dp")) layout.world = layout.pp * layout.tp * layout.cp * layout.dp;
    else if (kv.count("edp")) layout.world = layout.pp * layout.etp * layout.ep * layout.edp;
    else layout.world = default_world;
  }
  if (layout.world < 1) return Status::Error("layout: no world size (give world=N or dp=N)");

  const int dense_block = layout.pp * layout.tp * layout.cp;
  if (layout.world % dense_block != 0) {
    return Status::Error("layout: pp*tp*cp = " + std::to_string(dense_block) +
                         " does not divide the world size " + std::to_string(layout.world));
  }
  const int expert_block = layout.pp * layout.etp * layout.ep;
  if (layout.world % expert_block != 0) {
    return Status::Error("layout: pp*etp*ep = " + std::to_string(expert_block) +
                         " does not divide the world size " + std::to_string(layout.world));
  }
  const int dp = layout.world / dense_block;
  const int edp = layout.world / expert_block;
  if (kv.count("dp") && layout.dp != dp) {
    return Status::Error("layout: dp=" + std::to_string(layout.dp) + " but world " +
                         std::to_string(layout.world) + " / (pp*tp*cp) gives dp=" +
                         std::to_string(dp));
  }
  if (kv.count("edp") && layout.edp != edp) {
    return Status::Error("layout: edp=" + std::to_string(layout.edp) + " but world " +
                         std::to_string(layout.world) + " / (pp*etp*ep) gives edp=" +
                         std::to_string(edp));
  }
  layout.dp = dp;
  layout.edp = edp;
  if (layout.explicit_stages && static_cast<int>(layout.stage_layers.size()) != layout.pp * layout.vpp) {
    return Status::Error("layout: stages= lists " + std::to_string(layout.stage_layers.size()) +
                         " stages but pp*vpp = " + std::to_string(layout.pp * layout.vpp));
  }
  return layout;
}

std::string FormatLayout(const Layout& l) {
  std::ostringstream s;
  s << "tp=" << l.tp << ",cp=" << l.cp << ",dp=" << l.dp << ",pp=" << l.pp << ",ep=" << l.ep
    << ",etp=" << l.etp << ",edp=" << l.edp << ",vpp=" << l.vpp << ",mbs=" << l.mbs
    << ",order=" << l.order << ",cp_style=" << Name(l.cp_style)
    << ",recompute=" << Name(l.recompute) << ",placement=" << Name(l.placement)
    << ",world=" << l.world;
  if (l.explicit_stages) {
    s << ",stages=";
    for (size_t i = 0; i < l.stage_layers.size(); ++i) s << (i ? "/" : "") << l.stage_layers[i];
  }
  return s.str();
}

std::string ShortDegrees(const Layout& l) {
  std::ostringstream s;
  s << "tp" << l.tp << " cp" << l.cp << " dp" << l.dp << " pp" << l.pp;
  if (l.vpp > 1) s << "x" << l.vpp;
  s << " | ep" << l.ep << " etp" << l.etp << " edp" << l.edp;
  return s.str();
}

}  // namespace foldplan
