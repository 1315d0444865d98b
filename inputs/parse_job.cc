// Reading a `foldplan.job/v1` file (doc/formats.md#job).
#include <cstdint>
#include <string>

#include "core/order_string.h"
#include "inputs/loader.h"
#include "inputs/parse_common.h"

namespace foldplan {
namespace {

using inputs_internal::DescribeString;
using inputs_internal::IntField;
using inputs_internal::IntListField;
using nlohmann::json;

constexpr int kMaxSms = 1024;        // streaming multiprocessors of one GPU (H100 132, B200 148)

template <class E>
std::vector<std::string> Names(const std::vector<E>& values) {
  std::vector<std::string> out;
  for (const E& v : values) out.push_back(Name(v));
  return out;
}

CpStyle ParseCpStyle(const std::string& s) { return s == "ring" ? CpStyle::kRing : CpStyle::kUlysses; }

// A list of names (or, with `single`, one name) each turned into a value by
// `parse`, whose error (or "" for none) the message quotes.
template <class T, class Parse>
std::vector<T> ReadNamed(CheckedObject& root, const std::string& key, const std::string& what,
                         const std::string& choices, bool single, std::vector<T> default_value,
                         Parse parse) {
  CheckedObject::StringListRules rules;
  rules.list_expected = std::string(single ? "a string or " : "") + "a non-empty list of " + what;
  rules.item_expected = what;
  rules.valid_expected = choices;
  rules.single_allowed = single;
  rules.problem = [&](const std::string& text) { return parse(text).second; };
  std::vector<std::string> defaults;
  for (const T& v : default_value) defaults.push_back(Name(v));
  std::vector<T> out;
  for (const std::string& text : root.StringList(key, rules, defaults)) {
    auto [value, problem] = parse(text);
    if (problem.empty()) out.push_back(*value);
  }
  return out;
}

std::pair<std::optional<Precision>, std::string> PrecisionOf(const std::string& text) {
  const auto p = ParsePrecision(text);
  return {p, p ? "" : "not a precision recipe"};
}
std::pair<std::optional<Dispatcher>, std::string> DispatcherOf(const std::string& text) {
  const auto d = ParseDispatcher(text);
  return {d, d ? "" : "not a dispatcher"};
}
std::pair<std::optional<CudaGraphs>, std::string> CudaGraphsOf(const std::string& text) {
  Result<CudaGraphs> g = ParseCudaGraphs(text);
  if (!g.ok()) return {std::nullopt, g.status().message()};
  return {g.value(), ""};
}
std::pair<std::optional<PipelineSchedule>, std::string> PipelineScheduleOf(const std::string& text) {
  const auto s = PipelineScheduleNamed(text);
  return {s, s ? "" : "not a pipeline schedule"};
}
std::pair<std::optional<Recompute>, std::string> RecomputeOf(const std::string& text) {
  Result<Recompute> r = ParseRecompute(text);
  if (!r.ok()) return {std::nullopt, r.status().message()};
  return {r.value(), ""};
}

// An order string's problem, or "" when it is valid: '-'-joined tokens from
// tp, cp, ep, dp, pp, none repeated. Which axes may be left out depends on
// the layout, so the planner checks that.
std::string OrderProblem(const std::string& order) {
  const OrderString parsed = ParseOrderString(order);
  const std::string token(parsed.token);
  switch (parsed.problem) {
    case OrderString::Problem::kNone: return "";
    case OrderString::Problem::kEmptyToken: return "it has an empty token";
    case OrderString::Problem::kUnknownAxis:
      return "token \"" + token + "\" is not one of tp, cp, ep, dp, pp";
    case OrderString::Problem::kRepeatedAxis: return "token \"" + token + "\" is repeated";
  }
  return "";
}

std::vector<std::string> ReadOrders(CheckedObject& root, std::vector<std::string> default_value) {
  const CheckedObject::StringListRules rules{
      "a non-empty list of order strings such as \"tp-cp-ep-dp-pp\"",
      "an order string such as \"tp-cp-ep-dp-pp\"",
      "'-'-joined distinct tokens from tp, cp, ep, dp, pp", OrderProblem};
  return root.StringList("orders", rules, std::move(default_value));
}

void ReadBatch(CheckedObject& root, JobSpec& j) {
  j.seq_len = IntField(root, "seq_len", 1, kMaxSeqLen);
  j.global_batch = IntField(root, "global_batch", 1, kMaxGlobalBatch);
  j.micro_batch_sizes = IntListField(root, "micro_batch_sizes", 1, kMaxMicroBatch, j.micro_batch_sizes);
  j.world_size = IntField(root, "world_size", 0, kMaxWorldSize, j.world_size);
  j.gpus_per_domain = IntField(root, "gpus_per_domain", 0, kMaxWorldSize, j.gpus_per_domain);
  if (root.Has("mtp_layers")) j.mtp_layers = IntField(root, "mtp_layers", 0, kMaxMtpLayers);
}

void ReadChoices(CheckedObject& root, JobSpec& j) {
  j.precisions = ReadNamed(root, "precision", "precision recipes", std::string("one of ") + PrecisionChoices(),
                           true, j.precisions, PrecisionOf);
  j.recompute = ReadNamed(root, "recompute", "recompute options",
                          "none, selective, full or '+'-joined Megatron recompute modules", false,
                          j.recompute, RecomputeOf);
  const auto cp = root.EnumList("cp_styles", {"ulysses", "ring"}, Names(j.cp_styles));
  j.cp_styles.clear();
  for (const auto& s : cp) j.cp_styles.push_back(ParseCpStyle(s));
  j.vpp = IntListField(root, "vpp", 1, kMaxVpp, j.vpp);
  j.pipeline_schedules = ReadNamed(root, "pipeline_schedules", "pipeline schedules",
                                   "one of " + PipelineScheduleChoices(), false, j.pipeline_schedules,
                                   PipelineScheduleOf);
}

void ReadMoeOptions(CheckedObject& root, JobSpec& j) {
  // No "dispatcher": the cluster's (JobForCluster), decided where the job
  // meets a cluster.
  j.dispatchers_named = root.Has("dispatcher");
  j.dispatchers = ReadNamed(root, "dispatcher", "dispatchers", std::string("one of ") + DispatcherChoices(), true,
                            j.dispatchers, DispatcherOf);
  j.a2a_overlap = root.BoolList("a2a_overlap", j.a2a_overlap);
  j.deepep_sms = IntField(root, "deepep_sms", 1, kMaxSms, j.deepep_sms);
  j.hybridep_sms = IntField(root, "hybridep_sms", 1, kMaxSms, j.hybridep_sms);
  j.moe_permute_fusion = root.Bool("moe_permute_fusion", j.moe_permute_fusion);
  j.moe_router_fusion = root.Bool("moe_router_fusion", j.moe_router_fusion);
  j.capacity_factor = root.Number("capacity_factor", 0, kMaxCapacityFactor, j.capacity_factor);
  if (!CapacityFactorValid(j.capacity_factor)) {
    root.errors()->Add(root.Pointer("capacity_factor"), std::string("expected ") + kCapacityFactorExpected +
                                                              ", found " + DescribeJsonValue(root.Raw("capacity_factor")));
  }
  j.routing_imbalance = root.Number("routing_imbalance", 1, kMaxRoutingImbalance, j.routing_imbalance);
  j.distributed_optimizer = root.Bool("distributed_optimizer", j.distributed_optimizer);
  j.fsdp = root.BoolList("fsdp", j.fsdp);
  j.tp_overlap = root.BoolList("tp_overlap", j.tp_overlap);
  j.cuda_graphs = ReadNamed(root, "cuda_graphs", "CUDA graph scopes",
                            "none, layer, full_iteration or '+'-joined Megatron CUDA graph modules", true,
                            j.cuda_graphs, CudaGraphsOf);
  j.ulysses_kv_replication = root.Bool("ulysses_kv_replication", j.ulysses_kv_replication);
}

void ReadAttention(CheckedObject& root, JobSpec& j) {
  const std::string name =
      root.Enum("attention_backend", {"te-cudnn", "flash2", "flash3"}, Name(j.attention_backend));
  if (const auto b = ParseAttentionBackend(name)) j.attention_backend = *b;
  const std::string trainer =
      root.Enum("trainer", {"megatron", "torchtitan", "olmo-core", "maxtext", "jax"}, Name(j.trainer));
  if (const auto t = ParseTrainer(trainer)) j.trainer = *t;
}

// Rules between fields; run only when every field is valid on its own (so
// list indices match the file's).
void CheckJobRules(const JobSpec& j, JsonErrors& errors) {
  // A repeated candidate would be enumerated twice.
  for (const RepeatedCandidate& r : RepeatedCandidates(j)) {
    errors.Add("/" + r.field + "/" + std::to_string(r.index),
               "expected no repeated values, found " + (r.is_name ? DescribeString(r.value) : r.value) + " again");
  }
  for (size_t i = 0; i < j.micro_batch_sizes.size(); ++i) {
    if (j.micro_batch_sizes[i] > j.global_batch) {
      errors.Add("/micro_batch_sizes/" + std::to_string(i),
                 "expected at most global_batch (" + std::to_string(j.global_batch) +
                     "), found " + std::to_string(j.micro_batch_sizes[i]));
    }
  }
}

}  // namespace

Result<JobSpec> ParseJob(const json& input, const std::string& file) {
  JsonErrors errors(file);
  CheckedObject root(input, "", &errors);
  if (!inputs_internal::CheckSchema(root, kJobSchema)) return errors.status();

  JobSpec j;
  j.name = inputs_internal::StemOf(file);
  j.source = file;
  j.description = root.String("description", "");
  ReadBatch(root, j);
  ReadChoices(root, j);
  j.orders = ReadOrders(root, j.orders);
  ReadMoeOptions(root, j);
  ReadAttention(root, j);
  root.Finish();

  if (errors.empty()) CheckJobRules(j, errors);
  if (!errors.empty()) return errors.status();
  return j;
}

}  // namespace foldplan
