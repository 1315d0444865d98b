#include "report/report_inputs.h"

#include <limits>

#include "core/formats.h"
#include "core/json_check.h"

namespace foldplan {

namespace {

constexpr double kInf = std::numeric_limits<double>::max();

void ReadCandidate(CheckedObject& c, PlanCandidate* out) {
  CheckedObject layout = c.Object("layout");
  out->layout = layout.String("text");
  out->step_time_s = c.Number("step_time_s", 0, kInf);
  out->tokens_per_s = c.Number("tokens_per_s", 0, kInf);
  out->mfu = c.Number("mfu", 0, kInf);
  CheckedObject step = c.Object("step");
  out->microbatches = step.Int("microbatches", 0);
  out->stage_compute_s = step.Number("stage_compute_s", 0, kInf);
  out->stage_exposed_comm_s = step.Number("stage_exposed_comm_s", 0, kInf);
  out->stage_time_s = step.Number("stage_time_s", 0, kInf);
  out->pipeline_s = step.Number("pipeline_s", 0, kInf);
  out->bubble_s = step.Number("bubble_s", 0, kInf);
  out->dp_exposed_s = step.Number("dp_exposed_s", 0, kInf);
  out->optimizer_s = step.Number("optimizer_s", 0, kInf);
  out->stage_host_exposed_s = step.Number("stage_host_exposed_s", 0, kInf, 0);
  out->host_step_s = step.Number("host_step_s", 0, kInf, 0);
  CheckedObject memory = c.Object("memory");
  out->peak_gib = memory.Number("peak_gib", 0, kInf);
  out->hbm_gib = memory.Number("hbm_gib", 0, kInf);
  out->fits = memory.Bool("fits");
  out->worst_stage = static_cast<int>(memory.Int("worst_stage", 0, 1 << 20));
  CheckedObject terms = memory.Object("terms");
  if (memory.Has("terms") && memory.Raw("terms").is_object()) {
    for (const auto& item : memory.Raw("terms").items()) {
      CheckedObject term(item.value(), terms.Pointer(item.key()), c.errors());
      out->memory_terms.push_back({item.key(), term.Number("gib", 0, kInf), term.String("note", "")});
    }
  }
  if (c.Has("comm") && c.Raw("comm").is_object()) {
    for (const auto& item : c.Raw("comm").items()) {
      CheckedObject kind(item.value(), c.Pointer("comm") + "/" + EscapePointerToken(item.key()), c.errors());
      out->comm.push_back({item.key(), kind.Number("total_s", 0, kInf), kind.Number("exposed_s", 0, kInf)});
    }
  } else {
    c.Object("comm");  // records the error
  }
  if (c.Has("violations") && c.Raw("violations").is_array()) {
    out->violations = static_cast<int>(c.Raw("violations").size());
    // Each {"rule", "detail"}, as CandidateJson writes it; others counted only.
    for (const auto& v : c.Raw("violations")) {
      if (!v.is_object() || !v.contains("rule") || !v["rule"].is_string()) continue;
      const auto detail = v.find("detail");
      out->violated.emplace_back(v["rule"].get<std::string>(),
                                 detail != v.end() && detail->is_string() ? detail->get<std::string>() : "");
    }
  }
}

Result<PlanSummary> PlanSummaryOf(const nlohmann::json& doc, const std::string& path) {
  JsonErrors errors(path);
  CheckedObject root(doc, "", &errors);
  root.Enum("schema", {kPlanSchema});
  PlanSummary out;
  out.objective = root.String("objective", "");
  CheckedObject inputs = root.Object("inputs");
  for (auto [key, field] : {std::pair{"cluster", &out.cluster}, std::pair{"model", &out.model},
                            std::pair{"job", &out.job}}) {
    CheckedObject entry = inputs.Object(key);
    *field = entry.String("name");
  }
  if (!errors.empty()) return errors.status();
  ForEachObject(
      root, "candidates",
      [&](CheckedObject& c) {
        PlanCandidate one;
        ReadCandidate(c, &one);
        out.candidates.push_back(std::move(one));
      },
      kMaxReportCandidates);
  if (!errors.empty()) return errors.status();
  if (out.candidates.empty()) {
    errors.Add("/candidates", "expected at least one candidate, found none");
    return errors.status();
  }
  return out;
}

Result<SimulationSummary> SimulationSummaryOf(const nlohmann::json& doc, const std::string& path) {
  JsonErrors errors(path);
  CheckedObject root(doc, "", &errors);
  root.Enum("schema", {kSimulationSchema});
  if (!errors.empty()) return errors.status();
  SimulationSummary out;
  out.layout = root.String("layout");
  out.schedule = root.String("schedule");
  CheckedObject simulated = root.Object("simulated");
  out.simulated_step_s = simulated.Number("step_time_s", 0, kInf);
  out.simulated_bubble_fraction = simulated.Number("bubble_fraction", 0, 1, 0);
  CheckedObject analytical = root.Object("analytical");
  out.analytical_step_s = analytical.Number("step_time_s", 0, kInf);
  CheckedObject critical = root.Object("critical_path");
  ForEachObject(critical, "segments", [&](CheckedObject& s) {
    SimSegment seg;
    seg.rank = static_cast<int>(s.Int("rank", 0, kMaxWorldSize));
    seg.pass = s.Enum("pass", {"F", "B", "W", "step"});
    seg.microbatch = static_cast<int>(s.Int("microbatch", -1, std::numeric_limits<int>::max()));
    seg.start_s = s.Number("start_s", 0, kInf);
    seg.duration_s = s.Number("duration_s", 0, kInf);
    if (s.Has("by_kind_s") && s.Raw("by_kind_s").is_object()) {
      for (const auto& item : s.Raw("by_kind_s").items()) {
        if (item.value().is_number()) seg.by_kind_s.push_back({item.key(), item.value().get<double>()});
      }
    }
    out.critical_path.push_back(std::move(seg));
  });
  ForEachObject(root, "memory_timeline", [&](CheckedObject& m) {
    SimMemory mem;
    mem.rank = static_cast<int>(m.Int("rank", 0, kMaxWorldSize));
    mem.pipeline_rank = static_cast<int>(m.Int("pipeline_rank", 0, kMaxWorldSize));
    mem.peak_bytes = m.Number("peak_bytes", 0, kInf);
    mem.model_peak_bytes = m.Number("model_peak_bytes", 0, kInf);
    if (!m.Has("points") || !m.Raw("points").is_array()) {
      errors.Add(m.Pointer("points"), "expected a list of [seconds, bytes] pairs");
      return;
    }
    const nlohmann::json& points = m.Raw("points");
    for (size_t i = 0; i < points.size(); ++i) {
      const nlohmann::json& p = points[i];
      if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number()) {
        errors.Add(m.Pointer("points") + "/" + std::to_string(i),
                   "expected [seconds, bytes], found " + DescribeJsonValue(p));
        return;
      }
      mem.points.push_back({p[0].get<double>(), p[1].get<double>()});
    }
    out.memory.push_back(std::move(mem));
  });
  if (!errors.empty()) return errors.status();
  return out;
}

}  // namespace

