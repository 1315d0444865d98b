// Reading a `foldplan.job/v1` file (doc/formats.md#job).
#include <cstdint>
#include <string>

#include "core/order_string.h"
#include "inputs/loader.h"
#include "inputs/parse_common.h"

namespace foldplan {
namespace {

using inputs_internal::IntField;
using inputs_internal::IntListField;
using nlohmann::json;

constexpr int kMaxTokens = 1 << 24;  // seq_len, global_batch, world_size

std::string DescribeInt(const int& v) { return std::to_string(v); }
std::string DescribeString(const std::string& v) { return "\"" + v + "\""; }

Precision ParsePrecision(const std::string& s) {
  return s == "fp8" ? Precision::kFP8 : Precision::kBF16;
}

Recompute ParseRecompute(const std::string& s) {
  if (s == "selective") return Recompute::kSelective;
  return s == "full" ? Recompute::kFull : Recompute::kNone;
}

CpStyle ParseCpStyle(const std::string& s) {
  return s == "ring" ? CpStyle::kRing : CpStyle::kUlysses;
}

Dispatcher ParseDispatcher(const std::string& s) {
  if (s == "allgather") return Dispatcher::kAllGather;
  return s == "flex" ? Dispatcher::kFlex : Dispatcher::kAllToAll;
}

template <class E>
std::vector<std::string> Names(const std::vector<E>& values) {
  std::vector<std::string> out;
  for (E v : values) out.push_back(Name(v));
  return out;
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
  j.seq_len = IntField(root, "seq_len", 1, kMaxTokens);
  j.global_batch = IntField(root, "global_batch", 1, kMaxTokens);
  j.micro_batch_sizes = IntListField(root, "micro_batch_sizes", 1, 1 << 16, j.micro_batch_sizes);
  j.world_size = IntField(root, "world_size", 0, kMaxTokens, j.world_size);
}

void ReadChoices(CheckedObject& root, JobSpec& j) {
  j.precision = ParsePrecision(root.Enum("precision", {"bf16", "fp8"}, Name(j.precision)));
  const auto recompute =
      root.EnumList("recompute", {"none", "selective", "full"}, Names(j.recompute));
  j.recompute.clear();
  for (const auto& s : recompute) j.recompute.push_back(ParseRecompute(s));
  const auto cp = root.EnumList("cp_styles", {"ulysses", "ring"}, Names(j.cp_styles));
  j.cp_styles.clear();
  for (const auto& s : cp) j.cp_styles.push_back(ParseCpStyle(s));
  j.vpp = IntListField(root, "vpp", 1, 1024, j.vpp);
}

void ReadMoeOptions(CheckedObject& root, JobSpec& j) {
  j.dispatcher = ParseDispatcher(
      root.Enum("dispatcher", {"alltoall", "allgather", "flex"}, Name(j.dispatcher)));
  j.capacity_factor = root.Number("capacity_factor", 0, 1024, j.capacity_factor);
  j.routing_imbalance = root.Number("routing_imbalance", 1, 65536, j.routing_imbalance);
  j.distributed_optimizer = root.Bool("distributed_optimizer", j.distributed_optimizer);
  j.ulysses_kv_replication = root.Bool("ulysses_kv_replication", j.ulysses_kv_replication);
}

// Rules between fields; run only when every field is valid on its own (so
// list indices match the file's).
void CheckJobRules(const JobSpec& j, JsonErrors& errors) {
  using inputs_internal::CheckNoRepeats;
  // A repeated candidate would be enumerated twice.
  CheckNoRepeats(j.micro_batch_sizes, "/micro_batch_sizes", &errors, &DescribeInt);
  CheckNoRepeats(Names(j.recompute), "/recompute", &errors, &DescribeString);
  CheckNoRepeats(Names(j.cp_styles), "/cp_styles", &errors, &DescribeString);
  CheckNoRepeats(j.vpp, "/vpp", &errors, &DescribeInt);
  CheckNoRepeats(j.orders, "/orders", &errors, &DescribeString);
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
  root.Finish();

  if (errors.empty()) CheckJobRules(j, errors);
  if (!errors.empty()) return errors.status();
  return j;
}

}  // namespace foldplan
