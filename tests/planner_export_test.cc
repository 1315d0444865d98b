// Rank-map exports: the foldplan.rankmap/v1 JSON round trip, Megatron
// arguments, torch, torchtitan, OLMo-core, JAX and MaxText, and each
// refusal's reason. (tests/export_parse_check.py parses the trainer formats.)
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "fixtures.h"
#include "planner/rank_export.h"
#include "planner/rank_map.h"
#include "text_count.h"

namespace foldplan {
namespace {

using testing::Contains;
using testing::MakeLayout;
ClusterSpec Dgx(int nodes) { return testing::MakeCluster(nodes); }

ModelSpec Moe(int layers, int experts) {
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

RankMap Build(const Layout& l, int nodes = 2) {
  Result<RankMap> map = BuildRankMap(l, Dgx(nodes));
  REQUIRE_MESSAGE(map.ok(), map.status().message());
  return std::move(map).value();
}

std::string Export(const RankMap& m, ExportFormat f, const ExportContext& ctx = {}) {
  Result<std::string> out = ExportRankMap(m, f, ctx);
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  return *out;
}

std::string Refusal(const RankMap& m, ExportFormat f, const ExportContext& ctx = {}) {
  Result<std::string> out = ExportRankMap(m, f, ctx);
  REQUIRE_FALSE(out.ok());
  return out.status().message();
}

TEST_CASE("export: format names") {
  for (int i = 0; i < kExportFormatCount; ++i) {
    const auto f = static_cast<ExportFormat>(i);
    Result<ExportFormat> parsed = ParseExportFormat(Name(f));
    REQUIRE(parsed.ok());
    CHECK(*parsed == f);
  }
  Result<ExportFormat> bad = ParseExportFormat("deepspeed");
  REQUIRE_FALSE(bad.ok());
  CHECK(Contains(bad.status().message(), "rankmap, megatron, torch, torchtitan, olmo-core, jax, maxtext"));
}

TEST_CASE("export rankmap: valid JSON that round-trips every group") {
  Layout l = MakeLayout(16, 2, 2, 2, 4, 1);
  l.stage_layers = {4, 4};
  const RankMap m = Build(l, 4);
  const ClusterSpec cluster = Dgx(4);
  const ModelSpec model = Moe(8, 8);
  JobSpec job;
  const std::string text = Export(m, ExportFormat::kRankMap, {&cluster, &model, &job});
  const nlohmann::json j = nlohmann::json::parse(text);
  CHECK(j["schema"] == "foldplan.rankmap/v1");
  CHECK(j["world_size"] == 16);
  CHECK(j["degrees"]["edp"] == 2);
  CHECK(j["order"] == "tp-cp-ep-dp-pp");
  CHECK(j["stage_layers"] == nlohmann::json::array({4, 4}));
  CHECK(j["views"]["dense"]["dims"] == nlohmann::json::array({"pp", "dp", "cp", "tp"}));
  CHECK(j["views"]["expert"]["shape"] == nlohmann::json::array({2, 2, 4, 1}));
  CHECK(j["views"]["dense"]["ranks"].get<std::vector<int>>() == m.dense_view());
  CHECK(j["views"]["expert"]["ranks"].get<std::vector<int>>() == m.expert_view());
  REQUIRE(j["groups"].size() == static_cast<size_t>(kGroupKindCount));
  for (int i = 0; i < kGroupKindCount; ++i) {
    const auto kind = static_cast<GroupKind>(i);
    CHECK(j["groups"][Name(kind)].get<Groups>() == m.groups(kind));
  }
  // Group kinds appear in GroupKind order in the text.
  CHECK(text.find("\"tp\": [[0, 1]") == std::string::npos);  // one group per line, not all on one
  const size_t groups_at = text.find("\"groups\": {");
  CHECK(text.find("\"dp_cp\": [", groups_at) < text.find("\"edp\": [", groups_at));
  CHECK(Contains(text, "      [0, 2, 4, 6],\n"));
  CHECK(j["roles"]["loss_and_dense_grads"] == "dp_cp");
  CHECK(j["placement"]["kind"] == "linear");
  CHECK(j["placement"]["gpu"].size() == 16);
  CHECK(j["placement"]["rail"][9] == 1);
  CHECK(j["idle_gpus"] == 16);
  CHECK(j["straddles"].empty());
  CHECK(j["expert_owner"]["local_experts"] == 2);
  CHECK(j["expert_owner"]["first_expert"][5] == 2);  // rank 5 has ep coordinate 1
  CHECK(j["invariants"].size() == RankMapInvariants().size());
  CHECK(j["coords"]["edp"][4] == 1);
}

TEST_CASE("export rankmap: experts not divisible by ep is an error") {
  const RankMap m = Build(MakeLayout(16, 2, 2, 2, 4, 1));
  const ModelSpec model = Moe(8, 6);
  CHECK(Contains(Refusal(m, ExportFormat::kRankMap, {nullptr, &model, nullptr}),
                 "6 experts, not divisible by ep 4"));
}

TEST_CASE("export megatron: default order, tp-pp-dp order, odd orders") {
  JobSpec job;
  job.seq_len = 8192;
  job.global_batch = 256;
  SUBCASE("default order") {
    Layout l = MakeLayout(16, 2, 2, 2, 4, 1);
    l.recompute = Recompute::Full();
    const std::string args = Export(Build(l), ExportFormat::kMegatron, {nullptr, nullptr, &job});
    CHECK(Contains(args, "--tensor-model-parallel-size 2 \\\n"));
    CHECK(Contains(args, "--context-parallel-size 2 \\\n--cp-comm-type a2a \\\n"));
    CHECK(Contains(args, "--expert-model-parallel-size 4 \\\n"));
    CHECK(Contains(args, "--expert-tensor-parallel-size 1 \\\n"));
    CHECK(Contains(args, "--sequence-parallel \\\n"));
    CHECK(Contains(
        args, "--recompute-granularity full \\\n--recompute-method uniform \\\n--recompute-num-layers 1"));
    CHECK(Contains(args, "--seq-length 8192"));
    CHECK(Contains(args, "--moe-token-dispatcher-type alltoall"));
    CHECK_FALSE(Contains(args, "--use-tp-pp-dp-mapping"));
  }
  SUBCASE("tp-cp-ep-pp-dp gets --use-tp-pp-dp-mapping") {
    Layout l = MakeLayout(16, 2, 2, 2, 4, 1, kPpDpOrder);
    l.cp_style = CpStyle::kRing;
    const std::string args = Export(Build(l), ExportFormat::kMegatron, {nullptr, nullptr, &job});
    CHECK(Contains(args, "--use-tp-pp-dp-mapping \\\n"));
    CHECK(Contains(args, "--cp-comm-type p2p"));
  }
  SUBCASE("an order Megatron cannot number is refused") {
    const RankMap m = Build(MakeLayout(16, 2, 2, 2, 2, 1, "tp-dp-cp-ep-pp"));
    CHECK(Contains(Refusal(m, ExportFormat::kMegatron), "megatron cannot express this layout"));
    CHECK(Contains(Refusal(m, ExportFormat::kMegatron), "order 'tp-dp-cp-ep-pp'"));
  }
  SUBCASE("an odd spelling with the default order's groups is accepted") {
    // cp = ep = 1: "tp-dp-pp" numbers ranks exactly like tp-cp-ep-dp-pp.
    const std::string args =
        Export(Build(MakeLayout(16, 2, 1, 2, 1, 2, "tp-dp-pp")), ExportFormat::kMegatron);
    CHECK_FALSE(Contains(args, "--use-tp-pp-dp-mapping"));
    CHECK(Contains(args, "# no job given"));
  }
  SUBCASE("virtual pipeline, even and uneven") {
    Layout l = MakeLayout(16, 2, 2, 2, 4, 1);
    l.vpp = 2;
    l.stage_layers = {3, 3, 3, 3};
    CHECK(Contains(Export(Build(l), ExportFormat::kMegatron), "--num-layers-per-virtual-pipeline-stage 3"));
    l.stage_layers = {2, 3, 3, 2};
    CHECK(Contains(Export(Build(l), ExportFormat::kMegatron),
                   "--pipeline-model-parallel-layout \"Ett|(t*3|)*2ttL\""));
    l.stage_layers = {};
    const ModelSpec model = Moe(16, 8);
    CHECK(Contains(Export(Build(l), ExportFormat::kMegatron, {nullptr, &model, nullptr}),
                   "--num-layers-per-virtual-pipeline-stage 4"));
    CHECK(Contains(Refusal(Build(l), ExportFormat::kMegatron), "give a model or stage layers"));
  }
  SUBCASE("uneven first and last stages without vpp") {
    Layout l = MakeLayout(32, 1, 1, 4, 8, 1);
    l.stage_layers = {5, 6, 6, 3};
    const std::string args = Export(Build(l, 4), ExportFormat::kMegatron);
    CHECK(Contains(args, "--decoder-first-pipeline-num-layers 5"));
    CHECK(Contains(args, "--decoder-last-pipeline-num-layers 3"));
  }
  SUBCASE("packed placement adds the launcher note") {
    // ep 6 blocks in 8-GPU domains: one block per domain, ranks 6..11 on GPUs 8..13.
    Layout l = MakeLayout(12, 1, 1, 1, 6, 1);
    l.placement = Placement::kPacked;
    const RankMap m = Build(l);
    CHECK(m.place(6).gpu == 8);
    const std::string args = Export(m, ExportFormat::kMegatron);
    CHECK(Contains(args,
                   "# Placement 'packed': rank r must run on GPU gpu[r] of the rank map, not on GPU r\n"));
    CHECK(Contains(args, "The launcher must place ranks per the rank map"));
    CHECK(Contains(args, "--expert-model-parallel-size 6 \\\n"));
  }
  SUBCASE("packed placement that moves nothing says so") {
    Layout l = MakeLayout(16, 2, 2, 2, 4, 1);
    l.placement = Placement::kPacked;
    CHECK(Contains(Export(Build(l), ExportFormat::kMegatron),
                   "# Placement 'packed' puts rank r on GPU r here"));
  }
  SUBCASE("each FP8 precision names its --fp8-recipe") {
    const std::pair<Precision, const char*> recipes[] = {{Precision::kFP8Delayed, "delayed"},
                                                         {Precision::kFP8Tensorwise, "tensorwise"},
                                                         {Precision::kFP8Blockwise, "blockwise"},
                                                         {Precision::kMXFP8, "mxfp8"}};
    for (const auto& [precision, recipe] : recipes) {
      Layout l = MakeLayout(16, 2, 2, 2, 4, 1);
      l.precision = precision;
      const std::string args = Export(Build(l), ExportFormat::kMegatron);
      CHECK(Contains(args, "--fp8-format hybrid \\\n--fp8-recipe " + std::string(recipe) + " \\\n"));
    }
    CHECK_FALSE(Contains(Export(Build(MakeLayout(16, 2, 2, 2, 4, 1)), ExportFormat::kMegatron), "--fp8"));
  }
}

TEST_CASE("export megatron names the job's attention backend") {
  // Megatron's --attention-backend: fused (Transformer Engine's cuDNN
  // attention) for te-cudnn, flash for flash2 and flash3; nothing without
  // a job (nothing was planned with one).
  const RankMap m = Build(MakeLayout(16, 2, 2, 2, 4, 1));
  JobSpec job = testing::MakeJob();
  CHECK(job.attention_backend == AttentionBackend::kTeCudnn);
  const std::pair<AttentionBackend, const char*> flags[] = {{AttentionBackend::kTeCudnn, "fused"},
                                                            {AttentionBackend::kFlash2, "flash"},
                                                            {AttentionBackend::kFlash3, "flash"}};
  for (const auto& [backend, flag] : flags) {
    job.attention_backend = backend;
    const std::string args = Export(m, ExportFormat::kMegatron, {nullptr, nullptr, &job});
    CHECK(Contains(args, "--bf16 \\\n--attention-backend " + std::string(flag) + " \\\n"));
    CHECK(Contains(args, "# attention flash3") == (backend == AttentionBackend::kFlash3));
  }
  CHECK_FALSE(Contains(Export(m, ExportFormat::kMegatron), "--attention-backend"));
}

TEST_CASE("export megatron prints MegatronArgs, one per line after its comments") {
  const ModelSpec model = Moe(16, 12);
  const JobSpec job = testing::MakeJob();
  Layout l = MakeLayout(12, 1, 1, 1, 6, 1);
  l.placement = Placement::kPacked;  // comment lines about the placement too
  const RankMap m = Build(l);
  const ExportContext ctx{nullptr, &model, &job};
  Result<std::vector<std::string>> args = MegatronArgs(m, ctx);
  REQUIRE(args.ok());
  REQUIRE(!args->empty());
  std::string lines;
  for (size_t i = 0; i < args->size(); ++i) lines += (*args)[i] + (i + 1 < args->size() ? " \\\n" : "\n");
  const std::string text = Export(m, ExportFormat::kMegatron, ctx);
  REQUIRE(text.size() > lines.size());
  CHECK(text.substr(text.size() - lines.size()) == lines);
  CHECK(text[text.size() - lines.size() - 1] == '\n');
  const std::string head = text.substr(0, text.size() - lines.size());
  for (size_t start = 0; start < head.size(); start = head.find('\n', start) + 1) CHECK(head[start] == '#');
  // A refusal is the same either way.
  const RankMap odd = Build(MakeLayout(16, 2, 2, 2, 2, 1, "tp-dp-cp-ep-pp"));
  CHECK(MegatronArgs(odd, {}).status().message() == Refusal(odd, ExportFormat::kMegatron));
}

TEST_CASE("export megatron: CUDA graphs as --cuda-graph-impl and --cuda-graph-modules") {
  const ModelSpec model = Moe(16, 12);
  const JobSpec job = testing::MakeJob();
  const ExportContext ctx{nullptr, &model, &job};
  Layout l = MakeLayout(12, 1, 1, 1, 6, 1);
  auto flags = [&](const CudaGraphs& g) {
    l.cuda_graphs = g;
    std::string out;
    const RankMap map = Build(l);
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

TEST_CASE("export torch: DeviceMeshes from the real rank arrays") {
  const RankMap m = Build(MakeLayout(16, 2, 2, 2, 4, 1, kPpDpOrder));
  const std::string py = Export(m, ExportFormat::kTorch);
  CHECK(Contains(py, "from torch.distributed.device_mesh import DeviceMesh"));
  CHECK(Contains(py, "init_process_group"));
  // Dense view of the tp-pp-dp order: (p, d, c, t) -> t + 2c + 4p + 8d.
  CHECK(Contains(py,
                 "dense_ranks = torch.tensor([0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, "
                 "15]).reshape(2, 2, 2, 2)"));
  CHECK(Contains(py, "mesh_dim_names=(\"pp\", \"edp\", \"ep\", \"etp\")"));
  CHECK(Contains(py, "dense_mesh[\"dp\", \"cp\"]._flatten(\"dp_cp\")"));
  CHECK(Contains(py, "new_subgroups_by_enumeration(\n    [[0, 4],\n    [1, 5]"));
}

TEST_CASE("export torchtitan: expressible layouts and refusals") {
  SUBCASE("ring cp, etp = tp, pp outermost") {
    Layout l = MakeLayout(32, 2, 2, 2, 4, 2);  // dp 4; ep 4 borrows dp_shard_in_ep 2 x cp 2
    l.cp_style = CpStyle::kRing;
    const std::string toml = Export(Build(l, 4), ExportFormat::kTorchtitan);
    CHECK(Contains(toml, "[parallelism]\n"));
    CHECK(Contains(toml, "data_parallel_shard_degree = 4\n"));
    CHECK(Contains(toml, "context_parallel_degree = 2\n"));
    CHECK(Contains(toml, "expert_parallel_degree = 4\n"));
    CHECK(Contains(toml, "expert_tensor_parallel_degree = 2\n"));
    CHECK(Contains(toml, "pipeline_parallel_schedule = \"1F1B\"\n"));
  }
  SUBCASE("etp 1 with ep spanning cp x tp") {
    Layout l = MakeLayout(16, 2, 1, 1, 4, 1);
    CHECK(Contains(Export(Build(l), ExportFormat::kTorchtitan), "expert_tensor_parallel_degree = 1\n"));
  }
  SUBCASE("ulysses cp is refused") {
    const std::string why = Refusal(Build(MakeLayout(16, 2, 2, 2, 4, 1)), ExportFormat::kTorchtitan);
    CHECK(Contains(why, "torchtitan cannot express this layout"));
    CHECK(Contains(why, "ring attention only"));
  }
  SUBCASE("etp neither 1 nor tp is refused") {
    Layout l = MakeLayout(16, 4, 1, 1, 2, 2);
    CHECK(Contains(Refusal(Build(l), ExportFormat::kTorchtitan), "must be 1 or tp 4"));
  }
  SUBCASE("ep not a multiple of cp is refused") {
    Layout l = MakeLayout(16, 1, 4, 1, 2, 1);
    l.cp_style = CpStyle::kRing;
    CHECK(Contains(Refusal(Build(l), ExportFormat::kTorchtitan), "ep 2 must be a multiple of cp 4"));
  }
  SUBCASE("pp not outermost gives other groups and is refused") {
    const Layout l = MakeLayout(16, 1, 1, 2, 1, 1, kPpDpOrder);  // dp = edp = 8
    const std::string why = Refusal(Build(l), ExportFormat::kTorchtitan);
    CHECK(Contains(why, "pp outermost"));
    CHECK(Contains(why,
                   "dp groups differ: this layout has [0, 2, 4, 6, 8, 10, 12, 14], torchtitan has [0, 1, 2, "
                   "3, 4, 5, 6, 7]"));
  }
}

TEST_CASE("export olmo-core: its configs for tp, cp, ep, pp and recompute; etp > 1 and pp inner refused") {
  SUBCASE("tp 2 and Ulysses cp 2 become TransformerTensorParallelConfig and .ulysses") {
    const ModelSpec model = Moe(8, 16);
    Layout l = MakeLayout(16, 2, 2, 2, 4, 1);  // dp 2, edp 2
    l.recompute = Recompute::Full();
    const std::string py = Export(Build(l), ExportFormat::kOlmoCore, {nullptr, &model, nullptr});
    CHECK(Contains(py, "from olmo_core.train.train_module.transformer.config import (\n"));
    CHECK(Contains(py, "tp_config = TransformerTensorParallelConfig(degree=2)\n"));
    CHECK(Contains(py, "cp_config = TransformerContextParallelConfig.ulysses(degree=2)"));
    CHECK(Contains(py, "ep_config = TransformerExpertParallelConfig(degree=4)  # 4 local experts; ep_dp 2\n"));
    CHECK(Contains(py, "degree=2, schedule=PipelineScheduleType.single_1F1B"));
    CHECK(Contains(py, "dp_config = TransformerDataParallelConfig(name=DataParallelType.ddp)\n"));
    CHECK(Contains(py, "mode=TransformerActivationCheckpointingMode.full"));
  }
  SUBCASE("ring cp is zig-zag; fsdp shards over dp; selective recompute names modules") {
    Layout l = MakeLayout(16, 1, 2, 2, 4, 1);  // dp 4
    l.cp_style = CpStyle::kRing;
    l.fsdp = true;
    l.recompute = Recompute::Selective().With(RecomputeModule::kLayernorm);
    const std::string py = Export(Build(l), ExportFormat::kOlmoCore);
    CHECK(Contains(py, "cp_config = TransformerContextParallelConfig.zig_zag(degree=2)\n"));
    CHECK(Contains(py, "name=DataParallelType.fsdp, num_replicas=1, shard_degree=4)"));
    CHECK(Contains(py, "mode=TransformerActivationCheckpointingMode.selected_modules"));
    CHECK(Contains(py, "modules=[\"blocks.*.attention\", \"blocks.*.attention_norm\", \"blocks.*.feed_forward_norm\"])"));
  }
  SUBCASE("etp > 1 is refused naming the expert config") {
    const std::string why = Refusal(Build(MakeLayout(16, 2, 1, 2, 4, 2)), ExportFormat::kOlmoCore);
    CHECK(Contains(why, "olmo-core cannot express this layout"));
    CHECK(Contains(why, "TransformerExpertParallelConfig has only a degree"));
  }
  SUBCASE("pp-dp order with pp > 1 is refused") {
    Layout l = MakeLayout(16, 1, 1, 2, 1, 1, kPpDpOrder);
    CHECK(Contains(Refusal(Build(l), ExportFormat::kOlmoCore), "pp outermost"));
  }
}

TEST_CASE("export torchtitan: recompute becomes [activation_checkpoint] and an even split a layer count") {
  Layout l = MakeLayout(16, 1, 1, 2, 4, 1);
  CHECK(Contains(Export(Build(l), ExportFormat::kTorchtitan), "[activation_checkpoint]\nmode = \"none\"\n"));
  l.recompute = Recompute::Full();
  CHECK(Contains(Export(Build(l), ExportFormat::kTorchtitan), "mode = \"full\"\n"));
  l.recompute = Recompute::Selective();
  l.stage_layers = {6, 6};
  std::string toml = Export(Build(l), ExportFormat::kTorchtitan);
  CHECK(Contains(toml, "mode = \"selective\"\nselective_ac_option = \"op\"\n"));
  CHECK(Contains(toml, "pipeline_parallel_layers_per_stage = 6\n"));
  l.stage_layers = {5, 7};  // uneven: only a comment
  toml = Export(Build(l), ExportFormat::kTorchtitan);
  CHECK_FALSE(Contains(toml, "pipeline_parallel_layers_per_stage ="));
  CHECK(Contains(toml, "foldplan's split: 5 7."));
}

TEST_CASE("export jax: one mesh whose axes are both views' rank digits") {
  SUBCASE("tp2 cp2 pp2 | ep4 etp1: ep is the product of the tp and cp digits") {
    // Dense digits (fastest first) tp 2, cp 2, dp 2, pp 2; expert etp 1, ep 4,
    // edp 2, pp 2: cuts at strides 1, 2, 4, 8, 16 give four axes of 2 and
    // ep = tp_ep x cp_ep. Two 8-GPU domains: pp across (DCN), the rest inside.
    const std::string py = Export(Build(MakeLayout(16, 2, 2, 2, 4, 1)), ExportFormat::kJax);
    CHECK(Contains(py, "axis_names = (\"pp\", \"dp_edp\", \"cp_ep\", \"tp_ep\")\n"));
    CHECK(Contains(py, "mesh_shape = (2, 2, 2, 2)\n"));
    CHECK(Contains(py, "ici_shape = (1, 2, 2, 2)\ndcn_shape = (2, 1, 1, 1)\n"));
    CHECK(Contains(py, "EP = (\"cp_ep\", \"tp_ep\")\n"));
    CHECK(Contains(py, "TP = \"tp_ep\"\n"));
    CHECK(Contains(py, "expert_w_in = P(EP, None, ETP)"));
  }
  SUBCASE("digits that do not nest are refused") {
    // tp 2 ends at stride 2, ep 3 ends (edp starts) at stride 3: ep is no product of mesh axes.
    Result<RankMap> m = BuildRankMap(MakeLayout(12, 2, 1, 1, 3, 1), testing::MakeCluster(2));
    REQUIRE(m.ok());
    const std::string why = Refusal(m.value(), ExportFormat::kJax);
    CHECK(Contains(why, "jax cannot express this layout"));
    CHECK(Contains(why, "tp's digit boundary at rank stride 2 and edp's at stride 3 do not nest"));
  }
}

TEST_CASE("export maxtext: ici and dcn settings whose products are the degrees") {
  SUBCASE("ep folds dp: dp 8 = fsdp 2 x expert 4, pp across nodes") {
    Layout l = MakeLayout(16, 1, 1, 2, 4, 1);
    l.fsdp = true;
    const std::string y = Export(Build(l), ExportFormat::kMaxText);
    CHECK(Contains(y, "ici_fsdp_parallelism: 2\n"));
    CHECK(Contains(y, "ici_expert_parallelism: 4\n"));
    CHECK(Contains(y, "ici_pipeline_parallelism: 1\n"));
    CHECK(Contains(y, "dcn_pipeline_parallelism: 2\n"));
  }
  SUBCASE("etp != tp is refused") {
    CHECK(Contains(Refusal(Build(MakeLayout(16, 2, 1, 2, 4, 1)), ExportFormat::kMaxText), "etp must equal tp 2"));
  }
  SUBCASE("ep over cp is refused: MaxText's expert axis holds no context rank") {
    Layout l = MakeLayout(16, 1, 2, 2, 4, 1);  // dp 4, ep 4 = cp 2 x 2 of dp
    const std::string why = Refusal(Build(l), ExportFormat::kMaxText);
    CHECK(Contains(why, "maxtext cannot express this layout"));
    CHECK(Contains(why, "groups differ"));
  }
  SUBCASE("data outside stage: pure dp with pp > 1 needs pp inside dp") {
    CHECK(Contains(Refusal(Build(MakeLayout(16, 2, 1, 2, 1, 2)), ExportFormat::kMaxText), "data outside stage"));
    CHECK(Contains(Export(Build(MakeLayout(16, 2, 1, 2, 1, 2, kPpDpOrder)), ExportFormat::kMaxText),
                   "ici_data_parallelism: 2\n"));
  }
}

// A layout of 16 ranks, pp 2, that torchtitan and OLMo-core accept (ring
// CP or none, tp 1), under `schedule` with the vpp it needs.
Layout Scheduled(PipelineSchedule schedule) {
  Layout l = MakeLayout(16, 1, 1, 2, 4, 1);
  l.vpp = schedule == PipelineSchedule::kInterleaved1F1B || schedule == PipelineSchedule::kDualPipeV ? 2 : 1;
  l.schedule = schedule;
  l.stage_layers.assign(static_cast<size_t>(l.pp * l.vpp), 2);
  return l;
}

TEST_CASE("export torchtitan names each schedule as torch.distributed.pipelining does, and refuses zb-h1") {
  const std::pair<PipelineSchedule, const char*> expected[] = {{PipelineSchedule::k1F1B, "1F1B"},
                                                               {PipelineSchedule::kInterleaved1F1B, "Interleaved1F1B"},
                                                               {PipelineSchedule::kGPipe, "GPipe"},
                                                               {PipelineSchedule::kDualPipeV, "DualPipeV"}};
  // Not a structured binding: CAPTURE's lambda cannot name one before clang 16.
  for (const auto& e : expected) {
    const PipelineSchedule schedule = e.first;
    const char* name = e.second;
    CAPTURE(Name(schedule));
    CHECK(Contains(Export(Build(Scheduled(schedule)), ExportFormat::kTorchtitan),
                   "pipeline_parallel_schedule = \"" + std::string(name) + "\"\n"));
  }
  const std::string why = Refusal(Build(Scheduled(PipelineSchedule::kZeroBubbleH1)), ExportFormat::kTorchtitan);
  CHECK(Contains(why, "torchtitan cannot express this layout"));
  CHECK(Contains(why, "none runs zb-h1 with one stage per rank"));
  CHECK(Contains(why, "torchtitan runs 1F1B, Interleaved1F1B, GPipe, DualPipeV"));
}

TEST_CASE("export olmo-core names PipelineScheduleType's member and refuses dualpipev and zb-h1") {
  const std::string py = Export(Build(Scheduled(PipelineSchedule::kInterleaved1F1B)), ExportFormat::kOlmoCore);
  CHECK(Contains(py, "schedule=PipelineScheduleType.interleaved_1F1B"));
  CHECK(Contains(py, "split_points=[2, 4, 6]"));  // stages of 2 layers: first layer of stages 1..3
  CHECK(Contains(Export(Build(Scheduled(PipelineSchedule::kGPipe)), ExportFormat::kOlmoCore),
                 "schedule=PipelineScheduleType.gpipe"));
  for (PipelineSchedule s : {PipelineSchedule::kDualPipeV, PipelineSchedule::kZeroBubbleH1})
    CHECK(Contains(Refusal(Build(Scheduled(s)), ExportFormat::kOlmoCore),
                   std::string("PipelineScheduleType has no ") + Name(s)));
}

TEST_CASE("export megatron runs 1f1b and interleaved-1f1b and refuses the schedules it has no flag for") {
  CHECK(Contains(Export(Build(Scheduled(PipelineSchedule::k1F1B)), ExportFormat::kMegatron),
                 "--pipeline-model-parallel-size 2"));
  CHECK(Contains(Export(Build(Scheduled(PipelineSchedule::kInterleaved1F1B)), ExportFormat::kMegatron),
                 "--pipeline-model-parallel-size 2"));
  for (PipelineSchedule s : {PipelineSchedule::kGPipe, PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipeV}) {
    const std::string why = Refusal(Build(Scheduled(s)), ExportFormat::kMegatron);
    CHECK(Contains(why, "megatron cannot express this layout"));
    CHECK(Contains(why, std::string("it has no flag for ") + Name(s)));
  }
}

TEST_CASE("export rankmap carries a schedule only when the layout names one other than its implied one") {
  CHECK_FALSE(nlohmann::json::parse(Export(Build(MakeLayout(16, 1, 1, 2, 4, 1)), ExportFormat::kRankMap))
                  .contains("schedule"));
  CHECK_FALSE(nlohmann::json::parse(Export(Build(Scheduled(PipelineSchedule::k1F1B)), ExportFormat::kRankMap))
                  .contains("schedule"));
  const nlohmann::json j =
      nlohmann::json::parse(Export(Build(Scheduled(PipelineSchedule::kDualPipeV)), ExportFormat::kRankMap));
  CHECK(j["schedule"] == "dualpipev");
  CHECK(Contains(j["layout"].get<std::string>(), ",schedule=dualpipev,"));
}

}  // namespace
}  // namespace foldplan
