// Reading a `foldplan.measurements/v1` file (doc/validate.md "Output").
#include <cstdlib>
#include <limits>

#include "core/formats.h"
#include "core/json_check.h"
#include "inputs/measurements.h"
#include "inputs/parse_common.h"

namespace foldplan {
namespace {

using inputs_internal::IntField;
using nlohmann::json;

constexpr int kMaxWorld = static_cast<int>(kMaxWorldSize);
constexpr int64_t kMaxBytes = int64_t{1} << 50;    // a pebibyte: far past any message
constexpr double kMaxSeconds = 1e6;                // a measured step of 11 days is a broken clock
constexpr double kMaxRate = 1e9;                   // GB/s, TFLOP/s: far past any link or GPU
constexpr int kMaxItems = 1 << 20;                 // list lengths
constexpr int64_t kMaxGemmDim = int64_t{1} << 40;  // a GEMM side; far past any memory

// A list of strings (possibly empty).
std::vector<std::string> Strings(CheckedObject& parent, const std::string& key) {
  std::vector<std::string> out;
  if (!parent.Has(key)) {
    parent.errors()->Add(parent.Pointer(key), "missing; expected a list of strings");
    return out;
  }
  const json& list = parent.Raw(key);
  if (!list.is_array() || list.size() > kMaxItems) {
    parent.errors()->Add(parent.Pointer(key), "expected a list of strings, found " + DescribeJsonValue(list));
    return out;
  }
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) {
      parent.errors()->Add(parent.Pointer(key) + "/" + std::to_string(i),
                           "expected a string, found " + DescribeJsonValue(list[i]));
      continue;
    }
    out.push_back(list[i].get<std::string>());
  }
  return out;
}

MeasuredCase ReadCase(CheckedObject& c) {
  MeasuredCase m;
  m.name = c.String("case");
  m.elements_per_rank = c.Int("elements_per_rank", 0, kMaxBytes);
  m.element_bytes = IntField(c, "element_bytes", 1, 16);
  m.send_bytes_per_rank = c.Int("send_bytes_per_rank", 0, kMaxBytes);
  if (auto t = inputs_internal::RequiredObject(c, "time_s")) {
    m.median_seconds = t->Number("median", 0, kMaxSeconds);
    m.min_seconds = t->Number("min", 0, kMaxSeconds);
    m.max_seconds = t->Number("max", 0, kMaxSeconds);
    t->Finish();
    if (t->errors()->empty() && !(m.min_seconds <= m.median_seconds && m.median_seconds <= m.max_seconds)) {
      t->errors()->Add(t->pointer(), "expected min <= median <= max");
    }
  }
  m.algbw_gb_per_s = c.Number("algbw_gb_per_s", 0, kMaxRate);
  m.bus_factor = c.Number("bus_factor", 0, 2);
  m.busbw_gb_per_s = c.Number("busbw_gb_per_s", 0, kMaxRate);
  if (c.Has("flops")) m.flops = c.Number("flops", 0, 1e30);
  if (c.Has("tflops_per_s")) m.tflops_per_s = c.Number("tflops_per_s", 0, kMaxRate);
  if (auto g = c.OptionalObject("gemm")) {
    MeasuredGemm shape;
    shape.batch = g->Int("batch", 1, kMaxGemmDim);
    shape.m = g->Int("m", 1, kMaxGemmDim);
    shape.n = g->Int("n", 1, kMaxGemmDim);
    shape.k = g->Int("k", 1, kMaxGemmDim);
    g->Finish();
    m.gemm = shape;
  }
  m.wrong_elements = c.Int("wrong_elements", 0, std::numeric_limits<int64_t>::max());
  c.Finish();
  return m;
}

