// Bad inputs: every error names the file, the JSON pointer, what was
// expected and what was found. File fixtures in tests/data/inputs/ cover
// each kind of error once; in-memory edits of shipped files cover each
// cross-field rule.
#include <doctest/doctest.h>

#include <string>

#include "core/json_check.h"
#include "inputs/loader.h"

using namespace foldplan;
using nlohmann::json;

namespace {

const std::string kFixtures = std::string(FOLDPLAN_TEST_DATA_DIR) + "/inputs/";

template <class Spec>
std::string ErrorOf(const Result<Spec>& result) {
  REQUIRE_FALSE(result.ok());
  return result.status().message();
}

json Shipped(const char* kind_dir, const char* name) {
  auto j = ParseJsonFile(std::string(FOLDPLAN_SOURCE_DIR) + "/data/" + kind_dir + "/" + name +
                         ".json");
  REQUIRE(j.ok());
  return j.value();
}

// The error of a shipped file after one edit; the file is named "edited.json".
std::string ClusterError(void (*edit)(json&)) {
  json j = Shipped("clusters", "h100-dgx-16n");
  edit(j);
  return ErrorOf(ParseCluster(j, "edited.json"));
}
std::string ModelError(const char* name, void (*edit)(json&)) {
  json j = Shipped("models", name);
  edit(j);
  return ErrorOf(ParseModel(j, "edited.json"));
}
std::string JobError(void (*edit)(json&)) {
  json j = Shipped("jobs", "default");
  edit(j);
  return ErrorOf(ParseJob(j, "edited.json"));
}

}  // namespace

TEST_CASE("wrong type: file, pointer, expected, found") {
  const std::string file = kFixtures + "cluster_wrong_type.json";
  CHECK(ErrorOf(LoadCluster(file)) ==
        file + ": /nodes: expected an integer in [1, 1048576], found the string \"16\"");
}

TEST_CASE("missing field") {
  const std::string file = kFixtures + "cluster_missing_field.json";
  CHECK(ErrorOf(LoadCluster(file)) ==
        file + ": /gpus_per_node: missing; expected an integer in [1, 1024]");
}

TEST_CASE("out of range") {
  const std::string file = kFixtures + "model_out_of_range.json";
  CHECK(ErrorOf(LoadModel(file)) == file + ": /layers: expected an integer in [1, 4096], found 0");
}

TEST_CASE("unknown field") {
  const std::string file = kFixtures + "model_unknown_field.json";
  CHECK(ErrorOf(LoadModel(file)) == file + ": /tied_embedding: unknown field");
}

TEST_CASE("bad enum value") {
  const std::string file = kFixtures + "job_bad_enum.json";
  CHECK(ErrorOf(LoadJob(file)) ==
        file + ": /precision: expected one of bf16, fp8-delayed, fp8-tensorwise (alias fp8), fp8-blockwise, mxfp8 "
               "(not a precision recipe), found the string \"fp16\"");
}

TEST_CASE("not JSON: file:line:column") {
  const std::string file = kFixtures + "model_not_json.json";
  const std::string error = ErrorOf(LoadModel(file));
  CHECK(error.rfind(file + ":4:1: not valid JSON: syntax error", 0) == 0);
}

TEST_CASE("not an object") {
  const std::string file = kFixtures + "job_not_an_object.json";
  CHECK(ErrorOf(LoadJob(file)) == file + ": /: expected an object, found an array [1,2,3]");
}

TEST_CASE("cross-field rule in a fixture") {
  const std::string file = kFixtures + "cluster_cross_field.json";
  CHECK(ErrorOf(LoadCluster(file)) ==
        file + ": /nvlink/domain_gpus: expected a multiple of gpus_per_node (8), found 12");
  const std::string model = kFixtures + "model_cross_field.json";
  CHECK(ErrorOf(LoadModel(model)) == model + ": /kv_heads: expected a divisor of heads (32), found 5");
}

TEST_CASE("every error of a file is reported, one per line") {
  const std::string file = kFixtures + "model_many_errors.json";
  CHECK(ErrorOf(LoadModel(file)) ==
        file + ": /hidden: expected an integer in [1, 262144], found -1\n" +
        file + ": /activation: expected one of \"swiglu\", \"gelu\", found the string \"relu\"\n" +
        file + ": /moe/top_k: expected an integer in [1, 65536], found the string \"2\"");
}

