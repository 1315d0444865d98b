// A training job as read from a `foldplan.job/v1` file (doc/formats.md):
// what is trained and which options the planner may choose among. Every
// recipe option a layout may pin (planner/layout.h) has a candidate list
// here; the search tries every combination.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "inputs/cluster.h"
#include "inputs/pipeline_schedule.h"

namespace foldplan {

// GEMM precision recipes (Transformer Engine / Megatron --fp8-recipe).
enum class Precision {
  kBF16,
  kFP8Delayed,     // --fp8-recipe delayed: one scale per tensor from an amax history (Hopper)
  kFP8Tensorwise,  // --fp8-recipe tensorwise: one current scale per tensor (Hopper); "fp8" is an alias
  kFP8Blockwise,   // --fp8-recipe blockwise: 1x128 activation, 128x128 weight blocks (DeepSeek-V3's)
  kMXFP8,          // --fp8-recipe mxfp8: 32-element blocks, power-of-two scales in hardware (Blackwell)
};
inline constexpr int kPrecisionCount = 5;
bool IsFp8(Precision p);

// Megatron's token dispatchers; DeepEP and HybridEP are the two backends of
// its flex dispatcher (--moe-token-dispatcher-type flex
// --moe-flex-dispatcher-backend deepep|hybridep). "flex" is read as deepep.
enum class Dispatcher { kAllToAll, kAllGather, kDeepEP, kHybridEP };
inline constexpr int kDispatcherCount = 4;
bool IsFlex(Dispatcher d);  // DeepEP or HybridEP

enum class CpStyle { kUlysses, kRing };

// The attention kernels a job runs (Megatron's --attention-backend; one per
// job, not a search candidate). te-cudnn: Transformer Engine's fused
// attention, which runs cuDNN's kernels (Megatron's `fused`; what its default
// `auto` picks on Hopper); flash2: FlashAttention-2 (Megatron's `flash`);
// flash3: FlashAttention-3 (Megatron's `flash` with FlashAttention-3
// installed), Hopper only. doc/cost-model-compute.md says how each is timed.
enum class AttentionBackend { kTeCudnn, kFlash2, kFlash3 };
inline constexpr int kAttentionBackendCount = 3;

// The trainer that will run the layout (doc/trainers.md): its rules join
// the legality rules (planner/trainer_rules.h) and its exporter writes the
// plan. Megatron-LM is the default and the one the cost model follows.
enum class Trainer { kMegatron, kTorchtitan, kOlmoCore, kMaxText, kJax };
inline constexpr int kTrainerCount = 5;

// Megatron's --recompute-modules (selective granularity).
enum class RecomputeModule {
  kCoreAttn,       // the attention core (Megatron's default selective module)
  kMoeAct,         // the routed experts' activation function
  kLayernorm,      // the input norms (before attention and before the MLP / MoE)
  kMlaUpProj,      // MLA's q and kv up-projections
  kMlp,            // the dense MLP
  kMoe,            // the whole MoE layer, dispatch and combine included
  kSharedExperts,  // the shared experts
};
inline constexpr int kRecomputeModuleCount = 7;
const char* Name(RecomputeModule m);  // Megatron's spelling: "core_attn", "moe_act", ...

// What the backward pass recomputes: nothing, a set of Megatron modules
// (selective), or whole layers (full, uniform, one layer per group).
// "selective" is the set {core_attn}.
class Recompute {
 public:
  constexpr Recompute() = default;
  static constexpr Recompute None() { return Recompute(); }
  static constexpr Recompute Full() { return Recompute(true, 0); }
  static constexpr Recompute Selective() { return Modules(1u << int(RecomputeModule::kCoreAttn)); }
  static constexpr Recompute Modules(uint32_t mask) { return Recompute(false, mask); }

  bool full() const { return full_; }
  bool none() const { return !full_ && modules_ == 0; }
  bool selective() const { return !full_ && modules_ != 0; }
  // Whether `m` is recomputed (always true under full).
  bool has(RecomputeModule m) const { return full_ || (modules_ >> int(m)) & 1u; }
  Recompute With(RecomputeModule m) const { return Recompute(full_, modules_ | (1u << int(m))); }
  uint32_t modules() const { return modules_; }  // bit m: RecomputeModule m (selective)
  bool operator==(const Recompute&) const = default;

