// ParseLayout / FormatLayout: the --layout syntax.
#include <doctest/doctest.h>

#include "planner/layout.h"

using namespace foldplan;

TEST_CASE("dp and edp are derived from the world size when omitted") {
  // world 128 = pp 8 x tp 2 x cp 1 x dp  => dp = 8; = pp 8 x etp 1 x ep 8 x edp => edp = 2.
  auto l = ParseLayout("tp=2,cp=1,pp=8,ep=8,etp=1", 128);
  REQUIRE(l.ok());
  CHECK(l->dp == 8);
  CHECK(l->edp == 2);
  CHECK(l->world == 128);
  CHECK(l->order == "tp-cp-ep-dp-pp");
  CHECK(l->cp_style == CpStyle::kUlysses);
}

TEST_CASE("etp defaults to tp, as in Megatron") {
  auto l = ParseLayout("tp=4,ep=2", 32);
  REQUIRE(l.ok());
  CHECK(l->etp == 4);
  CHECK(l->edp == 4);  // 32 / (4 * 2)
}

TEST_CASE("an explicit dp sets the world size") {
  auto l = ParseLayout("tp=2,pp=2,dp=4,ep=4,etp=1", 1000);
  REQUIRE(l.ok());
  CHECK(l->world == 16);
  CHECK(l->edp == 2);
}

TEST_CASE("every key parses and the canonical form round-trips") {
  auto l = ParseLayout(
      "tp=2,cp=2,pp=4,ep=4,etp=1,vpp=2,mbs=2,order=tp-cp-ep-pp-dp,cp_style=ring,"
      "recompute=selective,placement=packed,stages=4/4/4/4/4/4/4/4,world=64",
      0);
  REQUIRE(l.ok());
  CHECK(l->dp == 4);
  CHECK(l->edp == 4);
  CHECK(l->vpp == 2);
  CHECK(l->mbs == 2);
  CHECK(l->cp_style == CpStyle::kRing);
  CHECK(l->recompute == Recompute::Selective());
  CHECK(l->placement == Placement::kPacked);
  CHECK(l->stage_layers.size() == 8);
  CHECK(l->layers_on_stage(0) == 8);
  auto again = ParseLayout(FormatLayout(l.value()), 0);
  REQUIRE(again.ok());
  CHECK(again.value() == l.value());
}

TEST_CASE("bad layouts are refused with the reason") {
  auto check = [](const char* text, const char* expected) {
    auto l = ParseLayout(text, 128);
    REQUIRE_FALSE(l.ok());
    CHECK_MESSAGE(l.status().message().find(expected) != std::string::npos, l.status().message());
  };
  check("tp=2,foo=3", "unknown key \"foo\"");
  check("tp=two", "tp=two: expected an integer in [1, 1048576]");
  check("tp=0", "tp=0: expected an integer in [1, 1048576]");
  check("tp=3", "pp*tp*cp = 3 does not divide the world size 128");
  check("tp=2,ep=3,etp=1", "pp*etp*ep = 3 does not divide");
  check("tp=2,dp=8,world=128", "dp=8 but world 128 / (pp*tp*cp) gives dp=64");
  check("tp=2,tp=4", "tp given twice");
  check("tp", "expected key=value");
  check("cp_style=zigzag", "expected one of ulysses, ring");
  check("pp=2,stages=4/4/4", "stages= lists 3 stages but pp*vpp = 2");
}