LayoutVerdict VerdictOf(const PlanCandidate& candidate) {
  LayoutVerdict v;
  v.layout = candidate.layout;
  v.peak_gib = candidate.peak_gib;
  v.hbm_gib = candidate.hbm_gib;
  v.worst_stage = candidate.worst_stage;
  v.fits = candidate.fits;
  v.violations = candidate.violated;
  for (int i = static_cast<int>(v.violations.size()); i < candidate.violations; ++i) v.violations.emplace_back("?", "");
  return v;
}

Result<PlanSummary> ReadPlanSummary(const std::string& path) {
  auto doc = ParseJsonFile(path);
  if (!doc.ok()) return doc.status();
  return PlanSummaryOf(doc.value(), path);
}

Result<PlanSummary> ParsePlanSummary(const std::string& text, const std::string& file) {
  auto doc = ParseJsonText(text, file);
  if (!doc.ok()) return doc.status();
  return PlanSummaryOf(doc.value(), file);
}

Result<SimulationSummary> ReadSimulation(const std::string& path) {
  auto doc = ParseJsonFile(path);
  if (!doc.ok()) return doc.status();
  return SimulationSummaryOf(doc.value(), path);
}

Result<SimulationSummary> ParseSimulation(const std::string& text, const std::string& file) {
  auto doc = ParseJsonText(text, file);
  if (!doc.ok()) return doc.status();
  return SimulationSummaryOf(doc.value(), file);
}

}  // namespace foldplan
