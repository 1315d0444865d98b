#include "report/report_inputs.h"

#include <limits>

#include "core/atomic_file.h"
#include "core/formats.h"
#include "core/json_check.h"
#include "report/json_stream.h"

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
  out->equivalent_layouts =
      static_cast<unsigned long long>(c.Int("equivalent_layouts", 1, std::numeric_limits<int64_t>::max(), 1));
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
  if (auto limit = root.OptionalObject("memory_limit")) out.memory_limit_gib = limit->Number("max_peak_gib", 0, kInf, 0);
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

// A top-level "schema" member checked the moment it is read, before the
// body: a file of another kind is refused without reading the rest.
bool SchemaIs(const std::string& key, const nlohmann::json& value, const char* schema, JsonErrors* errors) {
  if (key != "schema") return true;
  const nlohmann::json one = {{"schema", value}};
  CheckedObject o(one, "", errors);
  o.Enum("schema", {schema});
  return errors->empty();
}

SimSegment ReadSegment(CheckedObject& s) {
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
  return seg;
}

bool OneOf(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (s == n) return true;
  }
  return false;
}

// What the report reads of a simulation file: the members below, each
// segment's and memory rank's own fields; the streamed lists are the
// critical path's segments, the memory timeline and each rank's points.
bool KeepSimulationField(JsonPath p) {
  if (p.size() == 1) {
    return OneOf(p[0], {"schema", "layout", "schedule", "hbm_gib", "simulated", "analytical", "critical_path",
                        "memory_timeline"});
  }
  if (p[0] == "simulated") return p.size() == 2 && OneOf(p[1], {"step_time_s", "bubble_fraction"});
  if (p[0] == "analytical") return p.size() == 2 && p[1] == "step_time_s";
  if (p[0] == "critical_path") {
    if (p.size() == 2) return p[1] == "segments";
    return p.size() > 4 || OneOf(p[3], {"rank", "pass", "microbatch", "start_s", "duration_s", "by_kind_s"});
  }
  if (p[0] == "memory_timeline") {
    return p.size() != 3 || OneOf(p[2], {"rank", "pipeline_rank", "peak_bytes", "model_peak_bytes", "points"});
  }
  return false;
}

bool StreamedSimulationList(JsonPath p) {
  return (p.size() == 1 && p[0] == "memory_timeline") ||
         (p.size() == 2 && p[0] == "critical_path" && p[1] == "segments") ||
         (p.size() == 3 && p[0] == "memory_timeline" && p[2] == "points");
}

}  // namespace

Result<SimulationSummary> ParseSimulation(const std::string& text, const std::string& file) {
  JsonErrors errors(file);
  SimulationSummary out;
  std::vector<std::pair<double, double>> points;  // of the memory rank being read
  bool points_bad = false;
  JsonStreamRules rules;
  rules.keep = KeepSimulationField;
  rules.streamed = StreamedSimulationList;
  rules.top_level = [&](const std::string& key, const nlohmann::json& value) {
    return SchemaIs(key, value, kSimulationSchema, &errors);
  };
  // Each element checked as it completes; the first bad one stops the read.
  rules.element = [&](JsonPath p, nlohmann::json&& e) {
    const std::string pointer = PointerOfPath(p);
    if (p[0] == "critical_path") {
      CheckedObject s(e, pointer, &errors);
      if (!e.is_object()) return false;
      SimSegment seg = ReadSegment(s);
      if (out.critical_path_segments++ < kMaxSegments) out.critical_path.push_back(std::move(seg));
    } else if (p.size() == 4) {  // /memory_timeline/N/points/I
      if (!e.is_array() || e.size() != 2 || !e[0].is_number() || !e[1].is_number()) {
        if (!points_bad) errors.Add(pointer, "expected [seconds, bytes], found " + DescribeJsonValue(e));
        points_bad = true;
      } else if (out.memory_ranks < kMaxMemoryRanks) {
        points.push_back({e[0].get<double>(), e[1].get<double>()});
      }
    } else {  // /memory_timeline/N, its points already streamed
      CheckedObject m(e, pointer, &errors);
      SimMemory mem;
      mem.rank = static_cast<int>(m.Int("rank", 0, kMaxWorldSize));
      mem.pipeline_rank = static_cast<int>(m.Int("pipeline_rank", 0, kMaxWorldSize));
      mem.peak_bytes = m.Number("peak_bytes", 0, kInf);
      mem.model_peak_bytes = m.Number("model_peak_bytes", 0, kInf);
      if (!m.Has("points") || !m.Raw("points").is_array()) {
        errors.Add(m.Pointer("points"), "expected a list of [seconds, bytes] pairs");
      }
      mem.points = std::move(points);
      points.clear();
      points_bad = false;
      if (out.memory_ranks++ < kMaxMemoryRanks) out.memory.push_back(std::move(mem));
    }
    return errors.empty();
  };
  auto streamed = StreamJson(text, file, rules);
  if (!streamed.ok()) return streamed.status();
  if (!errors.empty()) return errors.status();
  const nlohmann::json& doc = streamed->kept;
  CheckedObject root(doc, "", &errors);
  root.Enum("schema", {kSimulationSchema});
  if (!errors.empty()) return errors.status();
  out.layout = root.String("layout");
  out.schedule = root.String("schedule");
  out.hbm_gib = root.Number("hbm_gib", 0, kInf, 0);
  CheckedObject simulated = root.Object("simulated");
  out.simulated_step_s = simulated.Number("step_time_s", 0, kInf);
  out.simulated_bubble_fraction = simulated.Number("bubble_fraction", 0, 1, 0);
  CheckedObject analytical = root.Object("analytical");
  out.analytical_step_s = analytical.Number("step_time_s", 0, kInf);
  CheckedObject critical = root.Object("critical_path");
  for (auto [parent, key] : {std::pair{&critical, "segments"}, std::pair{&root, "memory_timeline"}}) {
    if (!parent->Has(key)) {
      errors.Add(parent->Pointer(key), "missing; expected a list of objects");
    } else if (!parent->Raw(key).is_array()) {
      errors.Add(parent->Pointer(key), "expected a list of objects, found " + DescribeJsonValue(parent->Raw(key)));
    }
  }
  if (!errors.empty()) return errors.status();
  return out;
}

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
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParsePlanSummary(text.value(), path);
}

Result<PlanSummary> ParsePlanSummary(const std::string& text, const std::string& file) {
  // The schema first (a rank map or a simulation given as the plan is
  // refused before its body is read); the rank map is not kept.
  JsonErrors errors(file);
  JsonStreamRules rules;
  rules.keep = [](JsonPath p) { return p.size() > 1 || p[0] != "rank_map"; };
  rules.top_level = [&](const std::string& key, const nlohmann::json& value) {
    return SchemaIs(key, value, kPlanSchema, &errors);
  };
  auto doc = StreamJson(text, file, rules);
  if (!doc.ok()) return doc.status();
  if (!errors.empty()) return errors.status();
  return PlanSummaryOf(doc->kept, file);
}

Result<SimulationSummary> ReadSimulation(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseSimulation(text.value(), path);
}

}  // namespace foldplan
