// foldbench's measured cases against the cost model's predictions
// (costmodel/measured_op_prediction.h): each prediction restated from the
// model's own functions, the cases left out of the summary, the summary.
#include <doctest/doctest.h>

#include <string>

#include "costmodel/collective.h"
#include "costmodel/evaluate.h"
#include "costmodel/measured_op_prediction.h"
#include "costmodel/plan_file.h"
#include "inputs/measurements.h"
#include "planner/group_placement.h"

namespace foldplan {
namespace {

const std::string kPlan = FOLDPLAN_TEST_DATA_DIR "/validate/pp2_cp2_ep4.plan.json";

struct PredictionFixture {
  PlanFileInputs plan;
  std::unique_ptr<CostModel> model;
  LayoutPlacement placement;
};

PredictionFixture LoadPredictionFixture() {
  PredictionFixture f;
  auto plan = LoadPlanFile(kPlan);
  REQUIRE_MESSAGE(plan.ok(), plan.status().message());
  f.plan = std::move(plan).value();
  auto model = CostModel::Create(f.plan.cluster, f.plan.model, f.plan.job);
  REQUIRE_MESSAGE(model.ok(), model.status().message());
  f.model = std::move(model).value();
  auto placement = PlaceGroups(f.plan.layout, *f.model->context().topology);
  REQUIRE(placement.ok());
  f.placement = placement.value();
  return f;
}

MeasurementSet Measurements(const char* name) {
  auto m = LoadMeasurements(std::string(FOLDPLAN_TEST_DATA_DIR "/inputs/") + name);
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  return m.value();
}

const CaseComparison& Case(const Comparison& c, const std::string& op, const std::string& kind,
                           const std::string& name) {
  for (const OpComparison& o : c.ops) {
    if (o.op != op || o.group_kind != kind) continue;
    for (const CaseComparison& k : o.cases) {
      if (k.name == name) return k;
    }
  }
  FAIL("no case " << op << " " << kind << " " << name);
  static CaseComparison none;
  return none;
}

TEST_CASE("a plan file's inputs and best layout read back") {
  const PredictionFixture f = LoadPredictionFixture();
  CHECK(f.plan.cluster.name == "h100-dgx-16n");
  CHECK(f.plan.model.name == "mixtral-8x7b");
  CHECK(f.plan.layout.world == 8);
  CHECK(f.plan.layout.cp == 2);
  CHECK(f.plan.layout.ep == 4);
}

TEST_CASE("a sweep case is CollectiveTime on the kind's worst span with its groups sharing links") {
  const PredictionFixture f = LoadPredictionFixture();
  auto c = CompareMeasurements(Measurements("measurements_pp2_cp2_ep4_sweep.json"), f.plan.layout, *f.model);
  REQUIRE_MESSAGE(c.ok(), c.status().message());
  const GroupPlacement& g = f.placement.of(GroupKind::kDpCp);
  REQUIRE(g.size == 4);
  const CollectiveCost cost = CollectiveTime(Collective::kAllReduce, 4096, g.span, f.model->comm_params(),
                                             g.groups_sharing_links);
  const CaseComparison& k = Case(c.value(), "all_reduce", "dp_cp", "4 KiB");
  CHECK(k.predicted);
  CHECK(k.predicted_s == cost.seconds);
  CHECK(k.model == cost.algorithm);
  CHECK(k.relative_error == doctest::Approx(cost.seconds / k.measured_s - 1));
  CHECK(k.excluded.empty());
  // Every case of 30 ops x 2 sizes is summarised.
  CHECK(c->summary.cases == 60);
}

TEST_CASE("ulysses is pack + all-to-all + unpack; pack is the copy or permute rate; skewed dispatch is left out") {
  const PredictionFixture f = LoadPredictionFixture();
  auto c = CompareMeasurements(Measurements("measurements_pp2_cp2_ep4.json"), f.plan.layout, *f.model);
  REQUIRE_MESSAGE(c.ok(), c.status().message());
  const ComputeProfile& p = f.model->profile();
  const GroupPlacement& cp = f.placement.of(GroupKind::kCp);
  const double s = 16777216;
  const double a2a = CollectiveTime(Collective::kAllToAll, s, cp.span, f.model->comm_params(),
                                    cp.groups_sharing_links).seconds;
  CHECK(Case(c.value(), "ulysses", "cp", "q seq->heads").predicted_s ==
        doctest::Approx(2 * s / (p.PermuteGbPerS(s) * 1e9) + a2a).scale(0));
  // pack: S = read + written = 2 x the tensor.
  CHECK(Case(c.value(), "pack", "cp", "copy (reference)").predicted_s ==
        doctest::Approx(2 * s / (p.copy_gb_per_s() * 1e9)).scale(0));
  CHECK(Case(c.value(), "pack", "cp", "pack seq->heads").predicted_s ==
        doctest::Approx(s / (p.PermuteGbPerS(s) * 1e9)).scale(0));
  const CaseComparison& uniform = Case(c.value(), "dispatch", "ep", "uniform");
  CHECK(uniform.predicted);
  CHECK(uniform.excluded.empty());
  const CaseComparison& skewed = Case(c.value(), "dispatch", "ep", "skewed (s=1)");
  CHECK(skewed.predicted);
  CHECK(skewed.excluded.find("skewed routing") != std::string::npos);
  CHECK(c->summary.cases == 4 + 1 + 3);
}

TEST_CASE("a case with wrong elements is listed but left out of the summary") {
  const PredictionFixture f = LoadPredictionFixture();
  MeasurementSet m = Measurements("measurements_pp2_cp2_ep4.json");
  m.ops[0].cases[0].wrong_elements = 3;
  auto c = CompareMeasurements(m, f.plan.layout, *f.model);
  REQUIRE(c.ok());
  CHECK(c->ops[0].cases[0].excluded == "3 wrong elements");
  CHECK(c->ops[0].summary.cases == 3);
  CHECK(c->summary.cases == 7);
}

TEST_CASE("an op over groups of another size than the layout's is an error") {
  const PredictionFixture f = LoadPredictionFixture();
  MeasurementSet m = Measurements("measurements_pp2_cp2_ep4.json");
  m.ops[0].group_size = 4;
  auto c = CompareMeasurements(m, f.plan.layout, *f.model);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message().find("the layout's cp groups have 2") != std::string::npos);
}

TEST_CASE("the summary is the median and max |relative error| of the summarised cases") {
  CaseComparison a, b, d, left_out;
  a.relative_error = -0.5;
  b.relative_error = 0.1;
  d.relative_error = 0.3;
  left_out.relative_error = 9;
  left_out.excluded = "wrong";
  const ErrorSummary odd = SummariseErrors({&a, &b, &d, &left_out});
  CHECK(odd.cases == 3);
  CHECK(odd.median_abs_relative_error == doctest::Approx(0.3));
  CHECK(odd.max_abs_relative_error == doctest::Approx(0.5));
  const ErrorSummary even = SummariseErrors({&a, &b});
  CHECK(even.median_abs_relative_error == doctest::Approx(0.3));
  CHECK(SummariseErrors({}).cases == 0);
}

}  // namespace
}  // namespace foldplan