 private:
  constexpr Recompute(bool full, uint32_t modules) : full_(full), modules_(modules) {}
  bool full_ = false;
  uint32_t modules_ = 0;
};
// "none", "full", "selective" (exactly core_attn), else the modules joined
// with '+' in Megatron's order ("moe_act+layernorm").
std::string Name(Recompute r);
// Accepts the names above and any '+'-joined set of modules, in any order;
// the error says which token is wrong and lists the modules.
Result<Recompute> ParseRecompute(std::string_view text);

// Megatron's CUDA graphs (--cuda-graph-impl, --cuda-graph-modules): which
// parts of each layer are captured once and then replayed with one launch
// per pass instead of an eager launch per kernel (doc/cost-model-host.md).
enum class CudaGraphModule {
  kAttn,           // the attention block: input norm, projections, core, residual
  kMlp,            // a dense layer's MLP block
  kMoe,            // the whole MoE block: router, dispatch, experts, combine
  kMoeRouter,      // the pre-MLP norm and the router
  kMoePreprocess,  // the dispatcher's preprocessing up to its host sync (with moe_router only)
};
inline constexpr int kCudaGraphModuleCount = 5;
const char* Name(CudaGraphModule m);  // Megatron's spelling: "attn", "mlp", "moe", "moe_router", "moe_preprocess"

class CudaGraphs {
 public:
  enum class Scope {
    kNone,           // eager: every kernel launched from the host
    kModules,        // --cuda-graph-impl transformer_engine --cuda-graph-modules M...
    kLayer,          // --cuda-graph-impl transformer_engine, no modules: each whole layer
    kFullIteration,  // --cuda-graph-impl full_iteration: the step's forward and backward
  };
  constexpr CudaGraphs() = default;
  static constexpr CudaGraphs None() { return CudaGraphs(); }
  static constexpr CudaGraphs Layer() { return CudaGraphs(Scope::kLayer, 0); }
  static constexpr CudaGraphs FullIteration() { return CudaGraphs(Scope::kFullIteration, 0); }
  static constexpr CudaGraphs Modules(uint32_t mask) {
    return mask == 0 ? CudaGraphs() : CudaGraphs(Scope::kModules, mask);
  }
  Scope scope() const { return scope_; }
  bool none() const { return scope_ == Scope::kNone; }
  // Whether `m` is captured: listed, or inside a whole layer or iteration.
  // The moe module captures the router and its preprocessing too.
  bool captures(CudaGraphModule m) const {
    if (scope_ == Scope::kLayer || scope_ == Scope::kFullIteration) return true;
    if ((m == CudaGraphModule::kMoeRouter || m == CudaGraphModule::kMoePreprocess) &&
        ((modules_ >> int(CudaGraphModule::kMoe)) & 1u))
      return true;
    return (modules_ >> int(m)) & 1u;
  }
  // Whether a MoE layer is captured whole, its dispatch included: only a
  // dispatch that never syncs with the host can be (legality.h).
  bool captures_moe_dispatch() const { return captures(CudaGraphModule::kMoe); }
  uint32_t modules() const { return modules_; }
  bool operator==(const CudaGraphs&) const = default;

