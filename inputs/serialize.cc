#include "inputs/serialize.h"

#include "inputs/loader.h"

namespace foldplan {

using nlohmann::json;

json ToJson(const ClusterSpec& c) {
  json out = {
      {"schema", kClusterSchema},
      {"description", c.description},
      {"gpu",
       {{"name", c.gpu.name},
        {"peak_bf16_tflops", c.gpu.peak_bf16_flops / 1e12},
        {"peak_fp8_tflops", c.gpu.peak_fp8_flops / 1e12},
        {"hbm_gib", c.gpu.hbm_gib},
        {"hbm_tb_per_s", c.gpu.hbm_tb_per_s},
        {"architecture", Name(c.gpu.architecture)},
        {"sms", c.gpu.sms}}},
      {"nodes", c.nodes},
      {"gpus_per_node", c.gpus_per_node},
      {"nvlink", {{"domain_gpus", c.nvlink_domain_gpus}, {"gb_per_s_per_direction", c.nvlink_gb_per_s}}},
      {"network",
       {{"nics_per_node", c.nics_per_node},
        {"nic_gbit_per_s", c.nic_gbit_per_s},
        {"scalable_unit_nodes", c.fabric.su_nodes},
        {"spine_oversubscription", c.fabric.spine_oversubscription}}},
      {"latency_us",
       {{"nvlink_hop", c.latency.nvlink_us},
        {"network_hop", c.latency.network_us},
        {"spine_hop", c.latency.spine_us}}},
      {"host",
       {{"cpu", c.host.cpu},
        {"eager_op_us", c.host.eager_op_us},
        {"module_call_us", c.host.module_call_us},
        {"backward_kernel_us", c.host.backward_kernel_us},
        {"launch_us", c.host.launch_us},
        {"collective_us", c.host.collective_us},
        {"alltoallv_us", c.host.alltoallv_us},
        {"graph_replay_us", c.host.graph_replay_us},
        {"sync_us", c.host.sync_us}}},
  };
  if (!c.calibration.empty()) out["calibration"] = c.calibration;
  return out;
}

json ToJson(const ModelSpec& m) {
  const char* attention = m.attention == AttentionKind::kMHA   ? "mha"
                          : m.attention == AttentionKind::kMLA ? "mla"
                                                               : "gqa";
  json out = {
      {"schema", kModelSchema},
      {"description", m.description},
      {"layers", m.layers},
      {"hidden", m.hidden},
      {"heads", m.heads},
      {"kv_heads", m.kv_heads},
      {"head_dim", m.head_dim},
      {"vocab", m.vocab},
      {"ffn_hidden", m.ffn_hidden},
      {"activation", m.activation == Activation::kSwiGLU ? "swiglu" : "gelu"},
      {"attention", attention},
      {"qkv_bias", m.qkv_bias},
      {"qk_norm", m.qk_norm},
      {"tied_embeddings", m.tied_embeddings},
      {"learned_positions", m.learned_positions},
      {"max_positions", m.max_positions},
      {"mtp_layers", m.mtp_layers},
  };
  if (m.mla) {
    out["mla"] = {{"q_lora_rank", m.mla->q_lora_rank},
                  {"kv_lora_rank", m.mla->kv_lora_rank},
                  {"qk_nope_head_dim", m.mla->qk_nope_head_dim},
                  {"qk_rope_head_dim", m.mla->qk_rope_head_dim},
                  {"v_head_dim", m.mla->v_head_dim}};
  }
  if (m.moe) {
    out["moe"] = {{"experts", m.moe->experts},
                  {"top_k", m.moe->top_k},
                  {"ffn_hidden", m.moe->ffn_hidden},
                  {"shared_experts", m.moe->shared_experts},
                  {"shared_ffn_hidden", m.moe->shared_ffn_hidden},
                  {"shared_expert_gate", m.moe->shared_expert_gate},
                  {"first_k_dense", m.moe->first_k_dense},
                  {"layer_freq", m.moe->layer_freq}};
  }
  if (!m.learned_positions) out.erase("max_positions");
  return out;
}

namespace {

// A candidate list as its one value when it has one, else as a list.
template <class T, class F>
json OneOrList(const std::vector<T>& values, F to_json) {
  json list = json::array();
  for (const T& v : values) list.push_back(to_json(v));
  return list.size() == 1 ? list[0] : list;
}

}  // namespace

json ToJson(const JobSpec& j) {
  json recompute = json::array(), styles = json::array();
  for (Recompute r : j.recompute) recompute.push_back(Name(r));
  for (CpStyle s : j.cp_styles) styles.push_back(Name(s));
  auto name = [](auto v) { return json(Name(v)); };
  auto flag = [](bool v) { return json(v); };
  json out = {
      {"schema", kJobSchema},
      {"description", j.description},
      {"seq_len", j.seq_len},
      {"global_batch", j.global_batch},
      {"micro_batch_sizes", j.micro_batch_sizes},
      {"precision", OneOrList(j.precisions, name)},
      {"recompute", recompute},
      {"cp_styles", styles},
      {"vpp", j.vpp},
      {"orders", j.orders},
      {"dispatcher", OneOrList(j.dispatchers, name)},
      {"a2a_overlap", OneOrList(j.a2a_overlap, flag)},
      {"deepep_sms", j.deepep_sms},
      {"hybridep_sms", j.hybridep_sms},
      {"moe_permute_fusion", j.moe_permute_fusion},
      {"moe_router_fusion", j.moe_router_fusion},
      {"capacity_factor", j.capacity_factor},
      {"routing_imbalance", j.routing_imbalance},
      {"distributed_optimizer", j.distributed_optimizer},
      {"fsdp", OneOrList(j.fsdp, flag)},
      {"tp_overlap", OneOrList(j.tp_overlap, flag)},
      {"cuda_graphs", OneOrList(j.cuda_graphs, [](CudaGraphs g) { return json(Name(g)); })},
      {"ulysses_kv_replication", j.ulysses_kv_replication},
      {"attention_backend", Name(j.attention_backend)},
      {"trainer", Name(j.trainer)},
      {"world_size", j.world_size},
      {"gpus_per_domain", j.gpus_per_domain},
  };
  if (j.mtp_layers) out["mtp_layers"] = *j.mtp_layers;
  // Absent when empty (each layout's implied schedule), as a file that names none.
  if (!j.pipeline_schedules.empty()) {
    json schedules = json::array();
    for (PipelineSchedule s : j.pipeline_schedules) schedules.push_back(Name(s));
    out["pipeline_schedules"] = schedules;
  }
  return out;
}

}  // namespace foldplan