TEST_CASE("recipe keys parse, and the canonical form carries them") {
  auto l = ParseLayout(
      "tp=2,pp=8,vpp=4,ep=32,etp=1,recompute=layernorm+moe_act,dispatcher=flex,a2a_overlap=1,"
      "precision=fp8,fsdp=0,tp_overlap=1,pp_layout=Et|(tt|)*30L",
      256);
  REQUIRE_MESSAGE(l.ok(), l.status().message());
  CHECK(l->recompute == Recompute::Modules((1u << int(RecomputeModule::kLayernorm)) |
                                           (1u << int(RecomputeModule::kMoeAct))));
  CHECK(l->dispatcher == Dispatcher::kDeepEP);  // "flex" is read as its default backend
  CHECK(l->a2a_overlap);
  CHECK(l->precision == Precision::kFP8Tensorwise);  // "fp8" is the tensorwise recipe
  CHECK(l->tp_overlap);
  CHECK_FALSE(l->fsdp);
  CHECK(l->pp_layout_given);
  CHECK(l->stage_layers.size() == 32);
  const std::string text = FormatLayout(l.value());
  CHECK(text.find("recompute=moe_act+layernorm") != std::string::npos);
  CHECK(text.find("dispatcher=deepep,a2a_overlap=1,precision=fp8-tensorwise") != std::string::npos);
  CHECK(text.find("pp_layout=Et|(tt|)*30L") != std::string::npos);
  auto again = ParseLayout(text, 0);
  REQUIRE(again.ok());
  CHECK(again.value() == l.value());
}

TEST_CASE("cuda_graphs= names Megatron's captured modules; the text prints it only when not eager") {
  auto l = ParseLayout("tp=1,pp=4,ep=8,etp=1,cuda_graphs=moe_preprocess+attn+moe_router", 64);
  REQUIRE_MESSAGE(l.ok(), l.status().message());
  CHECK(l->cuda_graphs.captures(CudaGraphModule::kAttn));
  CHECK(l->cuda_graphs.captures(CudaGraphModule::kMoePreprocess));
  CHECK_FALSE(l->cuda_graphs.captures(CudaGraphModule::kMoe));
  const std::string text = FormatLayout(l.value());
  CHECK(text.find(",cuda_graphs=attn+moe_router+moe_preprocess,") != std::string::npos);  // Megatron's order
  auto again = ParseLayout(text, 0);
  REQUIRE(again.ok());
  CHECK(again.value() == l.value());
  CHECK(FormatLayout(ParseLayout("tp=1,pp=4,ep=8,etp=1", 64).value()).find("cuda_graphs") == std::string::npos);
  CHECK(ParseLayout("tp=1,pp=4,ep=8,etp=1,cuda_graphs=full_iteration", 64)->cuda_graphs == CudaGraphs::FullIteration());
  // Megatron's rules, and typos, are refused with the reason.
  auto bad = ParseLayout("tp=1,pp=4,ep=8,etp=1,cuda_graphs=moe_preprocess", 64);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("only with moe_router") != std::string::npos);
  bad = ParseLayout("tp=1,pp=4,ep=8,etp=1,cuda_graphs=moe+moe_router", 64);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("captures the router") != std::string::npos);
  bad = ParseLayout("tp=1,pp=4,ep=8,etp=1,cuda_graphs=atn", 64);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("unknown module \"atn\"") != std::string::npos);
}

TEST_CASE("options a layout leaves out take the job's first candidates") {
  JobSpec job;
  job.recompute = {Recompute::Full(), Recompute::None()};
  job.dispatchers = {Dispatcher::kHybridEP};
  job.precisions = {Precision::kMXFP8};
  job.a2a_overlap = {true};
  auto l = ParseLayout("tp=1,ep=8", 64, &job);
  REQUIRE(l.ok());
  CHECK(l->recompute == Recompute::Full());
  CHECK(l->dispatcher == Dispatcher::kHybridEP);
  CHECK(l->precision == Precision::kMXFP8);
  CHECK(l->a2a_overlap);
  CHECK(ParseLayout("tp=1,ep=8,recompute=none", 64, &job)->recompute == Recompute::None());
}

TEST_CASE("bad recipe keys are refused with the reason") {
  auto check = [](const char* text, const char* expected) {
    auto l = ParseLayout(text, 128);
    REQUIRE_FALSE(l.ok());
    CHECK_MESSAGE(l.status().message().find(expected) != std::string::npos, l.status().message());
  };
  check("recompute=layernorm+attn", "unknown module \"attn\"; expected none, selective, full, or '+'-joined modules");
  check("recompute=moe+moe", "module \"moe\" given twice");
  check("dispatcher=nccl", "dispatcher=nccl: expected one of alltoall, allgather, deepep (alias flex), hybridep");
  check("precision=fp4", "precision=fp4: expected one of bf16, fp8-delayed");
  check("a2a_overlap=yes", "a2a_overlap=yes: expected 0 or 1");
  check("pp=2,pp_layout=Et|(t|L", "pp_layout=Et|(t|L: column 4: '(' without ')'");
  check("pp=2,pp_layout=tE|tL", "E must open the first stage");
  check("pp=2,stages=16/16,pp_layout=Et*16|t*16L", "give stages= or pp_layout=, not both");
  check("pp=4,pp_layout=Et|tL", "pp_layout lists 2 stages but pp*vpp = 4");
  check("world=2000000", "world=2000000: expected an integer in [1, 1048576]");
}

