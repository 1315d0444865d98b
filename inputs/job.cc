#include "inputs/job.h"

#include <array>

#include "inputs/parse_common.h"

namespace foldplan {
namespace {

constexpr std::array<const char*, kRecomputeModuleCount> kModuleNames = {
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"};

constexpr std::array<const char*, kCudaGraphModuleCount> kCudaGraphModuleNames = {
    "attn", "mlp", "moe", "moe_router", "moe_preprocess"};

// A set of Megatron's module names joined with '+', in `names`' order.
template <size_t N>
std::string JoinModules(uint32_t mask, const std::array<const char*, N>& names) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if ((mask >> i) & 1u) out += (out.empty() ? "" : "+") + std::string(names[i]);
  }
  return out;
}

// '+'-joined module names, each once, as a bit set (bit i: names[i]);
// `expected` heads the list of accepted names in the error.
template <size_t N>
Result<uint32_t> ParseModules(std::string_view text, const std::array<const char*, N>& names,
                              const char* expected) {
  uint32_t mask = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t plus = text.find('+', start);
    if (plus == std::string_view::npos) plus = text.size();
    const std::string_view token = text.substr(start, plus - start);
    int found = -1;
    for (size_t i = 0; i < N; ++i) {
      if (token == names[i]) found = static_cast<int>(i);
    }
    if (found < 0) {
      std::string modules;
      for (const char* m : names) modules += (modules.empty() ? "" : ", ") + std::string(m);
      return Status::Error(
          (token.empty() ? std::string("an empty module") : "unknown module \"" + std::string(token) + "\"") +
          "; expected " + expected + ", or '+'-joined modules from " + modules);
    }
    if ((mask >> found) & 1u) return Status::Error("module \"" + std::string(token) + "\" given twice");
    mask |= 1u << found;
    start = plus + 1;
  }
  return mask;
}

std::string NameOf(const int& v) { return std::to_string(v); }
std::string NameOf(const bool& v) { return v ? "true" : "false"; }
std::string NameOf(const std::string& v) { return v; }
template <class E>
std::string NameOf(const E& v) {
  return Name(v);
}

template <class T>
void AddRepeats(const char* field, const std::vector<T>& values, bool is_name, std::vector<RepeatedCandidate>* out) {
  for (const auto& [i, first] : inputs_internal::Repeats(values)) {
    out->push_back(RepeatedCandidate{field, i, first, NameOf(T(values[i])), is_name});
  }
}

}  // namespace

bool IsFp8(Precision p) { return p != Precision::kBF16; }
bool IsFlex(Dispatcher d) { return d == Dispatcher::kDeepEP || d == Dispatcher::kHybridEP; }

const char* Name(Precision p) {
  switch (p) {
    case Precision::kBF16: return "bf16";
    case Precision::kFP8Delayed: return "fp8-delayed";
    case Precision::kFP8Tensorwise: return "fp8-tensorwise";
    case Precision::kFP8Blockwise: return "fp8-blockwise";
    case Precision::kMXFP8: return "mxfp8";
  }
  return "?";
}

std::optional<Precision> ParsePrecision(std::string_view s) {
  if (s == "fp8") return Precision::kFP8Tensorwise;  // the name before recipes existed
  for (int i = 0; i < kPrecisionCount; ++i) {
    if (s == Name(Precision(i))) return Precision(i);
  }
  return std::nullopt;
}

const char* PrecisionChoices() {
  return "bf16, fp8-delayed, fp8-tensorwise (alias fp8), fp8-blockwise, mxfp8";
}

const char* Name(RecomputeModule m) { return kModuleNames[static_cast<size_t>(m)]; }

std::string Name(Recompute r) {
  if (r.none()) return "none";
  if (r.full()) return "full";
  if (r == Recompute::Selective()) return "selective";
  return JoinModules(r.modules(), kModuleNames);
}

Result<Recompute> ParseRecompute(std::string_view text) {
  if (text == "none") return Recompute::None();
  if (text == "full") return Recompute::Full();
  if (text == "selective") return Recompute::Selective();
  Result<uint32_t> mask = ParseModules(text, kModuleNames, "none, selective, full");
  if (!mask.ok()) return mask.status();
  return Recompute::Modules(mask.value());
}

const char* Name(CudaGraphModule m) { return kCudaGraphModuleNames[static_cast<size_t>(m)]; }

std::string Name(CudaGraphs g) {
  switch (g.scope()) {
    case CudaGraphs::Scope::kNone: return "none";
    case CudaGraphs::Scope::kLayer: return "layer";
    case CudaGraphs::Scope::kFullIteration: return "full_iteration";
    case CudaGraphs::Scope::kModules: break;
  }
  return JoinModules(g.modules(), kCudaGraphModuleNames);
}