 private:
  constexpr CudaGraphs(Scope scope, uint32_t modules) : scope_(scope), modules_(modules) {}
  Scope scope_ = Scope::kNone;
  uint32_t modules_ = 0;
};
// "none", "layer", "full_iteration", else the modules joined with '+' in
// Megatron's order ("attn+moe_router+moe_preprocess").
std::string Name(CudaGraphs g);
// Accepts the names above, modules in any order. Refused as Megatron
// refuses them: moe_preprocess without moe_router, moe with moe_router or
// moe_preprocess (it captures them already); the error says which token.
Result<CudaGraphs> ParseCudaGraphs(std::string_view text);

const char* Name(Precision p);   // "bf16", "fp8-delayed", "fp8-tensorwise", "fp8-blockwise", "mxfp8"
const char* Name(CpStyle s);     // "ulysses", "ring"
const char* Name(Dispatcher d);  // "alltoall", "allgather", "deepep", "hybridep"
const char* Name(AttentionBackend b);  // "te-cudnn", "flash2", "flash3"
const char* Name(Trainer t);  // "megatron", "torchtitan", "olmo-core", "maxtext", "jax"
// Names above plus the aliases "fp8" (tensorwise) and "flex" (deepep).
std::optional<Precision> ParsePrecision(std::string_view text);
std::optional<Dispatcher> ParseDispatcher(std::string_view text);
std::optional<AttentionBackend> ParseAttentionBackend(std::string_view text);
std::optional<Trainer> ParseTrainer(std::string_view text);
// "one of ..." lists for messages.
const char* PrecisionChoices();   // "bf16, fp8-delayed, fp8-tensorwise (alias fp8), fp8-blockwise, mxfp8"
const char* DispatcherChoices();  // "alltoall, allgather, deepep (alias flex), hybridep"
const char* AttentionBackendChoices();  // "te-cudnn, flash2, flash3"
const char* TrainerChoices();  // "megatron, torchtitan, olmo-core, maxtext, jax"

// Ranges of job fields that the command line (--seq, --global-batch,
// --micro-batch, --capacity-factor, --routing-imbalance, --mtp) and the
// layout keys (vpp, mbs) set too, so that all check the same bounds
// (doc/formats.md#job). world_size and gpus_per_domain are at most the
// largest world (core/formats.h).
inline constexpr int kMaxSeqLen = 1 << 24;          // seq_len in [1, this] tokens
inline constexpr int kMaxGlobalBatch = 1 << 24;     // global_batch in [1, this] sequences
inline constexpr int kMaxMicroBatch = 1 << 16;      // each micro-batch size in [1, this] sequences
inline constexpr int kMaxVpp = 1024;                // each vpp in [1, this]
inline constexpr int kMaxCapacityFactor = 1024;     // capacity_factor 0 (dropless) or in [1, this]
// Below 1 an expert holds less than its mean load: tokens are dropped that
// the model's FLOPs still count, and the costed step would claim more work
// done than the GPUs did (an MFU above 100% at 0.001).
inline constexpr double kMinCapacityFactor = 1;
inline constexpr const char* kCapacityFactorExpected = "0 (dropless) or a number in [1, 1024]";
inline bool CapacityFactorValid(double x) { return x == 0 || (x >= kMinCapacityFactor && x <= kMaxCapacityFactor); }
inline constexpr int kMaxRoutingImbalance = 65536;  // routing_imbalance in [1, this]
inline constexpr int kMaxMtpLayers = 64;            // mtp_layers in [0, this], as the model file's

struct JobSpec {
  std::string name;
  std::string source;
  std::string description;
  int seq_len = 4096;                       // tokens per sequence
  int global_batch = 1024;                  // sequences per optimizer step
  std::vector<int> micro_batch_sizes = {1, 2};  // sequences per micro-batch, candidates
  // Candidate lists of the recipe options (each non-empty, no repeats).
  std::vector<Precision> precisions = {Precision::kBF16};
  std::vector<Recompute> recompute = {Recompute::None(), Recompute::Selective(), Recompute::Full()};
  std::vector<CpStyle> cp_styles = {CpStyle::kUlysses};
  std::vector<int> vpp = {1, 2, 4};         // virtual pipeline sizes to consider
  // Pipeline schedules to consider; empty: each layout's implied one
  // (DefaultSchedule(vpp)), which keeps the search space of a job that
  // names none.
  std::vector<PipelineSchedule> pipeline_schedules;
  // Megatron order strings to consider (fastest axis first).
  std::vector<std::string> orders = {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"};
  std::vector<Dispatcher> dispatchers = {Dispatcher::kAllToAll};
  // Whether the job names its dispatchers (a job file's "dispatcher", a
  // recipe's, --dispatcher). A job file without the field leaves it false:
  // the list above is then a placeholder that JobForCluster replaces with
  // the cluster's (ClusterDispatchers), as every command that loads a
  // cluster does (cli LoadInputs).
  bool dispatchers_named = true;
  std::vector<bool> a2a_overlap = {false};  // --overlap-moe-expert-parallel-comm
  std::vector<bool> fsdp = {false};         // --use-megatron-fsdp instead of the distributed optimizer
  std::vector<bool> tp_overlap = {false};   // --tp-comm-overlap
  std::vector<CudaGraphs> cuda_graphs = {CudaGraphs::None()};  // --cuda-graph-impl / --cuda-graph-modules
  // SMs the flex dispatcher's kernels occupy (--moe-flex-dispatcher-num-sms,
  // formerly --moe-deepep-num-sms / --moe-hybridep-num-sms); Megatron's defaults.
  int deepep_sms = 20;
  int hybridep_sms = 16;
  // Fused MoE kernels (--moe-permute-fusion, --moe-router-fusion), as every
  // public Megatron MoE recipe runs: fewer memory-bound passes.
  bool moe_permute_fusion = true;
  bool moe_router_fusion = true;
  double capacity_factor = 0;               // 0: dropless
  double routing_imbalance = 1.0;           // busiest expert's load / mean load, >= 1
  bool distributed_optimizer = true;        // optimizer states sharded over the grad group
  // Ulysses with CP > kv_heads/TP replicates KV heads (extra traffic) instead of refusing.
  bool ulysses_kv_replication = false;
  // The attention kernels (Megatron's --attention-backend); Megatron's
  // default runs Transformer Engine's cuDNN kernels.
  AttentionBackend attention_backend = AttentionBackend::kTeCudnn;
  // The trainer the layouts are for: only layouts it can run are legal.
  Trainer trainer = Trainer::kMegatron;
  int world_size = 0;                       // ranks used; 0: every GPU of the cluster
  // GPUs used of every NVLink domain (0: all); e.g. 64 of an NVL72 rack's 72.
  int gpus_per_domain = 0;
  // MTP layers, overriding the model's (--mtp N); unset: the model's.
  std::optional<int> mtp_layers;
};

// The dispatcher candidates of a job that names none, decided from the
// cluster the job runs on (`world` of its GPUs): what a production run on
// that hardware would consider.
//  - alltoall, always, first: Megatron's default dispatcher
//    (--moe-token-dispatcher-type alltoall), which runs on any GPU and
//    fabric; a layout that leaves the dispatcher out takes it.
//  - deepep when the GPUs are Hopper or Blackwell and the world spans more
//    than one NVLink domain: DeepEP's kernels need SM90 or later, and its
//    internode kernels (NVSHMEM over the RDMA NICs) are what it is built
//    for, EP groups that cross NVLink domains. A job within one domain
//    leaves it out to keep the search small (--dispatcher adds it).
//  - hybridep when an NVLink domain spans more than one node (GB200 / GB300
//    NVL72 racks): HybridEP is built for multi-node NVLink domains, a
//    rack's 72 GPUs one domain; the rule hybridep_in_domain keeps its
//    expert groups inside one.
// Ampere clusters, and Hopper ones used within one node, get alltoall only.
std::vector<Dispatcher> ClusterDispatchers(const ClusterSpec& cluster, int world);
// The job with what it leaves to the cluster filled in: the dispatchers,
// when it names none (ClusterDispatchers of the job's world: world_size,
// or every GPU of the cluster). A job that names them is returned as is.
JobSpec JobForCluster(const JobSpec& job, const ClusterSpec& cluster);

// A candidate that repeats an earlier one of its list. A job's candidate
// lists hold none (a repeat would be enumerated twice): the job reader
// refuses a file's, the command line a flag's (--precision, --recompute,
// --dispatcher), both by this rule.
struct RepeatedCandidate {
  std::string field;   // the job file's key: "precision", "dispatcher", ...
  size_t index = 0;    // of the repeat in the list
  size_t first = 0;    // of the earlier, equal candidate
  std::string value;   // its name or number: "deepep", "2", "true"
  bool is_name = true;  // a name (a string in the file), not a number or boolean
};
// Every repeat in the job's candidate lists, list by list in the job
// file's field order, each list's in index order.
std::vector<RepeatedCandidate> RepeatedCandidates(const JobSpec& job);

}  // namespace foldplan