TEST_CASE("job orders: unknown and repeated tokens") {
  const std::string file = kFixtures + "job_bad_order.json";
  CHECK(ErrorOf(LoadJob(file)) ==
        file + ": /orders/1: expected '-'-joined distinct tokens from tp, cp, ep, dp, pp, found "
               "the string \"tp-xp-pp\" (token \"xp\" is not one of tp, cp, ep, dp, pp)\n" +
        file + ": /orders/2: expected '-'-joined distinct tokens from tp, cp, ep, dp, pp, found "
               "the string \"tp-pp-tp\" (token \"tp\" is repeated)");
}

TEST_CASE("missing schema; a missing or mistyped object is one error, not one per field") {
  CHECK(ClusterError([](json& j) { j.erase("schema"); }) ==
        "edited.json: /schema: missing; expected one of \"foldplan.cluster/v1\"");
  CHECK(ClusterError([](json& j) { j["nvlink"] = 8; }) ==
        "edited.json: /nvlink: expected an object, found 8");
  CHECK(ClusterError([](json& j) { j.erase("gpu"); }) ==
        "edited.json: /gpu: missing; expected an object");
  CHECK(ClusterError([](json& j) { j["latency_us"] = "fast"; }) ==
        "edited.json: /latency_us: expected an object, found the string \"fast\"");
  CHECK(ClusterError([](json& j) { j["network"]["nic_gbps"] = 400; }) ==
        "edited.json: /network/nic_gbps: unknown field");
}

TEST_CASE("cluster cross-field rules") {
  CHECK(ClusterError([](json& j) { j["nvlink"]["domain_gpus"] = 48; }) ==
        "edited.json: /nvlink/domain_gpus: expected a divisor of the cluster's 128 GPUs "
        "(nodes x gpus_per_node), found 48");
  CHECK(ClusterError([](json& j) { j["network"]["nics_per_node"] = 3; }) ==
        "edited.json: /network/nics_per_node: expected a divisor of gpus_per_node (8), found 3");
  CHECK(ClusterError([](json& j) {
          j["nodes"] = 1048576;
          j["gpus_per_node"] = 1024;
          j["nvlink"]["domain_gpus"] = 1024;
        }) == "edited.json: /nodes: expected nodes x gpus_per_node <= 1048576, found "
              "1073741824 GPUs");
}

TEST_CASE("model attention rules") {
  CHECK(ModelError("olmoe-1b-7b", [](json& j) { j["kv_heads"] = 8; }) ==
        "edited.json: /kv_heads: expected kv_heads == heads (16) for attention \"mha\", found 8");
  CHECK(ModelError("mixtral-8x7b", [](json& j) { j["kv_heads"] = 64; }) ==
        "edited.json: /kv_heads: expected a divisor of heads (32), found 64");
  CHECK(ModelError("deepseek-v3", [](json& j) { j["head_dim"] = 128; }) ==
        "edited.json: /head_dim: expected mla.qk_nope_head_dim + mla.qk_rope_head_dim (192) for "
        "attention \"mla\", found 128");
  CHECK(ModelError("deepseek-v3", [](json& j) { j["kv_heads"] = 1; }) ==
        "edited.json: /kv_heads: expected kv_heads == heads (128) for attention \"mla\", found 1");
  CHECK(ModelError("deepseek-v3", [](json& j) { j.erase("mla"); }) ==
        "edited.json: /mla: missing; expected an object");
  CHECK(ModelError("mixtral-8x7b", [](json& j) { j["mla"] = json::object(); }) ==
        "edited.json: /mla: expected no \"mla\" object unless attention is \"mla\", found one "
        "with attention \"gqa\"");
}

TEST_CASE("model MoE rules") {
  CHECK(ModelError("mixtral-8x7b", [](json& j) { j["moe"]["top_k"] = 9; }) ==
        "edited.json: /moe/top_k: expected at most moe.experts (8), found 9");
  CHECK(ModelError("mixtral-8x7b", [](json& j) { j["moe"]["first_k_dense"] = 32; }) ==
        "edited.json: /moe/first_k_dense: expected fewer than layers (32) so that some layer is "
        "MoE, found 32");
  CHECK(ModelError("mixtral-8x7b", [](json& j) { j["moe"]["shared_experts"] = 1; }) ==
        "edited.json: /moe/shared_ffn_hidden: expected a width >= 1 exactly when "
        "moe.shared_experts > 0 (shared_experts 1), found 0");
  CHECK(ModelError("mixtral-8x7b", [](json& j) { j["moe"]["shared_expert_gate"] = true; }) ==
        "edited.json: /moe/shared_expert_gate: expected false when moe.shared_experts is 0, "
        "found true");
}