MeasuredOp ReadOp(CheckedObject& o) {
  MeasuredOp op;
  op.op = o.Enum("op", kMeasuredOpNames);
  op.group_kind = o.String("group_kind");
  op.group_count = IntField(o, "group_count", 0, kMaxWorld);
  op.notes = Strings(o, "notes");
  const std::string status = o.String("status");
  op.ran = status == "ran";
  if (!op.ran) {
    op.skip_reason = status;
    o.Finish();
    return op;
  }
  op.group_size = IntField(o, "group_size", 1, kMaxWorld);
  if (auto p = inputs_internal::RequiredObject(o, "placement")) {
    op.placement_class = p->String("class");
    op.max_nodes_per_group = IntField(*p, "max_nodes_per_group", 0, kMaxWorld);
    const std::string key = "ranks_per_node";
    const json* list = p->Has(key) ? &p->Raw(key) : nullptr;
    if (!list || !list->is_array() || list->size() > kMaxItems) {
      p->errors()->Add(p->Pointer(key), "expected a list (per group) of lists of integers");
    } else {
      for (size_t g = 0; g < list->size(); ++g) {
        const json& per_host = (*list)[g];
        const std::string pointer = p->Pointer(key) + "/" + std::to_string(g);
        std::vector<int> counts;
        if (!per_host.is_array()) {
          p->errors()->Add(pointer, "expected a list of integers, found " + DescribeJsonValue(per_host));
          continue;
        }
        for (size_t h = 0; h < per_host.size(); ++h) {
          const json& n = per_host[h];
          if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > kMaxWorld) {
            p->errors()->Add(pointer + "/" + std::to_string(h),
                             "expected an integer in [1, " + std::to_string(kMaxWorld) + "], found " +
                                 DescribeJsonValue(n));
            continue;
          }
          counts.push_back(static_cast<int>(n.get<int64_t>()));
        }
        op.ranks_per_node.push_back(std::move(counts));
      }
    }
    p->Finish();
  }
  ForEachObject(o, "sizes", [&](CheckedObject& c) { op.cases.push_back(ReadCase(c)); }, kMaxItems);
  o.Finish();
  return op;
}

}  // namespace

Result<MeasurementSet> ParseMeasurements(const json& doc, const std::string& file) {
  JsonErrors errors(file);
  CheckedObject root(doc, "", &errors);
  if (!inputs_internal::CheckSchema(root, kMeasurementsSchema)) return errors.status();
  MeasurementSet m;
  m.source = file;
  if (auto env = inputs_internal::RequiredObject(root, "environment")) {
    m.hosts = Strings(*env, "hosts");
    m.ranks = IntField(*env, "ranks", 1, kMaxWorld);
    m.backend = env->Enum("backend", {"mpi", "nccl"});
    m.mpi_version = env->String("mpi_version");
    m.devices = Strings(*env, "devices");
    env->Finish();
  }
  if (auto plan = inputs_internal::RequiredObject(root, "plan")) {
    m.plan_file = plan->String("file");
    m.plan_schema = plan->String("schema");
    m.layout = plan->String("layout");
    m.world_size = IntField(*plan, "world_size", 1, kMaxWorld);
    plan->Finish();
  }
  m.conventions = root.String("conventions");
  ForEachObject(root, "ops", [&](CheckedObject& o) { m.ops.push_back(ReadOp(o)); }, kMaxItems);
  m.wrong_elements = root.Int("wrong_elements", 0, std::numeric_limits<int64_t>::max());
  root.Finish();
  if (!errors.empty()) return errors.status();

  // Cross-field rules: the total is the sum of the cases; ranks match the plan.
  int64_t sum = 0;
  for (const MeasuredOp& op : m.ops) {
    for (const MeasuredCase& c : op.cases) {
      if (c.wrong_elements > std::numeric_limits<int64_t>::max() - sum) {
        sum = -1;
        break;
      }
      sum += c.wrong_elements;
    }
    if (sum < 0) break;
  }
  if (sum != m.wrong_elements) {
    errors.Add("/wrong_elements", "expected the sum of the cases' wrong_elements (" +
                                      (sum < 0 ? std::string("past int64") : std::to_string(sum)) + "), found " +
                                      std::to_string(m.wrong_elements));
  }
  if (m.ranks != m.world_size) {
    errors.Add("/environment/ranks", "expected the plan's world_size (" + std::to_string(m.world_size) +
                                         "), found " + std::to_string(m.ranks));
  }
  if (!errors.empty()) return errors.status();
  return m;
}

Result<MeasurementSet> LoadMeasurements(const std::string& path) {
  auto json = ParseJsonFile(path);
  if (!json.ok()) return json.status();
  return ParseMeasurements(json.value(), path);
}

std::string MeasurementSet::gpu_name() const {
  const std::string mark = "): ";
  for (const std::string& fact : devices) {
    const size_t at = fact.find(mark);
    if (fact.rfind("GPU ", 0) != 0 || at == std::string::npos) continue;
    const size_t begin = at + mark.size();
    return fact.substr(begin, fact.find(',', begin) - begin);
  }
  return "";
}

int MeasurementSet::ranks_per_gpu() const {
  const std::string mark = "ranks per GPU: ";
  for (const std::string& fact : devices) {
    if (fact.rfind(mark, 0) == 0) return std::atoi(fact.c_str() + mark.size());
  }
  return 1;
}

}  // namespace foldplan