TEST_CASE("pins record only the keys given") {
  auto p = ParseLayoutPins("tp=2,pp=8,recompute=full");
  REQUIRE(p.ok());
  CHECK(p->tp == 2);
  CHECK(p->pp == 8);
  CHECK(p->recompute == Recompute::Full());
  CHECK_FALSE(p->ep.has_value());
  CHECK_FALSE(p->dispatcher.has_value());
  CHECK_FALSE(p->empty());
  CHECK_FALSE(ParseLayoutPins("tp=2")->empty());
}

// Regression: products of degrees overflowed (pp*tp*cp of 65536 each wrapped to
// 0, then world % 0); each product is now checked against the largest world
// before anything divides by it, in the text alone and against a job.
TEST_CASE("degrees whose product exceeds the largest world are refused, not computed") {
  auto refused = [](const char* text, const char* expected) {
    auto pins = ParseLayoutPins(text);
    REQUIRE_FALSE(pins.ok());
    CHECK_MESSAGE(pins.status().message() == expected, pins.status().message());
    CHECK_FALSE(ParseLayout(text, 128).ok());
  };
  refused("tp=65536,pp=65536", "layout: pp*tp*cp*dp = 65536*65536*1*1 is more than the largest world, 1048576 ranks");
  refused("tp=46341,cp=46341", "layout: pp*tp*cp*dp = 1*46341*46341*1 is more than the largest world, 1048576 ranks");
  refused("dp=1048576,tp=2", "layout: pp*tp*cp*dp = 1*2*1*1048576 is more than the largest world, 1048576 ranks");
  // etp defaults to tp in the expert view's product too.
  refused("tp=1024,ep=2048", "layout: pp*etp*ep*edp = 1*1024*2048*1 is more than the largest world, 1048576 ranks");
  refused("pp=2048,vpp=1024", "layout: pp*vpp = 2048*1024 is more than the largest world, 1048576 ranks");
  CHECK(ParseLayoutPins("tp=1024,pp=1024").ok());  // exactly the largest world
  // A job's vpp, not in the text, is checked against pp too.
  JobSpec job;
  job.vpp = {1024};
  auto l = ParseLayout("pp=2048", 2048, &job);
  REQUIRE_FALSE(l.ok());
  CHECK(l.status().message() == "layout: pp*vpp = 2048*1024 is more than the largest world, 1048576 ranks");
}

// Regression: "" and "," were taken for the default layout.
TEST_CASE("an empty layout text or an empty item is refused") {
  CHECK(ParseLayoutPins("").status().message() == "layout: empty; expected key=value pairs such as tp=2,pp=8");
  for (const char* text : {",", "tp=2,", ",tp=2", "tp=2,,pp=2"}) {
    auto pins = ParseLayoutPins(text);
    REQUIRE_FALSE(pins.ok());
    CHECK(pins.status().message() == std::string("layout: \"") + text + "\": an empty item (expected key=value between commas)");
  }
}

TEST_CASE("vpp, mbs and stage counts take the ranges of the job and model files") {
  CHECK(ParseLayoutPins("vpp=1025").status().message() == "layout: vpp=1025: expected an integer in [1, 1024]");
  CHECK(ParseLayoutPins("vpp=2147483647").status().message() == "layout: vpp=2147483647: expected an integer in [1, 1024]");
  CHECK(ParseLayoutPins("mbs=65537").status().message() == "layout: mbs=65537: expected an integer in [1, 65536]");
  CHECK(ParseLayoutPins("pp=2,stages=4097/1").status().message() ==
        "layout: stages=4097/1: expected layer counts in [1, 4096] separated by '/'");
  CHECK(ParseLayoutPins("vpp=1024,mbs=65536").ok());
}

