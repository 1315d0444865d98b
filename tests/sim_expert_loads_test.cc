// Routing imbalance draws (sim/expert_loads.h): what each distribution
// implies for the EP ranks' loads.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "sim/expert_loads.h"

using namespace foldplan;

namespace {

ExpertLoadDraw Make(const std::string& text, int experts, int ep, double rows, double cf = 0, uint64_t seed = 7) {
  auto spec = ParseLoadSpec(text);
  REQUIRE(spec.ok());
  auto d = ExpertLoadDraw::Create(spec.value(), experts, ep, rows, cf, seed);
  REQUIRE(d.ok());
  return std::move(d).value();
}

}  // namespace

TEST_CASE("every draw's factors average 1: the assignments are only redistributed") {
  for (const char* text : {"uniform", "zipf:1.2", "dirichlet:0.3"}) {
    const ExpertLoadDraw d = Make(text, 256, 64, 4096 * 8);
    std::vector<double> f;
    for (int layer = 0; layer < 5; ++layer) {
      d.Draw(3, layer, 11, f);
      double sum = 0;
      for (double x : f) sum += x;
      CHECK(f.size() == 64);
      CHECK(sum == doctest::Approx(64).epsilon(1e-12));
    }
  }
}

TEST_CASE("uniform routing: a rank's load varies as the multinomial says") {
  // N = ep T k assignments over ep equally likely ranks: a rank's count has
  // mean N / ep and standard deviation sqrt(N (1/ep)(1 - 1/ep)), so its
  // factor's is sqrt((ep - 1) / N). ep 8, T k = 1000: N = 8000, sd 0.0296.
  const ExpertLoadDraw d = Make("uniform", 64, 8, 1000);
  std::vector<double> f;
  double sum = 0, sq = 0;
  int n = 0;
  for (int mb = 0; mb < 400; ++mb) {
    d.Draw(0, 0, mb, f);
    for (double x : f) {
      sum += x;
      sq += x * x;
      ++n;
    }
  }
  const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  CHECK(mean == doctest::Approx(1).epsilon(1e-12));
  // 3200 samples: the estimate is within 5% of sqrt(7 / 8000) = 0.02958.
  CHECK(sd == doctest::Approx(std::sqrt(7.0 / 8000)).epsilon(0.05));
}

TEST_CASE("zipf: S = 0 is uniform; larger S loads the busiest rank more") {
  // One expert per rank (E = ep = 8), N huge so that the noise vanishes:
  // rank loads follow p_i ~ 1 / i^S; the busiest over the mean is
  // 8 / H_8 = 2.943 for S = 1 (H_8 = 761/280), 1 for S = 0.
  auto busiest = [](const char* text) {
    const ExpertLoadDraw d = Make(text, 8, 8, 1e12);
    std::vector<double> f;
    d.Draw(0, 0, 0, f);
    return *std::max_element(f.begin(), f.end());
  };
  CHECK(busiest("zipf:0") == doctest::Approx(1).epsilon(1e-4));
  CHECK(busiest("zipf:1") == doctest::Approx(8 / (761.0 / 280)).epsilon(1e-4));
  CHECK(busiest("zipf:2") > busiest("zipf:1"));
}

TEST_CASE("a capacity factor pads every rank to it, as the cost model does") {
  const ExpertLoadDraw d = Make("zipf:2", 64, 8, 1000, 1.25);
  std::vector<double> f;
  d.Draw(1, 2, 3, f);
  for (double x : f) CHECK(x == 1.25);
}

TEST_CASE("the same seed gives the same loads; another seed other loads") {
  const ExpertLoadDraw a = Make("dirichlet:0.5", 64, 8, 1000, 0, 1), b = Make("dirichlet:0.5", 64, 8, 1000, 0, 1),
                       c = Make("dirichlet:0.5", 64, 8, 1000, 0, 2);
  std::vector<double> fa, fb, fc;
  a.Draw(5, 6, 7, fa);
  b.Draw(5, 6, 7, fb);
  c.Draw(5, 6, 7, fc);
  CHECK(fa == fb);
  CHECK(fa != fc);
}

TEST_CASE("a measured histogram sets the shares; a wrong file is refused naming the field") {
  // Loads 3, 1, 1, 1, 1, 1, 1, 1 over 8 experts on ep 4 (two each): rank 0
  // holds 4 of the 10, so its factor is 4 / 10 x 4 = 1.6; the others 0.8.
  const std::string path = std::string(FOLDPLAN_TEST_DATA_DIR) + "/expert_loads/skewed8.json";
  const ExpertLoadDraw d = Make(path, 8, 4, 1e12);
  std::vector<double> f;
  d.Draw(0, 0, 0, f);
  CHECK(f[0] == doctest::Approx(1.6).epsilon(1e-4));
  CHECK(f[1] == doctest::Approx(0.8).epsilon(1e-4));
  // The model has 16 experts: the file's 8 loads do not fit.
  auto spec = ParseLoadSpec(path);
  REQUIRE(spec.ok());
  auto wrong = ExpertLoadDraw::Create(spec.value(), 16, 4, 1000, 0, 0);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().message().find("/loads: expected 16 loads") != std::string::npos);
  auto bad = ParseLoadSpec(std::string(FOLDPLAN_TEST_DATA_DIR) + "/expert_loads/negative.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("/loads/1: expected a number >= 0") != std::string::npos);
}

TEST_CASE("distribution names: a bad one says what is accepted") {
  CHECK(ParseLoadSpec("").value().balanced());
  CHECK_FALSE(ParseLoadSpec("zipf:-1").ok());
  CHECK_FALSE(ParseLoadSpec("dirichlet:0").ok());
  auto bad = ParseLoadSpec("pareto:2");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("expected uniform, zipf:S, dirichlet:A") != std::string::npos);
}
