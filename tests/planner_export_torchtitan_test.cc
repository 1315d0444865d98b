// torchtitan exports (doc/trainers.md "torchtitan"): `torchtitan`, the
// Python module returning Trainer.Config (torchtitan after 2026-02-23, read
// at b5bcd76), and `torchtitan-toml`, the [parallelism] table of the releases
// with TOML configs (read at 238fa995); what each writes for the degrees,
// the pipeline split, the recipe and the model, and the trainer rules'
// refusals. (tests/export_parse_check.py parses both and checks them against
// the rank map with tests/trainer_exports/torchtitan.py.)
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "export_fixtures.h"
#include "fixtures.h"
#include "planner/rank_export.h"
#include "planner/rank_map.h"
#include "planner/trainer_rules.h"
#include "shipped_model.h"
#include "text_count.h"

namespace foldplan {
namespace {

using testing::Contains;
using testing::MakeLayout;
using testing::BuildMap;
using testing::ExportRefusal;
using testing::ExportText;

// The text with every line break and the indentation after it as one space
// (a list wrapped anywhere reads the same).
std::string TtFlat(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n') {
      out += text[i];
      continue;
    }
    while (i + 1 < text.size() && text[i + 1] == ' ') ++i;
    out += ' ';
  }
  return out;
}

// A layout torchtitan runs: FSDP2 (fsdp 1), ring CP, experts without TP.
Layout TtRunnable(int world, int tp, int cp, int pp, int ep) {
  Layout l = MakeLayout(world, tp, cp, pp, ep, 1);
  l.fsdp = true;
  l.cp_style = CpStyle::kRing;
  return l;
}

// 32 ranks: tp 2, ring cp 2, pp 2, dp 4; ep 8 borrows dp_shard 2 x cp 2 x
// tp 2 (a folded layout); DeepSeek-V3's 61 layers split 31 / 30.
Layout TtFolded() {
  Layout l = TtRunnable(32, 2, 2, 2, 8);
  l.recompute = Recompute::Full();
  l.dispatcher = Dispatcher::kDeepEP;
  l.stage_layers = {31, 30};
  return l;
}

constexpr ExportFormat kTtPy = ExportFormat::kTorchtitan;
constexpr ExportFormat kTtToml = ExportFormat::kTorchtitanToml;

TEST_CASE("export torchtitan-toml is a format of its own, after the seven") {
  CHECK(std::string(Name(ExportFormat::kTorchtitanToml)) == "torchtitan-toml");
  Result<ExportFormat> f = ParseExportFormat("torchtitan-toml");
  REQUIRE(f.ok());
  CHECK(*f == ExportFormat::kTorchtitanToml);
  CHECK(Contains(ParseExportFormat("toml").status().message(), "maxtext, torchtitan-toml)"));
}

