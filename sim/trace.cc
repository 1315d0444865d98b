#include "sim/trace.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "core/formats.h"

namespace foldplan {
namespace {

// Nanoseconds as microseconds with three decimals, exactly.
void Us(std::string& out, SimNs ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
  out += buf;
}

// A JSON string (labels are op names; escape anyway).
void Quoted(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

std::string EventName(const TaskGraph& g, const SimTask& t) {
  std::string name = Name(t.pass);
  if (t.microbatch >= 0) name += " mb" + std::to_string(t.microbatch);
  if (t.layer >= 0) name += " L" + std::to_string(t.layer);
  name += ' ';
  name += g.label(t.label);
  return name;
}

}  // namespace

std::string TraceJson(const SimResult& result, const std::vector<int>& ranks, const std::string& layout_text) {
  const TaskGraph& g = result.graph.graph;
  const EngineRun& run = result.run;
  std::vector<bool> keep(static_cast<size_t>(g.ranks()), ranks.empty());
  for (int r : ranks) {
    if (r >= 0 && r < g.ranks()) keep[static_cast<size_t>(r)] = true;
  }
  std::string out;
  out.reserve(g.size() * 160);
  out += "{\"otherData\":{\"schema\":";
  Quoted(out, kTraceSchema);
  out += ",\"layout\":";
  Quoted(out, layout_text);
  out += ",\"schedule\":";
  Quoted(out, Name(result.schedule));
  out += "},\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto begin = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (int r = 0; r < g.ranks(); ++r) {
    if (!keep[static_cast<size_t>(r)]) continue;
    begin();
    out += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(r) +
           ",\"args\":{\"name\":\"pipeline rank " + std::to_string(r) + "\"}}";
    for (int s = 0; s < kSimStreamCount; ++s) {
      begin();
      out += "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(r) + ",\"tid\":" + std::to_string(s) +
             ",\"args\":{\"name\":\"" + Name(static_cast<SimStream>(s)) + "\"}}";
    }
  }
  for (uint32_t id = 0; id < g.size(); ++id) {
    const SimTask& t = g.task(id);
    const int32_t* members = g.members(id);
    for (uint32_t k = 0; k < t.member_count; ++k) {
      const int r = members[k];
      if (!keep[static_cast<size_t>(r)]) continue;
      begin();
      out += "{\"ph\":\"X\",\"name\":";
      Quoted(out, EventName(g, t));
      out += ",\"cat\":\"";
      out += Name(t.kind);
      out += "\",\"pid\":" + std::to_string(r) + ",\"tid\":" + std::to_string(static_cast<int>(t.stream)) + ",\"ts\":";
      Us(out, run.start_ns[id]);
      out += ",\"dur\":";
      Us(out, run.end_ns[id] - run.start_ns[id]);
      out += '}';
    }
  }
  // Flow arrows: send -> the pass that waits for it.
  uint64_t flow = 0;
  for (const SendRecord& s : result.graph.sends) {
    const int from = g.members(s.send)[0], to = g.members(s.receiver)[0];
    if (!keep[static_cast<size_t>(from)] || !keep[static_cast<size_t>(to)]) continue;
    ++flow;
    begin();
    out += "{\"ph\":\"s\",\"name\":\"pp_send\",\"cat\":\"pp\",\"id\":" + std::to_string(flow) +
           ",\"pid\":" + std::to_string(from) + ",\"tid\":" + std::to_string(static_cast<int>(g.task(s.send).stream)) +
           ",\"ts\":";
    Us(out, run.start_ns[s.send]);
    out += "},\n{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"pp_send\",\"cat\":\"pp\",\"id\":" + std::to_string(flow) +
           ",\"pid\":" + std::to_string(to) + ",\"tid\":" + std::to_string(static_cast<int>(g.task(s.receiver).stream)) +
           ",\"ts\":";
    Us(out, run.start_ns[s.receiver]);
    out += '}';
  }
  out += "\n]}\n";
  return out;
}

}  // namespace foldplan
