#include "planner/legality.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <optional>
#include <string_view>

#include "core/order_string.h"
#include "inputs/checked_product.h"
#include "planner/trainer_rules.h"
#include "topology/cluster_shape.h"

namespace foldplan {
namespace {

constexpr std::array<RuleInfo, kRuleCount> kRules = {{
    {Rule::kWorldFitsCluster, "world_fits_cluster", "world size <= GPUs in the cluster"},
    {Rule::kPpDividesWorld, "pp_divides_world", "world % pp == 0"},
    {Rule::kVppNeedsPp, "vpp_needs_pp", "vpp > 1 needs pp > 1"},
    {Rule::kPipelineSplit, "pipeline_split",
     "layers spread over pp x vpp stages: evenly, or a given or chosen pipeline layout"},
    {Rule::kTpDividesHeads, "tp_divides_heads", "heads % tp == 0"},
    {Rule::kTpDividesKvHeads, "tp_divides_kv_heads", "kv_heads % tp == 0"},
    {Rule::kTpDividesFfn, "tp_divides_ffn", "dense and shared-expert FFN hidden % tp == 0"},
    {Rule::kDenseProduct, "dense_product", "tp * cp * dp == world / pp"},
    {Rule::kUlyssesHeads, "ulysses_heads", "Ulysses CP: (heads / tp) % cp == 0"},
    {Rule::kUlyssesKvHeads, "ulysses_kv_heads",
     "Ulysses CP: (kv_heads / tp) % cp == 0, unless the job allows KV replication"},
    {Rule::kSeqDividesCp, "seq_divides_cp",
     "Ulysses: seq % cp == 0; ring (load-balanced): seq % (2 cp) == 0"},
    {Rule::kSeqDividesTp, "seq_divides_tp", "sequence parallel: (seq / cp) % tp == 0"},
    {Rule::kDenseModelExperts, "dense_model_experts", "a dense model has ep == 1 and etp == tp"},
    {Rule::kEpDividesExperts, "ep_divides_experts", "experts % ep == 0"},
    {Rule::kEtpDividesExpertFfn, "etp_divides_expert_ffn", "expert FFN hidden % etp == 0"},
    {Rule::kExpertProduct, "expert_product", "etp * ep * edp == world / pp"},
    {Rule::kBatchDivides, "batch_divides", "global_batch % (dp * mbs) == 0"},
    {Rule::kMicrobatchesCoverPp, "microbatches_cover_pp", "1F1B: micro-batches >= pp"},
    {Rule::kInterleavedMicrobatches, "interleaved_microbatches",
     "interleaved 1F1B (vpp > 1): micro-batches % pp == 0"},
    {Rule::kScheduleNeeds, "schedule_needs",
     "1f1b, gpipe: vpp 1; zb-h1: pp > 1, vpp 1; interleaved-1f1b: vpp > 1; dualpipev: pp > 1, vpp 2, m >= 2pp"},
    {Rule::kOrderValid, "order_valid",
     "order: tokens from tp,cp,ep,dp,pp, none repeated, every axis of size > 1 present"},
    {Rule::kOrderPpStride, "order_pp_stride",
     "dense and expert pp groups equal: order ends with pp, or pp == 1, or edp == dp"},
    {Rule::kPlacementFits, "placement_fits",
     "a packed placement's whole heavy blocks per NVLink domain hold every rank"},
    {Rule::kTrainerSchedule, "trainer_schedule", "the trainer has the pipeline schedule (doc/trainers.md)"},
    {Rule::kTrainerCpStyle, "trainer_cp_style", "the trainer has the CP style: torchtitan ring only"},
    {Rule::kTrainerExpertTp, "trainer_expert_tp",
     "experts' TP: torchtitan etp 1 (etp = tp without EP); OLMo-core etp 1, tp 1 with EP; MaxText etp = tp"},
    {Rule::kTrainerEpNeedsHsdp, "trainer_ep_needs_hsdp",
     "OLMo-core: EP is HSDP's shard dimension: cp 1 and ep | dp"},
    {Rule::kTrainerEpRanks, "trainer_ep_ranks",
     "EP's ranks: MaxText's expert axis is a batch axis of the dense layers (ep | dp)"},
    {Rule::kTrainerPipelineSplit, "trainer_pipeline_split",
     "MaxText pipelines one layer kind, evenly: pp > 1 needs decoder layers all alike, vpp 1, an even split"},
    {Rule::kTrainerOrder, "trainer_order", "the trainer's device mesh gives the groups of the layout's order"},
    {Rule::kTrainerMeshSplit, "trainer_mesh_split",
     "MaxText: whole NVLink domains of consecutive ranks, each a product of the mesh's innermost axes (ICI x DCN)"},
    {Rule::kPrecisionSupported, "precision_supported",
     "the GPU runs the precision recipe (fp8: Hopper or later; mxfp8: Blackwell)"},
    {Rule::kHybridEpInDomain, "hybridep_in_domain",
     "HybridEP: every expert TP x EP group inside one NVLink domain"},
    {Rule::kA2aOverlapNeeds, "a2a_overlap_needs",
     "EP overlap: ep > 1, alltoall or flex dispatcher, vpp > 1 when pp > 1, no full or moe recompute, <= 1 MTP layer"},
    {Rule::kTpOverlapNeedsTp, "tp_overlap_needs_tp", "TP communication overlap needs tp > 1"},
    {Rule::kCudaGraphsMoeSync, "cuda_graphs_moe_sync",
     "CUDA graphs of a MoE dispatch (moe, layer, full_iteration): capacity_factor > 0 and not DeepEP (no host sync)"},
    {Rule::kDeepEpNoPadding, "deepep_no_padding",
     "the DeepEP flex dispatcher refuses a padded capacity (capacity_factor > 0)"},
    {Rule::kFp8DelayedRecompute, "fp8_delayed_recompute",
     "fp8-delayed refuses the moe_act and layernorm recompute modules"},
    {Rule::kTrainerDataParallel, "trainer_data_parallel",
     "the trainer's data parallelism: torchtitan FSDP2 (fsdp 1); OLMo-core MoE HSDP (fsdp 1)"},
    {Rule::kTrainerRecipe, "trainer_recipe",
     "the trainer has the recipe: dispatcher, precision, recompute, EP/TP overlap, CUDA graphs (doc/trainers.md)"},
    {Rule::kFitsMemory, "fits_memory",
     "peak memory per GPU <= HBM (cost model; counted by plan, not by enumerate)"},
}};

std::string Str(long long v) { return std::to_string(v); }

// Axis ids as core/order_string.h numbers them (kOrderAxisNames order).
enum Axis { kTpAxis, kCpAxis, kEpAxis, kDpAxis, kPpAxis, kAxisCount };
static_assert(kOrderAxisNames[kTpAxis] == "tp" && kOrderAxisNames[kCpAxis] == "cp" &&
              kOrderAxisNames[kEpAxis] == "ep" && kOrderAxisNames[kDpAxis] == "dp" &&
              kOrderAxisNames[kPpAxis] == "pp" && kOrderAxisNames.size() == kAxisCount);

// Why `parsed` (of `order`) is not an order, for the order_valid rule.
std::string OrderError(std::string_view order, const OrderString& parsed) {
  const std::string token(parsed.token);
  if (parsed.problem == OrderString::Problem::kRepeatedAxis) {
    return "axis " + token + " repeated in order " + std::string(order);
  }
  return "unknown axis \"" + token + "\" in order " + std::string(order);
}

// Appends the axes `order` leaves out, as Megatron appends missing size-1 axes.
void Complete(OrderString* order) {
  for (int a = 0; a < kAxisCount; ++a) {
    if (!order->Has(a)) order->axes[static_cast<size_t>(order->count++)] = a;
  }
}

// The layout's axis sizes by Axis in the dense generator (ep 1) and in the
// expert one (cp 1, etp for tp, edp for dp).
struct AxisSizes {
  explicit AxisSizes(const Layout& l) : dense{l.tp, l.cp, 1, l.dp, l.pp}, expert{l.etp, 1, l.ep, l.edp, l.pp} {}
  std::array<long long, kAxisCount> dense, expert;
};

// Product of the sizes of the axes before `axis` (missing axes come last).
long long StrideOf(const OrderString& order, Axis axis, const std::array<long long, kAxisCount>& size) {
  long long stride = 1;
  for (int i = 0; i < order.count && order.axes[static_cast<size_t>(i)] != axis; ++i) {
    stride *= size[static_cast<size_t>(order.axes[static_cast<size_t>(i)])];
  }
  return stride;
}

// The prefix product through the last heavy axis of size > 1. Each prefix
// divides the world (<= kMaxWorldSize) for any layout ParseLayout or
// enumeration makes, so long long holds it.
long long BlockOf(const OrderString& order, Axis heavy_a, Axis heavy_b, const std::array<long long, kAxisCount>& size) {
  long long prefix = 1, block = 1;
  for (int i = 0; i < order.count; ++i) {
    const Axis a = Axis(order.axes[static_cast<size_t>(i)]);
    prefix *= size[a];
    if ((a == heavy_a || a == heavy_b) && size[a] > 1) block = prefix;
  }
  return block;
}

void Add(std::vector<Violation>* out, Rule rule, std::string detail) {
  out->push_back({rule, std::move(detail)});
}

void CheckModelRules(const Layout& l, const ModelSpec& m, const JobSpec& job, const BlockWeights& weights,
                     std::vector<Violation>* out) {
  if (l.explicit_stages) {
    Status s = CheckStages(l.stage_layers, l.stage_mtp, m, l.pp, l.vpp);
    if (!s.ok()) Add(out, Rule::kPipelineSplit, s.message());
  } else {
    auto split = ChooseStageLayers(m, l.pp, l.vpp, weights, l.schedule);
    if (!split.ok()) Add(out, Rule::kPipelineSplit, split.status().message());
  }
  if (std::string why = rules::A2aOverlapProblem(m, l); !why.empty()) Add(out, Rule::kA2aOverlapNeeds, why);
  if (!rules::TpDividesHeads(m, l.tp)) {
    Add(out, Rule::kTpDividesHeads, "heads " + Str(m.heads) + " % tp " + Str(l.tp) + " != 0");
  }
  if (!rules::TpDividesKvHeads(m, l.tp)) {
    Add(out, Rule::kTpDividesKvHeads,
        "kv_heads " + Str(m.kv_heads) + " % tp " + Str(l.tp) + " != 0");
  }
  if (!rules::TpDividesFfn(m, l.tp)) {
    const int shared = m.moe ? m.moe->shared_ffn_hidden : 0;
    Add(out, Rule::kTpDividesFfn, "ffn_hidden " + Str(m.ffn_hidden) + " or shared expert ffn " +
                                      Str(shared) + " % tp " + Str(l.tp) + " != 0");
  }
  if (rules::TpDividesHeads(m, l.tp) && !rules::UlyssesHeads(m, l)) {
    Add(out, Rule::kUlyssesHeads, "heads/tp = " + Str(m.heads / l.tp) + " % cp " + Str(l.cp) + " != 0");
  }
  if (rules::TpDividesKvHeads(m, l.tp) && !rules::UlyssesKvHeads(m, job, l)) {
    const int kv_local = m.kv_heads / l.tp;
    Add(out, Rule::kUlyssesKvHeads,
        "kv_heads/tp = " + Str(kv_local) + " % cp " + Str(l.cp) + " != 0" +
            (l.cp % kv_local == 0 ? " (the job could allow ulysses_kv_replication)" : ""));
  }
  if (!m.moe) {
    if (l.ep != 1 || l.etp != l.tp) {
      Add(out, Rule::kDenseModelExperts, "dense model with ep " + Str(l.ep) + ", etp " + Str(l.etp) +
                                             " (needs ep 1, etp = tp " + Str(l.tp) + ")");
    }
    return;
  }
  if (!rules::EpDividesExperts(m, l.ep)) {
    Add(out, Rule::kEpDividesExperts,
        "experts " + Str(m.moe->experts) + " % ep " + Str(l.ep) + " != 0");
  }
  if (!rules::EtpDividesExpertFfn(m, l.etp)) {
    Add(out, Rule::kEtpDividesExpertFfn,
        "expert ffn_hidden " + Str(m.moe->ffn_hidden) + " % etp " + Str(l.etp) + " != 0");
  }
}

// The first of Megatron's --overlap-moe-expert-parallel-comm checks the
// layout breaks (A2aOverlapProblem words each).
enum class A2aIssue { kNone, kNeedsEp, kAllGather, kNeedsVpp, kFullRecompute, kMoeRecompute, kMtp };
A2aIssue A2aOverlapIssue(const ModelSpec& m, const Layout& l) {
  if (!l.a2a_overlap) return A2aIssue::kNone;
  if (!m.is_moe() || l.ep < 2) return A2aIssue::kNeedsEp;
  if (l.dispatcher == Dispatcher::kAllGather) return A2aIssue::kAllGather;
  if (l.pp > 1 && l.vpp < 2) return A2aIssue::kNeedsVpp;
  if (l.recompute.full()) return A2aIssue::kFullRecompute;
  // transformer_config.py (~3030) refuses the overlap with `moe` among the
  // recompute modules: the recomputed dispatch and combine would run again
  // outside the schedule's pairs.
  if (l.recompute.has(RecomputeModule::kMoe)) return A2aIssue::kMoeRecompute;
  if (m.mtp_layers > 1) return A2aIssue::kMtp;
  return A2aIssue::kNone;
}

// The first need of the layout's pipeline schedule it lacks
// (ScheduleProblem words each).
enum class ScheduleIssue { kNone, kOneChunk, kNeedsPp, kInterleaves, kTwoChunks, kMicrobatches };
ScheduleIssue ScheduleIssueOf(int global_batch, const Layout& l) {
  switch (ScheduleOf(l)) {
    case PipelineSchedule::k1F1B:
    case PipelineSchedule::kGPipe:
      return l.vpp == 1 ? ScheduleIssue::kNone : ScheduleIssue::kOneChunk;
    case PipelineSchedule::kZeroBubbleH1:
      if (l.pp < 2) return ScheduleIssue::kNeedsPp;
      return l.vpp == 1 ? ScheduleIssue::kNone : ScheduleIssue::kOneChunk;
    case PipelineSchedule::kInterleaved1F1B:
      return l.vpp > 1 ? ScheduleIssue::kNone : ScheduleIssue::kInterleaves;
    case PipelineSchedule::kDualPipeV:
      if (l.pp < 2) return ScheduleIssue::kNeedsPp;
      if (l.vpp != 2) return ScheduleIssue::kTwoChunks;
      if (global_batch > 0 && rules::BatchDivides(global_batch, l) &&
          rules::MicroBatches(global_batch, l) < 2LL * l.pp) {
        return ScheduleIssue::kMicrobatches;
      }
      return ScheduleIssue::kNone;
  }
  return ScheduleIssue::kNone;
}

void CheckSequenceRules(const Layout& l, int seq, std::vector<Violation>* out) {
  if (!rules::SeqDividesCp(seq, l)) {
    Add(out, Rule::kSeqDividesCp,
        l.cp_style == CpStyle::kRing
            ? "ring CP: seq " + Str(seq) + " % (2 cp) " + Str(2 * l.cp) + " != 0"
            : "seq " + Str(seq) + " % cp " + Str(l.cp) + " != 0");
  }
  if (seq % l.cp == 0 && !rules::SeqDividesTp(seq, l)) {
    Add(out, Rule::kSeqDividesTp,
        "seq/cp = " + Str(seq / l.cp) + " % tp " + Str(l.tp) + " != 0 (sequence parallel)");
  }
}

void CheckBatchRules(const Layout& l, int global_batch, std::vector<Violation>* out) {
  if (!rules::BatchDivides(global_batch, l)) {
    Add(out, Rule::kBatchDivides, "global_batch " + Str(global_batch) + " % (dp " + Str(l.dp) +
                                      " x mbs " + Str(l.mbs) + ") != 0");
    return;
  }
  const long long micro = rules::MicroBatches(global_batch, l);
  if (!rules::MicrobatchesCoverPp(global_batch, l)) {
    Add(out, Rule::kMicrobatchesCoverPp,
        Str(micro) + " micro-batches < pp " + Str(l.pp) + " (1F1B cannot fill the pipeline)");
  }
  if (!rules::InterleavedMicrobatches(global_batch, l)) {
    Add(out, Rule::kInterleavedMicrobatches,
        Str(micro) + " micro-batches % pp " + Str(l.pp) + " != 0 (interleaved 1F1B)");
  }
}

void CheckScheduleRule(const Layout& l, const JobSpec* job, std::vector<Violation>* out) {
  // Without a job the micro-batches are unknown (0): only the degrees are checked.
  const int global_batch = job ? job->global_batch : 0;
  if (std::string why = rules::ScheduleProblem(global_batch, l); !why.empty()) {
    Add(out, Rule::kScheduleNeeds, why);
  }
}

}  // namespace

namespace rules {
bool TpDividesHeads(const ModelSpec& m, int tp) { return m.heads % tp == 0; }
bool TpDividesKvHeads(const ModelSpec& m, int tp) { return m.kv_heads % tp == 0; }
bool TpDividesFfn(const ModelSpec& m, int tp) {
  const bool dense_ok = m.ffn_hidden == 0 || m.ffn_hidden % tp == 0;
  const bool shared_ok = !m.moe || m.moe->shared_experts == 0 || m.moe->shared_ffn_hidden % tp == 0;
  return dense_ok && shared_ok;
}
bool UlyssesHeads(const ModelSpec& m, const Layout& l) {
  return l.cp == 1 || l.cp_style != CpStyle::kUlysses || (m.heads / l.tp) % l.cp == 0;
}
bool UlyssesKvHeads(const ModelSpec& m, const JobSpec& j, const Layout& l) {
  if (l.cp == 1 || l.cp_style != CpStyle::kUlysses) return true;
  const int kv_local = m.kv_heads / l.tp;
  return kv_local % l.cp == 0 || (j.ulysses_kv_replication && l.cp % kv_local == 0);
}
bool SeqDividesCp(int seq, const Layout& l) {
  if (l.cp_style == CpStyle::kRing && l.cp > 1) return seq % (2 * l.cp) == 0;
  return seq % l.cp == 0;
}
bool SeqDividesTp(int seq, const Layout& l) { return (seq / l.cp) % l.tp == 0; }
bool EpDividesExperts(const ModelSpec& m, int ep) { return !m.moe || m.moe->experts % ep == 0; }
bool EtpDividesExpertFfn(const ModelSpec& m, int etp) { return !m.moe || m.moe->ffn_hidden % etp == 0; }
bool BatchDivides(int global_batch, const Layout& l) { return global_batch % (1LL * l.dp * l.mbs) == 0; }
long long MicroBatches(int global_batch, const Layout& l) { return global_batch / (1LL * l.dp * l.mbs); }
bool MicrobatchesCoverPp(int global_batch, const Layout& l) { return MicroBatches(global_batch, l) >= l.pp; }
bool InterleavedMicrobatches(int global_batch, const Layout& l) {
  return ScheduleOf(l) != PipelineSchedule::kInterleaved1F1B || l.vpp == 1 ||
         MicroBatches(global_batch, l) % l.pp == 0;
}
bool ScheduleFits(int global_batch, const Layout& l) {
  return ScheduleIssueOf(global_batch, l) == ScheduleIssue::kNone;
}
std::string ScheduleProblem(int global_batch, const Layout& l) {
  const std::string name = Name(ScheduleOf(l));
  switch (ScheduleIssueOf(global_batch, l)) {
    case ScheduleIssue::kNone: return "";
    case ScheduleIssue::kOneChunk:
      return name + " runs one model chunk per rank: it needs vpp 1, this layout has vpp " + Str(l.vpp);
    case ScheduleIssue::kNeedsPp: return name + " needs pp > 1, this layout has pp " + Str(l.pp);
    case ScheduleIssue::kInterleaves:
      return name + " interleaves model chunks: it needs vpp > 1, this layout has vpp " + Str(l.vpp);
    case ScheduleIssue::kTwoChunks:
      return name + " runs exactly two model chunks per rank (the V): it needs vpp 2, this layout has vpp " +
             Str(l.vpp);
    case ScheduleIssue::kMicrobatches:
      return name + " needs at least 2 pp = " + Str(2LL * l.pp) + " micro-batches for its steady phase, " +
             "this layout has " + Str(MicroBatches(global_batch, l));
  }
  return "";
}
std::string PrecisionProblem(const GpuSpec& gpu, Precision p) {
  if (!IsFp8(p)) return "";
  const std::string on = " (" + gpu.name + " is " + Name(gpu.architecture) + ")";
  if (gpu.architecture == GpuArchitecture::kAmpere || gpu.peak_fp8_flops <= 0) {
    return std::string(Name(p)) + " needs FP8 tensor cores (Hopper or later)" + on;
  }
  if (p == Precision::kMXFP8 && gpu.architecture != GpuArchitecture::kBlackwell) {
    return "mxfp8 needs Blackwell tensor cores (MX block scales in hardware)" + on;
  }
  return "";
}
std::string AttentionBackendProblem(const GpuSpec& gpu, const ModelSpec& model, AttentionBackend backend) {
  if (backend == AttentionBackend::kFlash3 && gpu.architecture != GpuArchitecture::kHopper) {
    return "flash3 (FlashAttention-3) runs on Hopper only (" + gpu.name + " is " + Name(gpu.architecture) +
           "); use te-cudnn or flash2";
  }
  if (backend == AttentionBackend::kFlash2 && model.head_dim != model.v_head_dim()) {
    return "flash2 (FlashAttention-2) needs equal q/k and v head dims, and model " + model.name + " has " +
           Str(model.head_dim) + " and " + Str(model.v_head_dim()) + "; use te-cudnn" +
           (gpu.architecture == GpuArchitecture::kHopper ? " or flash3" : "");
  }
  return "";
}
bool A2aOverlapAllowed(const ModelSpec& m, const Layout& l) { return A2aOverlapIssue(m, l) == A2aIssue::kNone; }
std::string A2aOverlapProblem(const ModelSpec& m, const Layout& l) {
  switch (A2aOverlapIssue(m, l)) {
    case A2aIssue::kNone: return "";
    case A2aIssue::kNeedsEp: return "EP overlap needs ep > 1 (ep " + Str(l.ep) + ")";
    case A2aIssue::kAllGather: return "EP overlap needs the alltoall or a flex dispatcher, not allgather";
    case A2aIssue::kNeedsVpp: return "EP overlap with pp " + Str(l.pp) + " needs vpp > 1 (Megatron's rule)";
    case A2aIssue::kFullRecompute: return "EP overlap does not run with full recompute";
    case A2aIssue::kMoeRecompute: return "EP overlap does not run with the moe recompute module (Megatron's rule)";
    case A2aIssue::kMtp: return "EP overlap runs with at most 1 MTP layer (the model has " + Str(m.mtp_layers) + ")";
  }
  return "";
}
bool DispatchSyncsHost(const JobSpec& job, Dispatcher dispatcher) {
  return job.capacity_factor <= 0 || dispatcher == Dispatcher::kDeepEP;
}
std::string CudaGraphsProblem(const ModelSpec& m, const JobSpec& job, const Layout& l) {
  if (!m.is_moe() || !l.cuda_graphs.captures_moe_dispatch() || !DispatchSyncsHost(job, l.dispatcher)) return "";
  return "cuda_graphs=" + Name(l.cuda_graphs) + " captures the MoE dispatch, which syncs the host every forward (" +
         (l.dispatcher == Dispatcher::kDeepEP ? std::string("DeepEP waits for its received-token count")
                                              : std::string("dropless: the token counts are read back")) +
         "); capture attn, moe_router, moe_preprocess instead";
}
}  // namespace rules

namespace {

// The first order rule a parsed order breaks, with what its message needs
// (CheckOrder words it; JudgeOrder needs only the rule).
struct OrderIssue {
  enum class Kind { kNone, kNotAnOrder, kMissingAxis, kPpStride };
  Kind kind = Kind::kNone;
  int axis = 0;                                    // kMissingAxis
  long long size = 0;
  long long dense_stride = 0, expert_stride = 0;  // kPpStride
  std::optional<Rule> rule() const {
    switch (kind) {
      case Kind::kNone: return std::nullopt;
      case Kind::kNotAnOrder:
      case Kind::kMissingAxis: return Rule::kOrderValid;
      case Kind::kPpStride: return Rule::kOrderPpStride;
    }
    return std::nullopt;
  }
};

OrderIssue OrderIssueOf(const Layout& l, const OrderString& order) {
  OrderIssue issue;
  if (!order.ok()) {
    issue.kind = OrderIssue::Kind::kNotAnOrder;
    return issue;
  }
  const AxisSizes sizes(l);
  unsigned named = 0;  // bit a: the order names axis a
  for (int i = 0; i < order.count; ++i) named |= 1u << order.axes[static_cast<size_t>(i)];
  for (int a = 0; a < kAxisCount; ++a) {
    const long long size = std::max(sizes.dense[a], sizes.expert[a]);
    if (!(named >> a & 1u) && size > 1) {
      issue.kind = OrderIssue::Kind::kMissingAxis;
      issue.axis = a;
      issue.size = size;
      return issue;
    }
  }
  // pp groups are {low + s*k + s*pp*high}: equal in both views iff the pp
  // stride s (product of the sizes of the axes before pp) is equal.
  issue.dense_stride = StrideOf(order, kPpAxis, sizes.dense);
  issue.expert_stride = StrideOf(order, kPpAxis, sizes.expert);
  if (l.pp > 1 && issue.dense_stride != issue.expert_stride) issue.kind = OrderIssue::Kind::kPpStride;
  // Megatron-Core asserts more than equal groups: pp inside dp with edp !=
  // dp trips its pipeline-group check even where the strides agree
  // (parallel_state.py ~898-902, doc/trainers.md).
  if (l.pp > 1 && l.edp != l.dp) {
    for (int i = 0; i < order.count && order.axes[static_cast<size_t>(i)] != kDpAxis; ++i) {
      if (order.axes[static_cast<size_t>(i)] == kPpAxis) issue.kind = OrderIssue::Kind::kPpStride;
    }
  }
  return issue;
}

// BlocksOf a parsed order (`order` is completed in place).
OrderBlocks BlocksOfParsed(const Layout& l, OrderString& order) {
  if (!order.ok()) return {};
  Complete(&order);
  const AxisSizes sizes(l);
  const long long dense = BlockOf(order, kTpAxis, kCpAxis, sizes.dense);
  const long long expert = BlockOf(order, kTpAxis, kEpAxis, sizes.expert);
  return {static_cast<int>(std::lcm(dense, expert)), static_cast<int>(expert)};
}

}  // namespace

std::vector<Violation> CheckOrder(const Layout& l) {
  std::vector<Violation> violations;
  const OrderString order = ParseOrderString(l.order);
  const OrderIssue issue = OrderIssueOf(l, order);
  switch (issue.kind) {
    case OrderIssue::Kind::kNone: break;
    case OrderIssue::Kind::kNotAnOrder: Add(&violations, Rule::kOrderValid, OrderError(l.order, order)); break;
    case OrderIssue::Kind::kMissingAxis:
      Add(&violations, Rule::kOrderValid, "axis " + std::string(kOrderAxisNames[issue.axis]) + " has size " +
                                              Str(issue.size) + " but is missing from order " + l.order);
      break;
    case OrderIssue::Kind::kPpStride:
      Add(&violations, Rule::kOrderPpStride,
          issue.dense_stride != issue.expert_stride
              ? "order " + l.order + ": pp stride " + Str(issue.dense_stride) + " in the dense view but " +
                    Str(issue.expert_stride) + " in the expert view (edp " + Str(l.edp) + " != dp " + Str(l.dp) + ")"
              : "order " + l.order + ": pp inside dp with edp " + Str(l.edp) + " != dp " + Str(l.dp) +
                    " (Megatron-Core's pipeline-group assert)");
      break;
  }
  return violations;
}

OrderVerdict JudgeOrder(const Layout& l, const OrderString& parsed) {
  OrderString order = parsed;
  OrderVerdict verdict;
  verdict.broken = OrderIssueOf(l, order).rule();
  verdict.blocks = BlocksOfParsed(l, order);
  return verdict;
}

const RuleInfo& Info(Rule rule) { return kRules[static_cast<size_t>(rule)]; }
const char* Name(Rule rule) { return Info(rule).id; }

OrderBlocks BlocksOf(const Layout& l) {
  OrderString order = ParseOrderString(l.order);
  return BlocksOfParsed(l, order);
}

int ExpertBlock(const Layout& l) { return BlocksOf(l).expert; }

bool ExpertGroupInDomain(const Layout& l, int domain_gpus) { return ExpertGroupInDomain(l, domain_gpus, BlocksOf(l)); }

bool ExpertGroupInDomain(const Layout& l, int domain_gpus, const OrderBlocks& blocks) {
  const int block = blocks.expert;
  if (block < 1 || block > domain_gpus) return false;
  // Packed placement, where PackBlocks packs, keeps whole heavy blocks
  // (which hold the expert blocks) in one domain. Linear: block k covers
  // GPUs [kB, (k+1)B); the pattern repeats every lcm(B, D) / B blocks, so
  // checking that many (or the world's, if fewer) is exact.
  if (l.placement == Placement::kPacked && PackBlocks(l.world, blocks.heavy, domain_gpus).packs) return true;
  const long long count = std::min<long long>(l.world / block, domain_gpus / std::gcd(block, domain_gpus));
  for (long long k = 0; k < count; ++k) {
    if (k * block / domain_gpus != ((k + 1) * block - 1) / domain_gpus) return false;
  }
  return true;
}

int HeavyBlock(const Layout& l) { return BlocksOf(l).heavy; }

std::vector<Violation> CheckLayout(const Layout& l, const LegalityContext& ctx) {
  std::vector<Violation> out;
  if (ctx.cluster && l.world > ctx.cluster->total_gpus()) {
    Add(&out, Rule::kWorldFitsCluster, "world " + Str(l.world) + " > " +
                                          Str(ctx.cluster->total_gpus()) + " GPUs in " +
                                          ctx.cluster->name);
  }
  if (l.pp < 1 || l.world % l.pp != 0) {
    Add(&out, Rule::kPpDividesWorld, "world " + Str(l.world) + " % pp " + Str(l.pp) + " != 0");
    return out;  // nothing below is meaningful without whole stages
  }
  if (l.vpp > 1 && l.pp == 1) Add(&out, Rule::kVppNeedsPp, "vpp " + Str(l.vpp) + " with pp 1");
  const long long stage = l.world / l.pp;
  // The model's rules read a few job fields (KV replication, MTP layers):
  // without a job, the defaults.
  static const JobSpec kNoJob;
  if (ctx.model) CheckModelRules(l, *ctx.model, ctx.job ? *ctx.job : kNoJob, WeightsOrDefault(ctx.weights), &out);
  // Checked products: a hand-built layout's degrees need not multiply to its world.
  auto product = [](const std::optional<int64_t>& p) { return p ? Str(*p) : "more than " + Str(kMaxWorldSize); };
  if (const auto dense = CheckedProduct({l.tp, l.cp, l.dp}); dense != stage) {
    Add(&out, Rule::kDenseProduct, "tp*cp*dp = " + product(dense) + " != world/pp = " + Str(stage));
  }
  if (ctx.job) CheckSequenceRules(l, ctx.job->seq_len, &out);
  if (const auto expert = CheckedProduct({l.etp, l.ep, l.edp}); expert != stage) {
    Add(&out, Rule::kExpertProduct, "etp*ep*edp = " + product(expert) + " != world/pp = " + Str(stage));
  }
  if (ctx.job) CheckBatchRules(l, ctx.job->global_batch, &out);
  CheckScheduleRule(l, ctx.job, &out);
  for (auto& v : CheckOrder(l)) out.push_back(std::move(v));
  if (l.placement == Placement::kPacked && ctx.cluster) {
    // Packing that cannot apply (a block larger than a domain) stays linear.
    const int block = HeavyBlock(l);
    const PackedBlocks packed = PackBlocks(l.world, block, ctx.cluster->nvlink_domain_gpus);
    const long long need = packed.gpus_needed;
    if (packed.packs && need > ctx.cluster->total_gpus()) {
      Add(&out, Rule::kPlacementFits,
          "packing " + Str(l.world) + " ranks in heavy blocks of " + Str(block) + " into " +
              Str(ctx.cluster->nvlink_domain_gpus) + "-GPU domains needs " + Str(need) +
              " GPUs, the cluster has " + Str(ctx.cluster->total_gpus()));
    }
  }
  if (ctx.cluster) {
    if (std::string why = rules::PrecisionProblem(ctx.cluster->gpu, l.precision); !why.empty()) {
      Add(&out, Rule::kPrecisionSupported, why);
    }
    if (l.dispatcher == Dispatcher::kHybridEP && !ExpertGroupInDomain(l, ctx.cluster->nvlink_domain_gpus)) {
      Add(&out, Rule::kHybridEpInDomain,
          "HybridEP runs over NVLink only, but expert TP x EP groups of " + Str(ExpertBlock(l)) +
              " ranks straddle " + Str(ctx.cluster->nvlink_domain_gpus) + "-GPU NVLink domains");
    }
  }
  if (l.tp_overlap && l.tp < 2) Add(&out, Rule::kTpOverlapNeedsTp, "tp_overlap with tp 1: nothing to overlap");
  if (ctx.model && ctx.job) {
    if (std::string why = rules::CudaGraphsProblem(*ctx.model, *ctx.job, l); !why.empty()) {
      Add(&out, Rule::kCudaGraphsMoeSync, why);
    }
  }
  if (auto v = MegatronRecipeProblem(l, ctx.job)) out.push_back(std::move(*v));
  if (ctx.job && ctx.job->trainer != Trainer::kMegatron) {
    for (Violation& v : CheckTrainer(ctx.job->trainer, l, {ctx.cluster, ctx.model, ctx.job})) out.push_back(std::move(v));
  }
  // Keep rule order regardless of which helper found what first.
  std::stable_sort(out.begin(), out.end(),
                   [](const Violation& a, const Violation& b) { return a.rule < b.rule; });
  return out;
}

}  // namespace foldplan