TEST_CASE("export torchtitan: a Python module returning Trainer.Config from the model's registry") {
  const ModelSpec model = testing::ShippedModel("deepseek-v3");
  const JobSpec job;  // seq 4096, global batch 1024
  const std::string py = ExportText(BuildMap(TtFolded(), 4), kTtPy, {nullptr, &model, &job});
  CHECK(Contains(py, "# For torchtitan after 2026-02-23 (Python configs), read at b5bcd76"));
  CHECK(Contains(py, "from torchtitan.trainer import Trainer\n"));
  CHECK(Contains(py, "from torchtitan.config import ParallelismConfig, TrainingConfig\n"));
  CHECK(Contains(py, "from torchtitan.distributed.activation_checkpoint import FullAC\n"));
  CHECK(Contains(py, "from torchtitan.models.deepseek_v3 import model_registry\n"));
  CHECK(Contains(py, "def foldplan_config() -> Trainer.Config:\n    "));
  CHECK(Contains(py, "model_spec=model_registry(\"671B\", moe_comm_backend=\"deepep\"),\n"));
  // Tokens per micro-batch per data-parallel rank: mbs 1 x seq 4096 (CP splits them).
  CHECK(Contains(py, "num_tokens_per_microbatch_per_dp_rank=4096,"));
  CHECK(Contains(py, "max_context_length=4096,\n"));
  CHECK(Contains(py, "data_parallel_replicate_degree=1,\n"));
  CHECK(Contains(py, "data_parallel_shard_degree=4,\n"));
  CHECK(Contains(py, "tensor_parallel_degree=2,\n            enable_sequence_parallel=True,\n"));
  CHECK(Contains(py, "context_parallel_degree=2,\n            context_parallel_load_balancer=\"headtail\",\n"));
  CHECK(Contains(py, "pipeline_parallel_degree=2,\n            pipeline_parallel_schedule=\"1F1B\",\n"));
  CHECK(Contains(py, "num_pp_microbatches=256,\n"));  // 1024 / (dp 4 x mbs 1)
  CHECK(Contains(py, "pipeline_parallel_first_stage_less_layers=0,\n"));
  CHECK(Contains(py, "pipeline_parallel_last_stage_less_layers=0,\n"));
  CHECK(Contains(py, "module_fqns_per_model_part=[\n"));
  CHECK(Contains(py, "[\"tok_embeddings\", \"layers.0\", \"layers.1\","));
  CHECK(Contains(TtFlat(py), "\"layers.60\", \"norm\", \"output\"],"));
  CHECK(Contains(py, "expert_parallel_degree=8,\n"));
  CHECK(Contains(py, "activation_checkpoint=FullAC.Config(),"));
  CHECK(Contains(py, "MTP layer(s) that these module names leave out"));
  // The trailing command-line overrides.
  CHECK(Contains(py, "#   --parallelism.data_parallel_shard_degree 4\n"));
  CHECK(Contains(py, "#   --parallelism.expert_parallel_degree 8\n"));
  // Nothing torchtitan no longer has, and no TOML.
  CHECK_FALSE(Contains(py, "expert_tensor_parallel_degree"));
  CHECK_FALSE(Contains(py, "pipeline_parallel_microbatch_size"));
  CHECK_FALSE(Contains(py, "[parallelism]"));
  CHECK_FALSE(Contains(py, "raise"));  // bf16: the config is returned
}

TEST_CASE("export torchtitan: every pp > 1 split is module names per virtual stage, even or not") {
  Layout l = TtRunnable(16, 1, 1, 2, 4);
  l.vpp = 2;
  l.stage_layers = {2, 3, 3, 4};  // uneven, in model order
  const std::string py = ExportText(BuildMap(l), kTtPy);
  CHECK(Contains(py, "pipeline_parallel_schedule=\"Interleaved1F1B\""));
  CHECK(Contains(py,
                 "# virtual stage 0: 2 decoder layers\n                [\"tok_embeddings\", \"layers.0\", "
                 "\"layers.1\"],\n"));
  CHECK(Contains(py, "[\"layers.2\", \"layers.3\", \"layers.4\"],\n"));
  CHECK(Contains(py, "[\"layers.8\", \"layers.9\", \"layers.10\", \"layers.11\", \"norm\", \"output\"],\n"));
  l.stage_layers = {3, 3, 3, 3};
  CHECK(Contains(ExportText(BuildMap(l), kTtPy), "[\"layers.9\", \"layers.10\", \"layers.11\", \"norm\", \"output\"],\n"));
  CHECK_FALSE(Contains(ExportText(BuildMap(l), kTtPy), "pipeline_parallel_layers_per_stage"));
}