TEST_CASE("schedule= names a pipeline schedule; the text prints it only when it is not the implied one") {
  auto l = ParseLayout("tp=1,pp=4,vpp=2,ep=8,etp=1,schedule=dualpipev", 64);
  REQUIRE_MESSAGE(l.ok(), l.status().message());
  CHECK(l->schedule == PipelineSchedule::kDualPipeV);
  CHECK(l->schedule_or_default() == PipelineSchedule::kDualPipeV);
  const std::string text = FormatLayout(l.value());
  CHECK(text.find(",vpp=2,schedule=dualpipev,mbs=1,") != std::string::npos);
  CHECK(ShortRecipe(l.value()) == "dualpipev");
  auto again = ParseLayout(text, 0);
  REQUIRE(again.ok());
  CHECK(again.value() == l.value());

  // The implied schedule, named or not, prints as a layout that names none.
  auto implied = ParseLayout("tp=1,pp=4,vpp=2,ep=8,etp=1", 64);
  auto named = ParseLayout("tp=1,pp=4,vpp=2,ep=8,etp=1,schedule=interleaved", 64);
  REQUIRE(implied.ok());
  REQUIRE(named.ok());
  CHECK_FALSE(implied->schedule);
  CHECK(implied->schedule_or_default() == PipelineSchedule::kInterleaved1F1B);
  CHECK(named->schedule == PipelineSchedule::kInterleaved1F1B);
  CHECK(FormatLayout(named.value()) == FormatLayout(implied.value()));
  CHECK(FormatLayout(implied.value()).find("schedule") == std::string::npos);
  CHECK(ShortRecipe(named.value()).empty());
  CHECK(ParseLayout("tp=1,pp=4,ep=8,etp=1,schedule=zb", 64)->schedule == PipelineSchedule::kZeroBubbleH1);
}

TEST_CASE("an unknown schedule is refused with the accepted names") {
  auto l = ParseLayout("tp=1,pp=4,schedule=dualpipe", 64);
  REQUIRE_FALSE(l.ok());
  CHECK(l.status().message() ==
        "layout: schedule=dualpipe: expected one of 1f1b, interleaved-1f1b (alias interleaved), gpipe, zb-h1 "
        "(alias zb), dualpipev");
}

TEST_CASE("a layout without schedule= takes the job's first schedule candidate; pins record it") {
  JobSpec job;
  job.vpp = {2};
  job.pipeline_schedules = {PipelineSchedule::kDualPipeV, PipelineSchedule::kInterleaved1F1B};
  CHECK(ParseLayout("tp=1,pp=4,ep=8", 64, &job)->schedule == PipelineSchedule::kDualPipeV);
  CHECK(ParseLayout("tp=1,pp=4,ep=8,schedule=interleaved-1f1b", 64, &job)->schedule ==
        PipelineSchedule::kInterleaved1F1B);
  CHECK_FALSE(ParseLayout("tp=1,pp=4,ep=8", 64)->schedule);  // no job: the implied one
  auto pins = ParseLayoutPins("schedule=gpipe");
  REQUIRE(pins.ok());
  CHECK(pins->schedule == PipelineSchedule::kGPipe);
  CHECK_FALSE(pins->empty());
}

TEST_CASE("layers_on_stage sums the stages the schedule puts on the rank") {
  // 8 stages on pp 4: under DualPipeV rank 0 holds stages 0 and 7, under
  // interleaved 1F1B stages 0 and 4.
  auto parsed = ParseLayout("pp=4,vpp=2,stages=1/2/3/4/5/6/7/8,schedule=dualpipev", 4);
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().message());
  Layout l = parsed.value();
  CHECK(l.layers_on_stage(0) == 1 + 8);
  CHECK(l.layers_on_stage(3) == 4 + 5);
  l.schedule.reset();
  CHECK(l.layers_on_stage(0) == 1 + 5);
}
