#include "costmodel/layout_verdict.h"

#include <cstdio>

#include "planner/layout.h"
#include "planner/legality.h"

namespace foldplan {
namespace {

std::string OneDecimal(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

LayoutVerdict JudgeLayout(const Evaluation& e) {
  LayoutVerdict v;
  v.layout = FormatLayout(e.layout);
  v.peak_gib = e.memory.peak_gib();
  v.hbm_gib = e.memory.hbm_gib;
  v.worst_stage = e.memory.worst_stage;
  v.fits = e.memory.fits;
  for (const Violation& x : e.violations) v.violations.emplace_back(Name(x.rule), x.detail);
  return v;
}

std::string OverHbmText(const LayoutVerdict& v) {
  return "peak " + OneDecimal(v.peak_gib) + " GiB on stage " + std::to_string(v.worst_stage) + " > " +
         OneDecimal(v.hbm_gib) + " GiB of HBM";
}

std::string VerdictProblems(const LayoutVerdict& v) {
  std::string out;
  if (!v.fits) out = "does not fit in memory: " + OverHbmText(v);
  if (!v.legal()) {
    std::string rules;
    for (const auto& [rule, detail] : v.violations) rules += (rules.empty() ? "" : ", ") + rule;
    out += std::string(out.empty() ? "" : "; it also ") + "breaks " + std::to_string(v.violations.size()) + " rule" +
           (v.violations.size() > 1 ? "s" : "") + ": " + rules;
  }
  return out;
}

std::string VerdictWarning(const LayoutVerdict& v, const std::string& who) {
  if (v.runs()) return "";
  return "warning: " + who + " " + VerdictProblems(v) + "\n";
}

nlohmann::ordered_json VerdictJson(const LayoutVerdict& v) {
  nlohmann::ordered_json violations = nlohmann::ordered_json::array();
  for (const auto& [rule, detail] : v.violations) violations.push_back({{"rule", rule}, {"detail", detail}});
  return {{"fits", v.fits},
          {"peak_gib", v.peak_gib},
          {"hbm_gib", v.hbm_gib},
          {"worst_stage", v.worst_stage},
          {"violations", violations}};
}

}  // namespace foldplan