TEST_CASE("model dense width and position rules") {
  CHECK(ModelError("mixtral-8x7b", [](json& j) { j["ffn_hidden"] = 14336; }) ==
        "edited.json: /ffn_hidden: expected 0 (or no field) because every layer is MoE and the "
        "value would be unused, found 14336");
  CHECK(ModelError("deepseek-v3", [](json& j) { j.erase("ffn_hidden"); }) ==
        "edited.json: /ffn_hidden: expected a width >= 1 because 3 layer(s) use the dense MLP, "
        "found 0 (or missing)");
  CHECK(ModelError("llama3-70b", [](json& j) { j["ffn_hidden"] = 0; }) ==
        "edited.json: /ffn_hidden: expected a width >= 1 because 80 layer(s) use the dense MLP, "
        "found 0 (or missing)");
  CHECK(ModelError("gpt3-175b", [](json& j) { j.erase("max_positions"); }) ==
        "edited.json: /max_positions: missing; expected an integer >= 1 (rows of the position "
        "table) because learned_positions is true");
  CHECK(ModelError("llama3-70b", [](json& j) { j["max_positions"] = 8192; }) ==
        "edited.json: /max_positions: expected no field unless learned_positions is true, found "
        "8192");
}

TEST_CASE("model size limit catches dimensions that would overflow a count") {
  const std::string error = ModelError("mixtral-8x7b", [](json& j) {
    j["layers"] = 4096;
    j["hidden"] = 262144;
    j["moe"]["experts"] = 65536;
    j["moe"]["ffn_hidden"] = 4194304;
  });
  CHECK(error.rfind("edited.json: /: expected a model of at most 1e15 parameters, found ", 0) == 0);
}

TEST_CASE("job rules") {
  CHECK(JobError([](json& j) { j["micro_batch_sizes"] = {1, 2048}; }) ==
        "edited.json: /micro_batch_sizes/1: expected at most global_batch (1024), found 2048");
  CHECK(JobError([](json& j) { j["vpp"] = {1, 2, 1}; }) ==
        "edited.json: /vpp/2: expected no repeated values, found 1 again");
  CHECK(JobError([](json& j) { j["recompute"] = {"full", "full"}; }) ==
        "edited.json: /recompute/1: expected no repeated values, found \"full\" again");
  CHECK(JobError([](json& j) { j["orders"] = {"tp-pp", "tp-pp"}; }) ==
        "edited.json: /orders/1: expected no repeated values, found \"tp-pp\" again");
  CHECK(JobError([](json& j) { j["orders"] = json::array(); }) ==
        "edited.json: /orders: expected a non-empty list of order strings such as "
        "\"tp-cp-ep-dp-pp\", found an array []");
  CHECK(JobError([](json& j) { j["orders"] = {"tp-pp-", 3}; }) ==
        "edited.json: /orders/0: expected '-'-joined distinct tokens from tp, cp, ep, dp, pp, "
        "found the string \"tp-pp-\" (it has an empty token)\n"
        "edited.json: /orders/1: expected an order string such as \"tp-cp-ep-dp-pp\", found 3");
  CHECK(JobError([](json& j) { j["routing_imbalance"] = 0.9; }) ==
        "edited.json: /routing_imbalance: expected a number in [1, 65536], found 0.9");
  CHECK(JobError([](json& j) { j["cp_styles"] = {"ulysses", "zigzag"}; }) ==
        "edited.json: /cp_styles/1: expected one of \"ulysses\", \"ring\", found the string "
        "\"zigzag\"");
}