TEST_CASE("export torchtitan-toml: the [parallelism] table, even splits a layer count, uneven ones module names") {
  Layout l = TtRunnable(16, 1, 1, 2, 4);
  l.stage_layers = {6, 6};
  std::string toml = ExportText(BuildMap(l), kTtToml);
  CHECK(Contains(toml,
                 "# For the torchtitan releases with TOML configs, before 2026-02-23 (the last read at "
                 "238fa995);"));
  CHECK(Contains(toml, "\n[parallelism]\ndata_parallel_replicate_degree = 1\ndata_parallel_shard_degree = 8\n"));
  CHECK(Contains(toml, "pipeline_parallel_schedule = \"1F1B\"\n"));
  CHECK(Contains(toml,
                 "pipeline_parallel_layers_per_stage = 6\n"
                 "pipeline_parallel_first_stage_less_layers = 0\n"
                 "pipeline_parallel_last_stage_less_layers = 0\n"));
  CHECK(Contains(toml, "expert_parallel_degree = 4\nexpert_parallel_comm_backend = \"standard\"\n"));
  CHECK_FALSE(Contains(toml, "module_fqns_per_model_part"));
  l.stage_layers = {5, 7};
  toml = ExportText(BuildMap(l), kTtToml);
  CHECK_FALSE(Contains(toml, "pipeline_parallel_layers_per_stage"));
  CHECK(Contains(toml,
                 "module_fqns_per_model_part = [\n  # virtual stage 0: 5 decoder layers\n"
                 "  [\"tok_embeddings\", \"layers.0\", \"layers.1\", \"layers.2\", \"layers.3\", "
                 "\"layers.4\"],\n"));
  CHECK(Contains(TtFlat(toml), "\"layers.11\", \"norm\", \"output\"], ]"));
  // Keys torchtitan does not have are not written, not even as comments;
  // nor the tables whose keys were not read at 238fa995.
  for (const char* gone : {"expert_tensor_parallel_degree", "pipeline_parallel_microbatch_size",
                           "\n[activation_checkpoint]", "\n[training]", "selective_ac_option"})
    CHECK_FALSE(Contains(toml, gone));
}

TEST_CASE("export torchtitan: recompute as activation checkpointing") {
  Layout l = TtRunnable(16, 1, 1, 1, 4);
  CHECK(Contains(ExportText(BuildMap(l), kTtPy), "activation_checkpoint=None,"));
  l.recompute = Recompute::Full();
  CHECK(Contains(ExportText(BuildMap(l), kTtPy), "activation_checkpoint=FullAC.Config(),"));
  l.recompute = Recompute::Selective();
  const std::string py = ExportText(BuildMap(l), kTtPy);
  CHECK(Contains(py, "from torchtitan.distributed.activation_checkpoint import SelectiveAC\n"));
  CHECK(Contains(py, "activation_checkpoint=SelectiveAC.Config(),"));
  CHECK(Contains(ExportText(BuildMap(l), kTtToml), "# Activation checkpointing: selective"));
}

TEST_CASE("export torchtitan: FP8 is refused (its converters' field was not read); the dispatcher is moe_comm_backend") {
  Layout l = TtRunnable(16, 1, 1, 1, 4);
  for (Precision p : {Precision::kFP8Tensorwise, Precision::kMXFP8}) {
    l.precision = p;
    CHECK(Contains(ExportRefusal(BuildMap(l), kTtPy), "trainer_recipe"));
  }
  l.precision = Precision::kBF16;
  const std::pair<Dispatcher, const char*> backends[] = {
      {Dispatcher::kAllToAll, "standard"}, {Dispatcher::kDeepEP, "deepep"}, {Dispatcher::kHybridEP, "hybridep"}};
  for (const auto& b : backends) {
    l.dispatcher = b.first;
    CAPTURE(Name(b.first));
    CHECK(Contains(ExportText(BuildMap(l), kTtPy), "moe_comm_backend=\"" + std::string(b.second) + "\")"));
    CHECK(
        Contains(ExportText(BuildMap(l), kTtToml), "expert_parallel_comm_backend = \"" + std::string(b.second) + "\"\n"));
  }
}

