// The megatron export (planner/export_megatron.cc): Megatron-LM's arguments
// for a layout, its refusals, the environment it asserts
// (CUDA_DEVICE_MAX_CONNECTIONS, set by every launcher output too) and the
// embedding groups its pretrain_gpt.py builds for tied and untied models.
// Facts read in Megatron-LM's sources at d98e8a64 (doc/trainers.md).
// tests/trainer_exports/megatron.py checks the same export from Python.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "export_fixtures.h"
#include "fixtures.h"
#include "planner/launch_files.h"
#include "planner/rank_export.h"
#include "planner/rank_map.h"
#include "planner/trainer_rules.h"
#include "text_count.h"

namespace foldplan {
namespace {

using testing::BuildMap;
using testing::ExportRefusal;
using testing::ExportText;

ModelSpec MgMoe(int layers, int experts) {
  ModelSpec m;
  m.name = "test-moe";
  m.layers = layers;
  m.heads = 16;
  m.kv_heads = 8;
  m.hidden = 1024;
  m.moe = MoeSpec{};
  m.moe->experts = experts;
  m.moe->top_k = 2;
  m.moe->ffn_hidden = 512;
  return m;
}

// MegatronArgs joined with "; " (ok), for finding one flag with its value.
std::string MgArgs(const RankMap& m, const ExportContext& ctx) {
  const Result<std::vector<std::string>> args = MegatronArgs(m, ctx);
  REQUIRE_MESSAGE(args.ok(), args.status().message());
  std::string out;
  for (const std::string& a : *args) out += a + "; ";
  return out;
}

// A layout of 16 ranks, pp 2, under `schedule` with the vpp it needs.
Layout MgScheduled(PipelineSchedule schedule) {
  Layout l = testing::MakeLayout(16, 1, 1, 2, 4, 1);
  l.vpp = schedule == PipelineSchedule::kInterleaved1F1B || schedule == PipelineSchedule::kDualPipeV ? 2 : 1;
  l.schedule = schedule;
  l.stage_layers.assign(static_cast<size_t>(l.pp * l.vpp), 2);
  return l;
}

TEST_CASE("export megatron: default order, tp-pp-dp order, odd orders") {
  JobSpec job;
  job.seq_len = 8192;
  job.global_batch = 256;
  SUBCASE("default order") {
    Layout l = testing::MakeLayout(16, 2, 2, 2, 4, 1);
    l.recompute = Recompute::Full();
    const std::string args = ExportText(BuildMap(l), ExportFormat::kMegatron, {nullptr, nullptr, &job});
    CHECK(testing::Contains(args, "--tensor-model-parallel-size 2 \\\n"));
    CHECK(testing::Contains(args, "--context-parallel-size 2 \\\n--cp-comm-type a2a \\\n"));
    CHECK(testing::Contains(args, "--expert-model-parallel-size 4 \\\n"));
    CHECK(testing::Contains(args, "--expert-tensor-parallel-size 1 \\\n"));
    CHECK(testing::Contains(args, "--sequence-parallel \\\n"));
    CHECK(testing::Contains(
        args, "--recompute-granularity full \\\n--recompute-method uniform \\\n--recompute-num-layers 1"));
    CHECK(testing::Contains(args, "--seq-length 8192"));
    CHECK(testing::Contains(args, "--moe-token-dispatcher-type alltoall"));
    CHECK_FALSE(testing::Contains(args, "--use-tp-pp-dp-mapping"));
  }
  SUBCASE("tp-cp-ep-pp-dp gets --use-tp-pp-dp-mapping") {
    Layout l = testing::MakeLayout(16, 2, 2, 2, 4, 1, kPpDpOrder);
    l.cp_style = CpStyle::kRing;
    const std::string args = ExportText(BuildMap(l), ExportFormat::kMegatron, {nullptr, nullptr, &job});
    CHECK(testing::Contains(args, "--use-tp-pp-dp-mapping \\\n"));
    CHECK(testing::Contains(args, "--cp-comm-type p2p"));
  }
  SUBCASE("an order Megatron cannot number is refused") {
    const RankMap m = BuildMap(testing::MakeLayout(16, 2, 2, 2, 2, 1, "tp-dp-cp-ep-pp"));
    CHECK(testing::Contains(ExportRefusal(m, ExportFormat::kMegatron), "megatron cannot express this layout"));
    CHECK(testing::Contains(ExportRefusal(m, ExportFormat::kMegatron), "order 'tp-dp-cp-ep-pp'"));
  }
  SUBCASE("an odd spelling with the default order's groups is accepted") {
    // cp = ep = 1: "tp-dp-pp" numbers ranks exactly like tp-cp-ep-dp-pp.
    const std::string args =
        ExportText(BuildMap(testing::MakeLayout(16, 2, 1, 2, 1, 2, "tp-dp-pp")), ExportFormat::kMegatron);
    CHECK_FALSE(testing::Contains(args, "--use-tp-pp-dp-mapping"));
    CHECK(testing::Contains(args, "# no job given"));
  }
  SUBCASE("virtual pipeline, even and uneven") {
    Layout l = testing::MakeLayout(16, 2, 2, 2, 4, 1);
    l.vpp = 2;
    l.stage_layers = {3, 3, 3, 3};
    CHECK(testing::Contains(ExportText(BuildMap(l), ExportFormat::kMegatron), "--num-layers-per-virtual-pipeline-stage 3"));
    l.stage_layers = {2, 3, 3, 2};
    CHECK(testing::Contains(ExportText(BuildMap(l), ExportFormat::kMegatron),
                   "--pipeline-model-parallel-layout \"Ett|(t*3|)*2ttL\""));
    l.stage_layers = {};
    const ModelSpec model = MgMoe(16, 8);
    CHECK(testing::Contains(ExportText(BuildMap(l), ExportFormat::kMegatron, {nullptr, &model, nullptr}),
                   "--num-layers-per-virtual-pipeline-stage 4"));
    CHECK(testing::Contains(ExportRefusal(BuildMap(l), ExportFormat::kMegatron), "give a model or stage layers"));
  }
  SUBCASE("uneven first and last stages without vpp") {
    Layout l = testing::MakeLayout(32, 1, 1, 4, 8, 1);
    l.stage_layers = {5, 6, 6, 3};
    const std::string args = ExportText(BuildMap(l, 4), ExportFormat::kMegatron);
    CHECK(testing::Contains(args, "--decoder-first-pipeline-num-layers 5"));
    CHECK(testing::Contains(args, "--decoder-last-pipeline-num-layers 3"));
  }
  SUBCASE("packed placement adds the launcher note") {
    // ep 6 blocks in 8-GPU domains: one block per domain, ranks 6..11 on GPUs 8..13.
    Layout l = testing::MakeLayout(12, 1, 1, 1, 6, 1);
    l.placement = Placement::kPacked;
    const RankMap m = BuildMap(l);
    CHECK(m.place(6).gpu == 8);
    const std::string args = ExportText(m, ExportFormat::kMegatron);
    CHECK(testing::Contains(args,
                   "# Placement 'packed': rank r must run on GPU gpu[r] of the rank map, not on GPU r\n"));
    CHECK(testing::Contains(args, "The launcher must place ranks per the rank map"));
    CHECK(testing::Contains(args, "--expert-model-parallel-size 6 \\\n"));
  }
  SUBCASE("packed placement that moves nothing says so") {
    Layout l = testing::MakeLayout(16, 2, 2, 2, 4, 1);
    l.placement = Placement::kPacked;
    CHECK(testing::Contains(ExportText(BuildMap(l), ExportFormat::kMegatron),
                   "# Placement 'packed' puts rank r on GPU r here"));
  }
  SUBCASE("each FP8 precision names its --fp8-recipe") {
    const std::pair<Precision, const char*> recipes[] = {{Precision::kFP8Delayed, "delayed"},
                                                         {Precision::kFP8Tensorwise, "tensorwise"},
                                                         {Precision::kFP8Blockwise, "blockwise"},
                                                         {Precision::kMXFP8, "mxfp8"}};
    for (const auto& [precision, recipe] : recipes) {
      Layout l = testing::MakeLayout(16, 2, 2, 2, 4, 1);
      l.precision = precision;
      const std::string args = ExportText(BuildMap(l), ExportFormat::kMegatron);
      CHECK(testing::Contains(args, "--fp8-format hybrid \\\n--fp8-recipe " + std::string(recipe) + " \\\n"));
    }
    CHECK_FALSE(testing::Contains(ExportText(BuildMap(testing::MakeLayout(16, 2, 2, 2, 4, 1)), ExportFormat::kMegatron), "--fp8"));
  }
}

TEST_CASE("export megatron names the job's attention backend") {
  // Megatron's --attention-backend: fused (Transformer Engine's cuDNN
  // attention) for te-cudnn, flash for flash2 and flash3; nothing without
  // a job (nothing was planned with one).
  const RankMap m = BuildMap(testing::MakeLayout(16, 2, 2, 2, 4, 1));
  JobSpec job = testing::MakeJob();
  CHECK(job.attention_backend == AttentionBackend::kTeCudnn);
  const std::pair<AttentionBackend, const char*> flags[] = {{AttentionBackend::kTeCudnn, "fused"},
                                                            {AttentionBackend::kFlash2, "flash"},
                                                            {AttentionBackend::kFlash3, "flash"}};
  for (const auto& [backend, flag] : flags) {
    job.attention_backend = backend;
    const std::string args = ExportText(m, ExportFormat::kMegatron, {nullptr, nullptr, &job});
    CHECK(testing::Contains(args, "--bf16 \\\n--attention-backend " + std::string(flag) + " \\\n"));
    CHECK(testing::Contains(args, "# attention flash3") == (backend == AttentionBackend::kFlash3));
  }
  CHECK_FALSE(testing::Contains(ExportText(m, ExportFormat::kMegatron), "--attention-backend"));
}

TEST_CASE("export megatron prints MegatronArgs, one per line after its comments") {
  const ModelSpec model = MgMoe(16, 12);
  const JobSpec job = testing::MakeJob();
  Layout l = testing::MakeLayout(12, 1, 1, 1, 6, 1);
  l.placement = Placement::kPacked;  // comment lines about the placement too
  const RankMap m = BuildMap(l);
  const ExportContext ctx{nullptr, &model, &job};
  Result<std::vector<std::string>> args = MegatronArgs(m, ctx);
  REQUIRE(args.ok());
  REQUIRE(!args->empty());
  std::string lines;
  for (size_t i = 0; i < args->size(); ++i) lines += (*args)[i] + (i + 1 < args->size() ? " \\\n" : "\n");
  const std::string text = ExportText(m, ExportFormat::kMegatron, ctx);
  REQUIRE(text.size() > lines.size());
  CHECK(text.substr(text.size() - lines.size()) == lines);
  CHECK(text[text.size() - lines.size() - 1] == '\n');
  const std::string head = text.substr(0, text.size() - lines.size());
  for (size_t start = 0; start < head.size(); start = head.find('\n', start) + 1) CHECK(head[start] == '#');
  // A refusal is the same either way.
  const RankMap odd = BuildMap(testing::MakeLayout(16, 2, 2, 2, 2, 1, "tp-dp-cp-ep-pp"));
  CHECK(MegatronArgs(odd, {}).status().message() == ExportRefusal(odd, ExportFormat::kMegatron));
}

TEST_CASE("export megatron: CUDA graphs as --cuda-graph-impl and --cuda-graph-modules") {
  const ModelSpec model = MgMoe(16, 12);
  const JobSpec job = testing::MakeJob();
  const ExportContext ctx{nullptr, &model, &job};
  Layout l = testing::MakeLayout(12, 1, 1, 1, 6, 1);
  auto flags = [&](const CudaGraphs& g) {
    l.cuda_graphs = g;
    std::string out;
    const RankMap map = BuildMap(l);
    const Result<std::vector<std::string>> args = MegatronArgs(map, ctx);
    REQUIRE(args.ok());
    for (const std::string& a : args.value()) {
      if (a.rfind("--cuda-graph", 0) == 0) out += (out.empty() ? "" : "; ") + a;
    }
    return out;
  };
  CHECK(flags(CudaGraphs::None()) == "");
  CHECK(flags(ParseCudaGraphs("attn+moe_router+moe_preprocess").value()) ==
        "--cuda-graph-impl transformer_engine; --cuda-graph-modules attn moe_router moe_preprocess");
  CHECK(flags(CudaGraphs::Layer()) == "--cuda-graph-impl transformer_engine");  // no modules: the whole layer
  CHECK(flags(CudaGraphs::FullIteration()) == "--cuda-graph-impl full_iteration");
}

TEST_CASE("export megatron runs 1f1b and interleaved-1f1b and refuses the schedules it has no flag for") {
  CHECK(testing::Contains(ExportText(BuildMap(MgScheduled(PipelineSchedule::k1F1B)), ExportFormat::kMegatron),
                 "--pipeline-model-parallel-size 2"));
  CHECK(testing::Contains(ExportText(BuildMap(MgScheduled(PipelineSchedule::kInterleaved1F1B)), ExportFormat::kMegatron),
                 "--pipeline-model-parallel-size 2"));
  for (PipelineSchedule s : {PipelineSchedule::kGPipe, PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipeV}) {
    const std::string why = ExportRefusal(BuildMap(MgScheduled(s)), ExportFormat::kMegatron);
    CHECK(testing::Contains(why, "megatron cannot express this layout"));
    CHECK(testing::Contains(why, std::string("it has no flag for ") + Name(s)));
  }
}

TEST_CASE("export megatron: FSDP checkpoints as fsdp_dtensor, the distributed optimizer as Megatron's default") {
  // arguments.py ~1169 (d98e8a64) asserts --ckpt-format fsdp_dtensor with --use-megatron-fsdp.
  Layout l = testing::MakeLayout(16, 1, 1, 2, 4, 1);
  l.fsdp = true;
  const std::string fsdp = MgArgs(BuildMap(l), {});
  CHECK(testing::Contains(fsdp, "--use-megatron-fsdp; --data-parallel-sharding-strategy optim_grads_params; "
                                "--ckpt-format fsdp_dtensor; "));
  CHECK_FALSE(testing::Contains(fsdp, "--use-distributed-optimizer"));
  l.fsdp = false;
  const std::string zero1 = MgArgs(BuildMap(l), {});
  CHECK(testing::Contains(zero1, "--use-distributed-optimizer; "));
  CHECK_FALSE(testing::Contains(zero1, "--ckpt-format"));
}

TEST_CASE("export megatron: the flex dispatcher's SMs as --moe-flex-dispatcher-num-sms, never the deprecated flags") {
  JobSpec job = testing::MakeJob();
  job.deepep_sms = 24;
  job.hybridep_sms = 12;
  const ModelSpec model = MgMoe(16, 8);
  const ExportContext ctx{nullptr, &model, &job};
  Layout l = testing::MakeLayout(16, 1, 1, 2, 4, 1);
  l.dispatcher = Dispatcher::kDeepEP;
  const std::string deepep = MgArgs(BuildMap(l), ctx);
  CHECK(testing::Contains(deepep, "--moe-token-dispatcher-type flex; --moe-flex-dispatcher-backend deepep; "
                                  "--moe-flex-dispatcher-num-sms 24; "));
  l.dispatcher = Dispatcher::kHybridEP;
  const std::string hybridep = MgArgs(BuildMap(l), ctx);
  CHECK(testing::Contains(hybridep, "--moe-flex-dispatcher-backend hybridep; --moe-flex-dispatcher-num-sms 12; "));
  for (const std::string& args : {deepep, hybridep}) {
    CHECK_FALSE(testing::Contains(args, "--moe-deepep-num-sms"));
    CHECK_FALSE(testing::Contains(args, "--moe-hybridep-num-sms"));
  }
  // Without a job the SMs are unknown: no flag (Megatron's default).
  l.dispatcher = Dispatcher::kDeepEP;
  CHECK_FALSE(testing::Contains(MgArgs(BuildMap(l), {nullptr, &model, nullptr}), "num-sms"));
  // alltoall: no flex flags at all.
  l.dispatcher = Dispatcher::kAllToAll;
  CHECK_FALSE(testing::Contains(MgArgs(BuildMap(l), ctx), "--moe-flex"));
}

TEST_CASE("export megatron: --untie-embeddings-and-output-weights from the model's tied_embeddings") {
  const RankMap m = BuildMap(testing::MakeLayout(16, 1, 1, 2, 4, 1));
  ModelSpec model = MgMoe(16, 8);
  model.tied_embeddings = false;  // Mixtral, DeepSeek-V3, Qwen3
  CHECK(testing::Contains(MgArgs(m, {nullptr, &model, nullptr}), "--untie-embeddings-and-output-weights; "));
  model.tied_embeddings = true;  // GPT-3: Megatron's default, no flag
  CHECK_FALSE(testing::Contains(MgArgs(m, {nullptr, &model, nullptr}), "--untie"));
  // Without a model: Megatron's default, and a comment says how to untie.
  CHECK_FALSE(testing::Contains(MgArgs(m, {}), "--untie"));
  CHECK(testing::Contains(ExportText(m, ExportFormat::kMegatron),
                          "(tied: add --untie-embeddings-and-output-weights for an untied model)"));
}

TEST_CASE("export megatron refuses what Megatron's own validation refuses (TrainerRefusal)") {
  JobSpec job = testing::MakeJob();
  const ModelSpec model = MgMoe(16, 8);
  Layout l = testing::MakeLayout(16, 1, 1, 2, 4, 1);
  // The DeepEP backend refuses a padded capacity (transformer_config.py ~1758).
  l.dispatcher = Dispatcher::kDeepEP;
  job.capacity_factor = 1.5;
  const ExportContext ctx{nullptr, &model, &job};
  const RankMap deepep = BuildMap(l);
  const Status refusal = TrainerRefusal(Trainer::kMegatron, l, TrainerContext{nullptr, &model, &job});
  REQUIRE_FALSE(refusal.ok());
  const Result<std::vector<std::string>> args = MegatronArgs(deepep, ctx);
  REQUIRE_FALSE(args.ok());
  CHECK(args.status().message() == refusal.message());
  CHECK(testing::Contains(ExportRefusal(deepep, ExportFormat::kMegatron, ctx), "deepep_no_padding"));
  // HybridEP accepts it.
  l.dispatcher = Dispatcher::kHybridEP;
  CHECK(testing::Contains(MgArgs(BuildMap(l), ctx), "--moe-pad-expert-input-to-capacity"));
  // fp8-delayed refuses the moe_act recompute module (transformer_config.py ~2003).
  l.dispatcher = Dispatcher::kAllToAll;
  l.precision = Precision::kFP8Delayed;
  l.recompute = ParseRecompute("moe_act").value();
  CHECK_FALSE(MegatronArgs(BuildMap(l), ctx).ok());
}

TEST_CASE("export megatron: CUDA_DEVICE_MAX_CONNECTIONS=1 before the arguments when tp > 1 or cp > 1") {
  const std::string env = "# before the trainer starts: export CUDA_DEVICE_MAX_CONNECTIONS=1  # Megatron-LM asserts it";
  Layout l = testing::MakeLayout(16, 2, 1, 2, 4, 1);
  CHECK(NeedsOneCudaDeviceConnection(l));
  const std::string tp2 = ExportText(BuildMap(l), ExportFormat::kMegatron);
  REQUIRE(testing::Contains(tp2, env));
  CHECK(tp2.find(env) < tp2.find("--tensor-model-parallel-size"));
  l = testing::MakeLayout(16, 1, 2, 2, 4, 1);  // cp 2 alone
  CHECK(testing::Contains(ExportText(BuildMap(l), ExportFormat::kMegatron), env));
  l = testing::MakeLayout(16, 1, 1, 2, 4, 1);  // tp = cp = 1: Megatron asks nothing
  CHECK_FALSE(NeedsOneCudaDeviceConnection(l));
  CHECK_FALSE(testing::Contains(ExportText(BuildMap(l), ExportFormat::kMegatron), "CUDA_DEVICE_MAX_CONNECTIONS"));
  // Megatron-FSDP: not asserted, not set, and the comment says why.
  l = testing::MakeLayout(16, 2, 1, 2, 4, 1);
  l.fsdp = true;
  CHECK_FALSE(NeedsOneCudaDeviceConnection(l));
  const std::string fsdp = ExportText(BuildMap(l), ExportFormat::kMegatron);
  CHECK_FALSE(testing::Contains(fsdp, env));
  CHECK(testing::Contains(fsdp, "# CUDA_DEVICE_MAX_CONNECTIONS is not set to 1"));
  l.fsdp = false;
  l.a2a_overlap = true;
  CHECK_FALSE(NeedsOneCudaDeviceConnection(l));
}

// The launcher outputs of `map` on hosts n0, n1, ...: every format, and the
// slurm hint (the SLURM_HOSTFILE itself holds host names only).
struct MgLaunchTexts {
  std::string rankfile, hostfile, env, slurm, slurm_hint, rankfile_hint;
};
MgLaunchTexts MgLaunch(const RankMap& map) {
  const LaunchPlacement p = LaunchPlacementOf(map);
  std::vector<std::string> hosts;
  for (int i = 0; i < NodesUsed(p); ++i) hosts.push_back("n" + std::to_string(i));
  const Result<LaunchAssignment> a = AssignHosts(p, hosts, "hosts.txt");
  REQUIRE_MESSAGE(a.ok(), a.status().message());
  auto text = [&](LaunchFormat f) {
    const Result<std::string> t = LaunchFileText(*a, p, f);
    REQUIRE_MESSAGE(t.ok(), t.status().message());
    return *t;
  };
  return {text(LaunchFormat::kOpenMpiRankfile), text(LaunchFormat::kHostfile), text(LaunchFormat::kEnv),
          text(LaunchFormat::kSlurm), LaunchHint(*a, LaunchFormat::kSlurm, "FILE", p.env),
          LaunchHint(*a, LaunchFormat::kOpenMpiRankfile, "FILE", p.env)};
}

TEST_CASE("launch files set CUDA_DEVICE_MAX_CONNECTIONS=1 when tp > 1 or cp > 1, not when tp = cp = 1") {
  const MgLaunchTexts tp2 = MgLaunch(BuildMap(testing::MakeLayout(16, 2, 1, 2, 4, 1)));
  CHECK(testing::Contains(tp2.env, "\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\n"));
  CHECK(testing::Contains(tp2.env, "# CUDA_DEVICE_MAX_CONNECTIONS=1: Megatron-LM asserts it on Hopper when tp > 1 or cp > 1, "
                                   "without Megatron-FSDP"));
  CHECK(testing::Contains(tp2.rankfile, "# mpirun --rankfile THIS_FILE -np 16 -x CUDA_DEVICE_MAX_CONNECTIONS=1 "));
  CHECK(testing::Contains(tp2.rankfile, "# CUDA_DEVICE_MAX_CONNECTIONS=1 for every rank"));
  CHECK(testing::Contains(tp2.hostfile, "--map-by slot -np 16 -x CUDA_DEVICE_MAX_CONNECTIONS=1 "));
  CHECK(testing::Contains(tp2.rankfile_hint, " -x CUDA_DEVICE_MAX_CONNECTIONS=1 "));
  CHECK(testing::Contains(tp2.slurm_hint, " --export=ALL,CUDA_DEVICE_MAX_CONNECTIONS=1 "));
  CHECK_FALSE(testing::Contains(tp2.slurm, "CUDA"));  // SLURM_HOSTFILE: host names only
  // cp > 1 alone needs it too.
  CHECK(testing::Contains(MgLaunch(BuildMap(testing::MakeLayout(16, 1, 2, 2, 4, 1))).env,
                          "export CUDA_DEVICE_MAX_CONNECTIONS=1"));
  // The env script still selects each rank's GPU with it in place.
  CHECK(testing::Contains(tp2.env, "  9) FOLDPLAN_HOST=n1 LOCAL_RANK=1 CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 ;;\n"));

  const MgLaunchTexts none = MgLaunch(BuildMap(testing::MakeLayout(16, 1, 1, 2, 4, 1)));
  for (const std::string& text : {none.env, none.rankfile, none.hostfile, none.slurm, none.slurm_hint,
                                  none.rankfile_hint}) {
    CHECK_FALSE(testing::Contains(text, "CUDA_DEVICE_MAX_CONNECTIONS"));
  }
  CHECK(testing::Contains(none.slurm_hint, "srun --distribution=arbitrary -n 16 "));
}

TEST_CASE("rank map embedding groups: tied [first, last]; untied [first] plus the MTP stages") {
  // pp 4, tp 2 on 16 ranks: pp groups [0,4,8,12], [1,5,9,13], [2,6,10,14], [3,7,11,15].
  Layout l = testing::MakeLayout(16, 2, 1, 4, 2, 1);
  l.stage_layers = {4, 4, 4, 4};
  ModelSpec model = MgMoe(16, 8);
  model.mtp_layers = 1;
  const auto embedding = [&](const RankMap& m) { return m.groups(GroupKind::kEmbedding); };
  const Groups first_last = {{0, 12}, {1, 13}, {2, 14}, {3, 15}};
  const Groups first_only = {{0}, {1}, {2}, {3}};

  SUBCASE("tied: [first, last], whatever the MTP layers") {
    model.tied_embeddings = true;
    CHECK(embedding(BuildMap(l, 2, RankMapOptionsFor(&model))) == first_last);
    CHECK(embedding(BuildMap(l)) == first_last);  // no options: Megatron's default, tied
  }
  SUBCASE("untied, MTP on the default last stage: [first, last]") {
    CHECK(embedding(BuildMap(l, 2, RankMapOptionsFor(&model))) == first_last);
  }
  SUBCASE("untied without MTP: [first]") {
    model.mtp_layers = 0;
    CHECK(embedding(BuildMap(l, 2, RankMapOptionsFor(&model))) == first_only);
  }
  SUBCASE("untied, MTP on stage 2, the last holding the loss alone: [first, stage 2]") {
    // Megatron's layout grammar puts every m after every t: "Et*6|t*6|t*4m|L".
    l.stage_layers = {6, 6, 4, 0};
    l.stage_mtp = {0, 0, 1, 0};
    CHECK(EmbeddingStages(l, RankMapOptionsFor(&model)) == std::vector<int>{0, 2});
    const RankMap m = BuildMap(l, 2, RankMapOptionsFor(&model));
    CHECK(embedding(m) == Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}});
    CHECK(m.groups(GroupKind::kPositionEmbedding) == first_only);  // the input embedding's stage alone
    // The invariants hold, the JSON carries the groups, and Megatron still
    // numbers the ranks (its order match skips the embedding groups).
    const ExportContext ctx{nullptr, &model, nullptr};
    const nlohmann::json j = nlohmann::json::parse(ExportText(m, ExportFormat::kRankMap, ctx));
    CHECK(j["groups"]["embedding"] == nlohmann::json::parse("[[0,8],[1,9],[2,10],[3,11]]"));
    const std::string args = ExportText(m, ExportFormat::kMegatron, ctx);
    CHECK(testing::Contains(args, "--untie-embeddings-and-output-weights"));
    CHECK(testing::Contains(args, "--mtp-num-layers 1"));
    CHECK(testing::Contains(args, "--pipeline-model-parallel-layout \"Et*6|t*6|t*4m|L\""));
    // Tied, the same stages keep [first, last].
    model.tied_embeddings = true;
    CHECK(embedding(BuildMap(l, 2, RankMapOptionsFor(&model))) == first_last);
  }
  SUBCASE("untied, every layer and the MTP layer on the first stage: [first] alone") {
    l.stage_layers = {16, 0, 0, 0};
    l.stage_mtp = {1, 0, 0, 0};
    CHECK(EmbeddingStages(l, RankMapOptionsFor(&model)) == std::vector<int>{0});
  }
  SUBCASE("vpp 2: the MTP layer in virtual stage 6 sits on pipeline rank 2") {
    l.vpp = 2;
    l.stage_layers = {2, 2, 2, 2, 2, 2, 4, 0};
    l.stage_mtp = {0, 0, 0, 0, 0, 0, 1, 0};
    CHECK(embedding(BuildMap(l, 2, RankMapOptionsFor(&model))) == Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}});
  }
  SUBCASE("pp 1: the one rank") {
    const RankMap m = BuildMap(testing::MakeLayout(16, 2, 1, 1, 2, 1), 2, RankMapOptionsFor(&model));
    CHECK(embedding(m).size() == 16);  // one pp group of one rank per rank
    CHECK(embedding(m).front() == std::vector<int>{0});
  }
}

}  // namespace
}  // namespace foldplan