TEST_CASE("job recipe candidates: one value or a list, module sets, aliases") {
  json j = Shipped("jobs", "default");
  j["precision"] = {"bf16", "fp8", "mxfp8"};
  j["recompute"] = {"none", "layernorm+moe_act", "moe"};
  j["dispatcher"] = "flex";
  j["a2a_overlap"] = {false, true};
  j["fsdp"] = true;
  j["mtp_layers"] = 0;
  auto job = ParseJob(j, "edited.json");
  REQUIRE_MESSAGE(job.ok(), job.status().message());
  CHECK(job->precisions == std::vector<Precision>{Precision::kBF16, Precision::kFP8Tensorwise, Precision::kMXFP8});
  CHECK(job->recompute.size() == 3);
  CHECK(Name(job->recompute[1]) == "moe_act+layernorm");
  CHECK(job->recompute[2].has(RecomputeModule::kMoe));
  CHECK(job->dispatchers == std::vector<Dispatcher>{Dispatcher::kDeepEP});
  CHECK(job->a2a_overlap == std::vector<bool>{false, true});
  CHECK(job->fsdp == std::vector<bool>{true});
  CHECK(job->mtp_layers == 0);
}

TEST_CASE("job cuda_graphs: one scope or a list of them, Megatron's module rules by pointer") {
  json j = Shipped("jobs", "default");
  j["cuda_graphs"] = {"none", "moe_router+attn", "full_iteration"};
  auto job = ParseJob(j, "edited.json");
  REQUIRE_MESSAGE(job.ok(), job.status().message());
  REQUIRE(job->cuda_graphs.size() == 3);
  CHECK(Name(job->cuda_graphs[1]) == "attn+moe_router");
  CHECK(job->cuda_graphs[2] == CudaGraphs::FullIteration());
  CHECK(JobError([](json& j) { j["cuda_graphs"] = {"none", "moe_preprocess"}; }) ==
        "edited.json: /cuda_graphs/1: expected none, layer, full_iteration or '+'-joined Megatron CUDA graph "
        "modules, found the string \"moe_preprocess\" (moe_preprocess is captured only with moe_router "
        "(Megatron's rule))");
  CHECK(JobError([](json& j) { j["cuda_graphs"] = {"layer", "layer"}; }) ==
        "edited.json: /cuda_graphs/1: expected no repeated values, found \"layer\" again");
}

TEST_CASE("a cluster's host costs: defaults measured, each field in range and named") {
  json j = Shipped("clusters", "h100-dgx-16n");
  j["host"] = {{"cpu", "Grace"}, {"eager_op_us", 12.5}};
  auto c = ParseCluster(j, "edited.json");
  REQUIRE_MESSAGE(c.ok(), c.status().message());
  CHECK(c->host.cpu == "Grace");
  CHECK(c->host.eager_op_us == 12.5);
  CHECK(c->host.sync_us == HostSpec{}.sync_us);  // left out: the measured default
  CHECK(ClusterError([](json& j) { j["host"] = {{"launch_us", -1}}; }) ==
        "edited.json: /host/launch_us: expected a number in [0, 1e+06], found -1");
  CHECK(ClusterError([](json& j) { j["host"] = {{"launches_us", 4}}; }) == "edited.json: /host/launches_us: unknown field");
}

TEST_CASE("bad job recipe fields name the field") {
  CHECK(JobError([](json& j) { j["recompute"] = {"none", "layernorm+attn"}; }) ==
        "edited.json: /recompute/1: expected none, selective, full or '+'-joined Megatron recompute modules, "
        "found the string \"layernorm+attn\" (unknown module \"attn\"; expected none, selective, full, or "
        "'+'-joined modules from core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts)");
  CHECK(JobError([](json& j) { j["dispatcher"] = "nccl"; }) ==
        "edited.json: /dispatcher: expected one of alltoall, allgather, deepep (alias flex), hybridep "
        "(not a dispatcher), found the string \"nccl\"");
  CHECK(JobError([](json& j) { j["attention_backend"] = "flash"; }) ==
        "edited.json: /attention_backend: expected one of \"te-cudnn\", \"flash2\", \"flash3\", found the "
        "string \"flash\"");
  CHECK(JobError([](json& j) { j["attention_backend"] = {"flash2"}; }) ==
        "edited.json: /attention_backend: expected one of \"te-cudnn\", \"flash2\", \"flash3\", found an array "
        "[\"flash2\"]");
  CHECK(JobError([](json& j) { j["a2a_overlap"] = {true, "yes"}; }) ==
        "edited.json: /a2a_overlap/1: expected a boolean, found the string \"yes\"");
  CHECK(JobError([](json& j) { j["fsdp"] = {true, true}; }) ==
        "edited.json: /fsdp/1: expected no repeated values, found true again");
  CHECK(JobError([](json& j) { j["deepep_sms"] = 0; }) ==
        "edited.json: /deepep_sms: expected an integer in [1, 1024], found 0");
  CHECK(JobError([](json& j) { j["precision"] = {"bf16", "fp8-tensorwise", "fp8"}; }) ==
        "edited.json: /precision/2: expected no repeated values, found \"fp8-tensorwise\" again");
}