TEST_CASE("export torchtitan: torchtitan's models where it has one, a marked placeholder where not") {
  const Layout l = TtRunnable(16, 2, 1, 1, 1);
  const JobSpec job;
  SUBCASE("qwen3: its module, the flavor inferred from the name") {
    const ModelSpec model = testing::ShippedModel("qwen3-30b-a3b");
    Layout moe = TtRunnable(16, 1, 1, 1, 8);
    const std::string py = ExportText(BuildMap(moe), kTtPy, {nullptr, &model, &job});
    CHECK(Contains(py, "from torchtitan.models.qwen3 import model_registry\n"));
    CHECK(Contains(py, "model_registry(\"30B-A3B\", moe_comm_backend=\"standard\")"));
    CHECK(Contains(py, "inferred from foldplan's model name qwen3-30b-a3b"));
  }
  SUBCASE("llama3: dense, so no moe_comm_backend") {
    const ModelSpec model = testing::ShippedModel("llama3-70b");
    const std::string py = ExportText(BuildMap(l), kTtPy, {nullptr, &model, &job});
    CHECK(Contains(py, "from torchtitan.models.llama3 import model_registry\n"));
    CHECK(Contains(py, "model_spec=model_registry(\"70B\"),\n"));
    CHECK_FALSE(Contains(ExportText(BuildMap(l), kTtToml, {nullptr, &model, &job}), "expert_parallel_comm_backend ="));
  }
  SUBCASE("mixtral: torchtitan ships none") {
    const ModelSpec model = testing::ShippedModel("mixtral-8x7b");
    const std::string py = ExportText(BuildMap(TtRunnable(16, 1, 1, 1, 8)), kTtPy, {nullptr, &model, &job});
    CHECK(Contains(py, "# PLACEHOLDER: torchtitan ships no mixtral-8x7b model"));
    CHECK(Contains(py, "from your_models.mixtral_8x7b import model_registry  # PLACEHOLDER\n"));
    CHECK(Contains(py, "model_spec=model_registry(\"mixtral-8x7b\", moe_comm_backend=\"standard\"),  # PLACEHOLDER\n"));
  }
  SUBCASE("no model: a placeholder; no job: no TrainingConfig") {
    const std::string py = ExportText(BuildMap(l), kTtPy);
    CHECK(Contains(py, "# PLACEHOLDER: no --model was given"));
    CHECK_FALSE(Contains(py, "TrainingConfig("));
    CHECK(Contains(py, "# No job: sequence length and batch not exported.\n"));
  }
}

TEST_CASE("export torchtitan: without the model's layers no modules are named, and the comment says why") {
  const Layout l = TtRunnable(16, 1, 1, 2, 4);  // no stage_layers
  for (ExportFormat f : {kTtPy, kTtToml}) {
    const std::string out = ExportText(BuildMap(l), f);
    CHECK_FALSE(Contains(out, "module_fqns_per_model_part ="));
    CHECK_FALSE(Contains(out, "module_fqns_per_model_part=["));
    CHECK(Contains(out, "# No model: foldplan knows no layer count"));
  }
}

// A layout of 16 ranks, pp 2, torchtitan runs, under `schedule` with the
// vpp it needs.
Layout TtScheduled(PipelineSchedule schedule) {
  Layout l = TtRunnable(16, 1, 1, 2, 4);
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
    CAPTURE(Name(e.first));
    const RankMap m = BuildMap(TtScheduled(e.first));
    CHECK(Contains(ExportText(m, kTtPy), "pipeline_parallel_schedule=\"" + std::string(e.second) + "\",\n"));
    CHECK(Contains(ExportText(m, kTtToml), "pipeline_parallel_schedule = \"" + std::string(e.second) + "\"\n"));
  }
  CHECK(Contains(ExportText(BuildMap(TtScheduled(PipelineSchedule::kDualPipeV)), kTtPy), "in a V"));
  for (ExportFormat f : {kTtPy, kTtToml}) {
    const std::string why = ExportRefusal(BuildMap(TtScheduled(PipelineSchedule::kZeroBubbleH1)), f);
    CHECK(Contains(why, "torchtitan cannot run this layout: trainer_schedule: "));
    CHECK(Contains(why, "none runs zb-h1 with one stage per rank"));
  }
}

