// The rules that make a layout legal for (cluster, model, job): doc/folding.md
// section 2 and the recipe rules of its section 2.2, each with its own name
// so that a rejection says which rule it broke. Memory is not checked here
// (it needs the cost model).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/order_string.h"
#include "inputs/cluster.h"
#include "inputs/job.h"
#include "inputs/model.h"
#include "planner/layout.h"
#include "planner/pipeline.h"

namespace foldplan {

// Rules in check order (the order enumeration attributes a rejection in).
enum class Rule {
  kWorldFitsCluster,          // world <= cluster GPUs
  kPpDividesWorld,            // world % pp == 0
  kVppNeedsPp,                // vpp > 1 needs pp > 1
  kPipelineSplit,             // layers spread over pp x vpp the Megatron way
  kTpDividesHeads,            // heads % tp == 0
  kTpDividesKvHeads,          // kv_heads % tp == 0
  kTpDividesFfn,              // dense (and shared-expert) FFN hidden % tp == 0
  kDenseProduct,              // tp * cp * dp == world / pp
  kUlyssesHeads,              // Ulysses: (heads / tp) % cp == 0
  kUlyssesKvHeads,            // Ulysses: (kv_heads / tp) % cp == 0 (or KV replication allowed)
  kSeqDividesCp,              // Ulysses: S % cp == 0; ring (load-balanced): S % (2 cp) == 0
  kSeqDividesTp,              // sequence parallel: (S / cp) % tp == 0
  kDenseModelExperts,         // a dense model has ep == 1 and etp == tp
  kEpDividesExperts,          // experts % ep == 0
  kEtpDividesExpertFfn,       // expert FFN hidden % etp == 0
  kExpertProduct,             // etp * ep * edp == world / pp
  kBatchDivides,              // global_batch % (dp * mbs) == 0
  kMicrobatchesCoverPp,       // 1F1B: micro-batches >= pp
  kInterleavedMicrobatches,   // interleaved 1F1B: micro-batches % pp == 0
  kScheduleNeeds,             // the pipeline schedule's pp, vpp and micro-batches (rules::ScheduleProblem)
  kOrderValid,                // order string: known tokens, none repeated, none missing of size > 1
  kOrderPpStride,             // order ends with pp, or pp == 1, or edp == dp
  kPlacementFits,             // a packed placement fits in the cluster's NVLink domains
  // The trainer's arrangement rules (planner/trainer_rules.h; none for Megatron).
  kTrainerSchedule,           // the trainer has the pipeline schedule
  kTrainerCpStyle,            // the trainer has the CP style (torchtitan: ring only)
  kTrainerExpertTp,           // the trainer's expert tensor parallelism (torchtitan, OLMo-core: etp 1; MaxText: etp = tp)
  kTrainerEpNeedsHsdp,        // OLMo-core: EP is HSDP's shard dimension (tp 1, cp 1, ep | dp)
  kTrainerEpRanks,            // where the trainer's EP takes its ranks from (MaxText: ep | dp)
  kTrainerPipelineSplit,      // the trainer can split the layers so (MaxText: one layer kind, vpp 1, even)
  kTrainerOrder,              // the trainer's mesh numbers ranks as the layout's order does
  kTrainerMeshSplit,          // MaxText: the mesh splits into ICI (NVLink domain) x DCN
  kPrecisionSupported,        // the GPU can run the precision recipe (FP8: Hopper+, MXFP8: Blackwell)
  kHybridEpInDomain,          // HybridEP: the expert TP x EP group inside one NVLink domain
  kA2aOverlapNeeds,           // EP overlap: ep > 1, alltoall or flex dispatcher, vpp with pp, no full or moe recompute, <= 1 MTP layer
  kTpOverlapNeedsTp,          // TP communication overlap needs tp > 1
  kCudaGraphsMoeSync,         // a MoE layer captured whole needs a dispatch that never syncs the host
  kDeepEpNoPadding,           // DeepEP refuses a padded expert capacity (capacity_factor > 0)
  kFp8DelayedRecompute,       // fp8-delayed refuses the moe_act and layernorm recompute modules
  // The trainer's recipe rules (planner/trainer_rules.h; none for Megatron).
  kTrainerDataParallel,       // the trainer's data parallelism (torchtitan: FSDP2; OLMo-core MoE: HSDP)
  kTrainerRecipe,             // the trainer has the recipe (dispatcher, precision, recompute, overlaps, graphs)
  kFitsMemory,                // peak memory per GPU <= HBM; judged by the cost model during search
};
inline constexpr int kRuleCount = 41;

struct RuleInfo {
  Rule rule;
  const char* id;           // snake_case name used in --why and JSON
  const char* statement;    // the rule in one line
};
const RuleInfo& Info(Rule rule);
const char* Name(Rule rule);  // Info(rule).id

struct Violation {
  Rule rule;
  std::string detail;  // the numbers that break it: "heads 48 % tp 32 = 16"
};

// What legality is checked against. `model` may be null (degrees only: the
// model rules are skipped).
// `weights` (may be null: planner/pipeline.h's defaults) decide the
// pipeline layout of layouts that do not give one.
struct LegalityContext {
  const ClusterSpec* cluster = nullptr;
  const ModelSpec* model = nullptr;
  const JobSpec* job = nullptr;
  const BlockWeights* weights = nullptr;
};

// Every rule the layout breaks, in rule order; empty when legal. The layout's
// stage_layers, when given explicitly, are checked against the model; when
// empty they are derived (SplitLayers) for the check.
std::vector<Violation> CheckLayout(const Layout& layout, const LegalityContext& ctx);

// The rules' predicates, shared by CheckLayout (which adds the numbers to a
// Violation) and by enumeration (which needs only yes or no, fast).
namespace rules {
bool TpDividesHeads(const ModelSpec& m, int tp);
bool TpDividesKvHeads(const ModelSpec& m, int tp);
bool TpDividesFfn(const ModelSpec& m, int tp);
bool UlyssesHeads(const ModelSpec& m, const Layout& l);            // needs tp | heads
bool UlyssesKvHeads(const ModelSpec& m, const JobSpec& j, const Layout& l);  // needs tp | kv_heads
bool SeqDividesCp(int seq, const Layout& l);
bool SeqDividesTp(int seq, const Layout& l);                       // needs seq % cp == 0
bool EpDividesExperts(const ModelSpec& m, int ep);
bool EtpDividesExpertFfn(const ModelSpec& m, int etp);
bool BatchDivides(int global_batch, const Layout& l);
long long MicroBatches(int global_batch, const Layout& l);         // needs BatchDivides
bool MicrobatchesCoverPp(int global_batch, const Layout& l);
bool InterleavedMicrobatches(int global_batch, const Layout& l);   // only under interleaved 1F1B
// "" when the layout has what its pipeline schedule (ScheduleOf) needs (the
// schedule_needs statement: model chunks per rank, pp, and DualPipeV's 2 pp
// micro-batches, checked only when global_batch > 0 and BatchDivides),
// else what it lacks, naming the schedule.
std::string ScheduleProblem(int global_batch, const Layout& l);
bool ScheduleFits(int global_batch, const Layout& l);              // ScheduleProblem(...).empty(), fast
// "" when the GPU runs the recipe, else why not.
std::string PrecisionProblem(const GpuSpec& gpu, Precision precision);
// "" when the GPU and the model can run the attention backend, else why
// not: FlashAttention-3 is written for Hopper (its kernels use Hopper's
// wgmma and TMA), and FlashAttention-2 needs equal q/k and v head dims
// (MLA's differ; Transformer Engine disables it there). Not a layout rule:
// the backend is the job's, so the inputs are refused (cli/inputs.cc).
std::string AttentionBackendProblem(const GpuSpec& gpu, const ModelSpec& model, AttentionBackend backend);
// "" when the layout may overlap its EP all-to-all (Megatron's
// --overlap-moe-expert-parallel-comm checks), else why not.
std::string A2aOverlapProblem(const ModelSpec& m, const Layout& l);
// A2aOverlapProblem(m, l).empty(), without building the message. Reads only
// the model and the layout's a2a_overlap, ep, dispatcher, pp, vpp and recompute.
bool A2aOverlapAllowed(const ModelSpec& m, const Layout& l);
// Whether a MoE layer's forward waits for the GPU on the host: a dropless
// dispatch reads its token counts back (the alltoall dispatcher's split
// sizes, the grouped GEMM's tokens per expert; DeepEP waits for its
// received-token count in every mode Megatron runs). Only a padded
// capacity (capacity_factor > 0) with the alltoall, allgather or HybridEP
// dispatcher has static shapes (DeepEP refuses the padding).
bool DispatchSyncsHost(const JobSpec& job, Dispatcher dispatcher);
// "" when the layout's CUDA graphs can be captured, else why not: a graph
// that holds a MoE layer's dispatch (moe, layer, full_iteration) cannot
// hold a host sync. Reads the model, the job's capacity factor and the
// layout's cuda_graphs and dispatcher.
std::string CudaGraphsProblem(const ModelSpec& m, const JobSpec& job, const Layout& l);
}  // namespace rules

// The aligned rank block that holds every expert TP x EP group (a prefix
// product of the expert view's order); 0 when the order is invalid.
int ExpertBlock(const Layout& layout);
// Whether every expert TP x EP group sits inside one NVLink domain of
// `domain_gpus` under the layout's placement.
bool ExpertGroupInDomain(const Layout& layout, int domain_gpus);

// Order-string checks shared with enumeration.
// The prefix product of axis sizes up to and including the last of `heavy`
// axes in `order`: the aligned rank block that holds every group over those
// axes. Returns 0 when the order is invalid.
int HeavyBlock(const Layout& layout);

// HeavyBlock and ExpertBlock from one parse of the order (both 0 when it is
// invalid), for callers that need both or ask again for the same order.
struct OrderBlocks {
  int heavy = 0;
  int expert = 0;
};
OrderBlocks BlocksOf(const Layout& layout);
// ExpertGroupInDomain with the layout's BlocksOf at hand.
bool ExpertGroupInDomain(const Layout& layout, int domain_gpus, const OrderBlocks& blocks);

// kOrderValid and kOrderPpStride for the layout's order and degrees.
std::vector<Violation> CheckOrder(const Layout& layout);

// What enumeration needs of a layout's order, without words: the rule of
// CheckOrder's first violation (none when it passes) and BlocksOf. Reads
// the order, as `parsed` (ParseOrderString(layout.order), which enumeration
// parses once per order), and pp, dp, edp, tp, cp, ep, etp.
struct OrderVerdict {
  std::optional<Rule> broken;
  OrderBlocks blocks;
};
OrderVerdict JudgeOrder(const Layout& layout, const OrderString& parsed);

}  // namespace foldplan
