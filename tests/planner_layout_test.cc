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
  check("tp=two", "tp=two: expected a positive integer");
  check("tp=0", "expected a positive integer");
  check("tp=3", "pp*tp*cp = 3 does not divide the world size 128");
  check("tp=2,ep=3,etp=1", "pp*etp*ep = 3 does not divide");
  check("tp=2,dp=8,world=128", "dp=8 but world 128 / (pp*tp*cp) gives dp=64");
  check("tp=2,tp=4", "tp given twice");
  check("tp", "expected key=value");
  check("cp_style=zigzag", "expected one of ulysses, ring");
  check("pp=2,stages=4/4/4", "stages= lists 3 stages but pp*vpp = 2");
}