TEST_CASE("job pipeline_schedules: names and aliases, each once") {
  json j = Shipped("jobs", "default");
  j["pipeline_schedules"] = {"1f1b", "zb", "dualpipev", "interleaved"};
  auto job = ParseJob(j, "edited.json");
  REQUIRE_MESSAGE(job.ok(), job.status().message());
  CHECK(job->pipeline_schedules ==
        std::vector<PipelineSchedule>{PipelineSchedule::k1F1B, PipelineSchedule::kZeroBubbleH1,
                                      PipelineSchedule::kDualPipeV, PipelineSchedule::kInterleaved1F1B});
}

TEST_CASE("bad job pipeline_schedules name the JSON pointer and the accepted names") {
  CHECK(JobError([](json& j) { j["pipeline_schedules"] = {"1f1b", "dualpipe"}; }) ==
        "edited.json: /pipeline_schedules/1: expected one of 1f1b, interleaved-1f1b (alias interleaved), gpipe, "
        "zb-h1 (alias zb), dualpipev, found the string \"dualpipe\" (not a pipeline schedule)");
  CHECK(JobError([](json& j) { j["pipeline_schedules"] = {"zb-h1", "zb"}; }) ==
        "edited.json: /pipeline_schedules/1: expected no repeated values, found \"zb-h1\" again");
  CHECK(JobError([](json& j) { j["pipeline_schedules"] = "1f1b"; }) ==
        "edited.json: /pipeline_schedules: expected a non-empty list of pipeline schedules, found the string "
        "\"1f1b\"");
  CHECK(JobError([](json& j) { j["pipeline_schedules"] = json::array(); }) ==
        "edited.json: /pipeline_schedules: expected a non-empty list of pipeline schedules, found an array []");
  CHECK(JobError([](json& j) { j["pipeline_schedules"] = {1}; }) ==
        "edited.json: /pipeline_schedules/0: expected pipeline schedules, found 1");
}

TEST_CASE("job fields left out take the documented defaults") {
  auto j = ParseJob(json{{"schema", "foldplan.job/v1"}, {"seq_len", 8192}, {"global_batch", 64}},
                    "minimal.json");
  REQUIRE_MESSAGE(j.ok(), j.status().message());
  const JobSpec defaults;
  CHECK(j->name == "minimal");
  CHECK(j->seq_len == 8192);
  CHECK(j->global_batch == 64);
  CHECK(j->micro_batch_sizes == defaults.micro_batch_sizes);
  CHECK(j->recompute == defaults.recompute);
  CHECK(j->cp_styles == defaults.cp_styles);
  CHECK(j->vpp == defaults.vpp);
  CHECK(j->orders == defaults.orders);
  CHECK(j->pipeline_schedules.empty());  // each layout's implied schedule
  CHECK(j->routing_imbalance == defaults.routing_imbalance);
  CHECK(j->distributed_optimizer == defaults.distributed_optimizer);
}

TEST_CASE("a relative calibration path is taken relative to the cluster file") {
  json j = Shipped("clusters", "h100-dgx-16n");
  j["calibration"] = "calibration/h100.json";
  auto c = ParseCluster(j, "some/dir/cluster.json");
  REQUIRE(c.ok());
  CHECK(c->calibration == "some/dir/calibration/h100.json");
  j["calibration"] = "/abs/cal.json";
  CHECK(ParseCluster(j, "some/dir/cluster.json")->calibration == "/abs/cal.json");
}

TEST_CASE("a job's capacity factor below 1 (other than 0, dropless) is refused") {
  CHECK(JobError([](json& j) { j["capacity_factor"] = 0.001; }) ==
        "edited.json: /capacity_factor: expected 0 (dropless) or a number in [1, 1024], found 0.001");
  CHECK(JobError([](json& j) { j["capacity_factor"] = 1e-320; }).find("/capacity_factor: expected 0 (dropless)") !=
        std::string::npos);
}