TEST_CASE("export torchtitan refuses what the trainer rules refuse, both formats alike") {
  struct Case {
    const char* what;
    Layout layout;
    const char* rule;
  };
  Layout ulysses = TtRunnable(16, 2, 2, 2, 4);
  ulysses.cp_style = CpStyle::kUlysses;
  Layout expert_tp = TtRunnable(16, 2, 1, 2, 2);
  expert_tp.etp = 2;
  expert_tp.edp = 16 / (2 * 2 * 2);
  Layout pp_inner = TtRunnable(16, 1, 1, 2, 1);
  pp_inner.order = kPpDpOrder;  // dp = edp = 8: other dp and pp groups
  Layout zero1 = TtRunnable(16, 1, 1, 2, 4);
  zero1.fsdp = false;  // costed as Megatron's distributed optimizer
  Layout allgather = TtRunnable(16, 1, 1, 1, 4);
  allgather.dispatcher = Dispatcher::kAllGather;
  Layout delayed = TtRunnable(16, 1, 1, 1, 4);
  delayed.precision = Precision::kFP8Delayed;
  Layout blockwise = TtRunnable(16, 1, 1, 1, 4);
  blockwise.precision = Precision::kFP8Blockwise;
  Layout modules = TtRunnable(16, 1, 1, 1, 4);
  modules.recompute = Recompute::Selective().With(RecomputeModule::kMoeAct);
  Layout overlap = TtRunnable(16, 1, 1, 1, 4);
  overlap.a2a_overlap = true;
  Layout graphs = TtRunnable(16, 1, 1, 1, 4);
  graphs.cuda_graphs = CudaGraphs::Layer();
  const Case cases[] = {
      {"Ulysses CP", ulysses, "trainer_cp_style"},
      {"etp 2 with ep 2", expert_tp, "trainer_expert_tp"},
      {"pp inside dp", pp_inner, "trainer_order"},
      {"fsdp 0 with dp 8", zero1, "trainer_data_parallel"},
      {"allgather dispatcher", allgather, "trainer_recipe"},
      {"fp8-delayed", delayed, "trainer_recipe"},
      {"fp8-blockwise", blockwise, "trainer_recipe"},
      {"Megatron recompute modules", modules, "trainer_recipe"},
      {"EP overlap", overlap, "trainer_recipe"},
      {"CUDA graphs", graphs, "trainer_recipe"},
  };
  for (const Case& c : cases) {
    const std::string what = c.what;
    CAPTURE(what);
    for (ExportFormat f : {kTtPy, kTtToml}) {
      const std::string format = Name(f);
      CAPTURE(format);
      const std::string why = ExportRefusal(BuildMap(c.layout), f);
      CHECK(Contains(why, "torchtitan cannot run this layout: " + std::string(c.rule) + ": "));
      CHECK_FALSE(Contains(why, "a bug in foldplan"));
    }
  }
}

TEST_CASE("export torchtitan prints what the plan prices differently as comments") {
  Layout l = TtRunnable(16, 1, 1, 1, 4);
  l.recompute = Recompute::Selective();
  const std::vector<std::string> notes =
      TrainerCostNotes(Trainer::kTorchtitan, l, TrainerContext{nullptr, nullptr, nullptr});
  for (ExportFormat f : {kTtPy, kTtToml}) {
    const std::string out = ExportText(BuildMap(l), f);
    for (const std::string& note : notes) {
      CAPTURE(note);
      CHECK(Contains(out, "# Cost: " + note.substr(0, 40)));
    }
  }
}

}  // namespace
}  // namespace foldplan