Result<CudaGraphs> ParseCudaGraphs(std::string_view text) {
  if (text == "none") return CudaGraphs::None();
  if (text == "layer") return CudaGraphs::Layer();
  if (text == "full_iteration") return CudaGraphs::FullIteration();
  Result<uint32_t> parsed = ParseModules(text, kCudaGraphModuleNames, "none, layer, full_iteration");
  if (!parsed.ok()) return parsed.status();
  const uint32_t mask = parsed.value();
  const auto has = [&](CudaGraphModule m) { return ((mask >> int(m)) & 1u) != 0; };
  // Megatron's argument checks: moe_preprocess only with moe_router;
  // moe already holds the router and its preprocessing.
  if (has(CudaGraphModule::kMoePreprocess) && !has(CudaGraphModule::kMoeRouter)) {
    return Status::Error("moe_preprocess is captured only with moe_router (Megatron's rule)");
  }
  if (has(CudaGraphModule::kMoe) && (has(CudaGraphModule::kMoeRouter) || has(CudaGraphModule::kMoePreprocess))) {
    return Status::Error("moe captures the router and its preprocessing already: drop moe_router and moe_preprocess");
  }
  return CudaGraphs::Modules(mask);
}

const char* Name(CpStyle s) {
  switch (s) {
    case CpStyle::kUlysses: return "ulysses";
    case CpStyle::kRing: return "ring";
  }
  return "?";
}

const char* Name(Dispatcher d) {
  switch (d) {
    case Dispatcher::kAllToAll: return "alltoall";
    case Dispatcher::kAllGather: return "allgather";
    case Dispatcher::kDeepEP: return "deepep";
    case Dispatcher::kHybridEP: return "hybridep";
  }
  return "?";
}

std::optional<Dispatcher> ParseDispatcher(std::string_view s) {
  if (s == "flex") return Dispatcher::kDeepEP;  // the flex dispatcher's default backend
  for (int i = 0; i < kDispatcherCount; ++i) {
    if (s == Name(Dispatcher(i))) return Dispatcher(i);
  }
  return std::nullopt;
}

const char* DispatcherChoices() { return "alltoall, allgather, deepep (alias flex), hybridep"; }

const char* Name(AttentionBackend b) {
  switch (b) {
    case AttentionBackend::kTeCudnn: return "te-cudnn";
    case AttentionBackend::kFlash2: return "flash2";
    case AttentionBackend::kFlash3: return "flash3";
  }
  return "?";
}

std::optional<AttentionBackend> ParseAttentionBackend(std::string_view s) {
  for (int i = 0; i < kAttentionBackendCount; ++i) {
    if (s == Name(AttentionBackend(i))) return AttentionBackend(i);
  }
  return std::nullopt;
}

const char* AttentionBackendChoices() { return "te-cudnn, flash2, flash3"; }

const char* Name(Trainer t) {
  switch (t) {
    case Trainer::kMegatron: return "megatron";
    case Trainer::kTorchtitan: return "torchtitan";
    case Trainer::kOlmoCore: return "olmo-core";
    case Trainer::kMaxText: return "maxtext";
    case Trainer::kJax: return "jax";
  }
  return "?";
}

std::optional<Trainer> ParseTrainer(std::string_view s) {
  for (int i = 0; i < kTrainerCount; ++i) {
    if (s == Name(Trainer(i))) return Trainer(i);
  }
  return std::nullopt;
}

const char* TrainerChoices() { return "megatron, torchtitan, olmo-core, maxtext, jax"; }

std::vector<Dispatcher> ClusterDispatchers(const ClusterSpec& cluster, int world) {
  std::vector<Dispatcher> out = {Dispatcher::kAllToAll};
  const bool sm90 = cluster.gpu.architecture == GpuArchitecture::kHopper ||
                    cluster.gpu.architecture == GpuArchitecture::kBlackwell;
  if (sm90 && world > cluster.nvlink_domain_gpus) out.push_back(Dispatcher::kDeepEP);
  if (cluster.nvlink_domain_gpus > cluster.gpus_per_node) out.push_back(Dispatcher::kHybridEP);
  return out;
}

JobSpec JobForCluster(const JobSpec& job, const ClusterSpec& cluster) {
  if (job.dispatchers_named) return job;
  JobSpec out = job;
  out.dispatchers = ClusterDispatchers(cluster, job.world_size > 0 ? job.world_size : cluster.total_gpus());
  out.dispatchers_named = true;
  return out;
}

std::vector<RepeatedCandidate> RepeatedCandidates(const JobSpec& j) {
  std::vector<RepeatedCandidate> out;
  AddRepeats("micro_batch_sizes", j.micro_batch_sizes, false, &out);
  AddRepeats("recompute", j.recompute, true, &out);
  AddRepeats("precision", j.precisions, true, &out);
  AddRepeats("dispatcher", j.dispatchers, true, &out);
  AddRepeats("a2a_overlap", j.a2a_overlap, false, &out);
  AddRepeats("fsdp", j.fsdp, false, &out);
  AddRepeats("tp_overlap", j.tp_overlap, false, &out);
  AddRepeats("cuda_graphs", j.cuda_graphs, true, &out);
  AddRepeats("cp_styles", j.cp_styles, true, &out);
  AddRepeats("vpp", j.vpp, false, &out);
  AddRepeats("pipeline_schedules", j.pipeline_schedules, true, &out);
  AddRepeats("orders", j.orders, true, &out);
  return out;
}

}  // namespace foldplan
