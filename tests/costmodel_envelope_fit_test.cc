// FitEnvelope (costmodel/envelope_fit.h) on synthetic curves with known
// parameters. Noise is multiplicative, uniform in [-e, e] (standard
// deviation sigma = e / sqrt(3)), from a fixed seed; each tolerance below is
// about three standard errors of the parameter it checks, sigma / sqrt(m)
// with m the sizes where that parameter sets most of the time.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/mix64.h"
#include "costmodel/envelope_fit.h"

using namespace foldplan;

namespace {

// SplitMix64: a fixed, portable noise source.
struct Noise {
  uint64_t state;
  double Uniform(double e) {  // in [-e, e]
    const uint64_t z = Mix64(state);
    state += kSplitMix64Increment;
    return e * (2.0 * static_cast<double>(z >> 11) / 9007199254740992.0 - 1.0);
  }
};

std::vector<AlphaBetaSegment> Segs(std::vector<AlphaBetaSegment> s) { return s; }

// Sizes from `lo` to `hi` bytes, doubling; times from the envelope of `truth`.
std::vector<TimedBytes> Curve(const std::vector<AlphaBetaSegment>& truth, double lo, double hi, double noise,
                              uint64_t seed = 7) {
  Noise n{seed};
  std::vector<TimedBytes> out;
  for (double b = lo; b <= hi; b *= 2) out.push_back({b, EnvelopeSeconds(truth, b) * (1 + n.Uniform(noise))});
  return out;
}

}  // namespace

TEST_CASE("an exact alpha-beta line is recovered as one segment") {
  // t = 10 us + b / (100 GB/s), 1 KiB .. 1 GiB.
  const auto points = Curve(Segs({{10, 100}}), 1024, 1 << 30, 0);
  const EnvelopeFit fit = FitEnvelope(points).value();
  REQUIRE(fit.segments.size() == 1);
  CHECK(fit.segments[0].alpha_us == doctest::Approx(10).epsilon(1e-9));
  CHECK(fit.segments[0].algbw_gb_per_s == doctest::Approx(100).epsilon(1e-9));
  for (bool o : fit.outlier) CHECK_FALSE(o);
}

TEST_CASE("a noisy line is recovered within three standard errors") {
  // 256 B .. 1 GiB: 23 sizes, the crossover alpha x B = 1 MB splits them
  // 12 latency-bound / 11 bandwidth-bound. e = 3%: sigma = 1.73%, standard
  // error about 1.73% / sqrt(11) = 0.52% for each parameter; 3 x = 1.6%.
  const auto points = Curve(Segs({{10, 100}}), 256, 1 << 30, 0.03);
  const EnvelopeFit fit = FitEnvelope(points).value();
  REQUIRE(fit.segments.size() == 1);
  CHECK(fit.segments[0].alpha_us == doctest::Approx(10).epsilon(0.016));
  CHECK(fit.segments[0].algbw_gb_per_s == doctest::Approx(100).epsilon(0.016));
  CHECK(fit.relative_scale < 0.03);
}

TEST_CASE("injected outliers get weight 0 and do not move the fit") {
  // The noisy line above with three points 3x too slow (a stalled
  // iteration) and one 3x too fast: each is > 100 scales off, so Tukey's
  // weight is 0 and the tolerance is the noise's, as above.
  auto points = Curve(Segs({{10, 100}}), 256, 1 << 30, 0.03);
  points[2].seconds *= 3;
  points[9].seconds *= 3;
  points[17].seconds *= 3;
  points[20].seconds /= 3;
  const EnvelopeFit fit = FitEnvelope(points).value();
  REQUIRE(fit.segments.size() == 1);
  CHECK(fit.segments[0].alpha_us == doctest::Approx(10).epsilon(0.016));
  CHECK(fit.segments[0].algbw_gb_per_s == doctest::Approx(100).epsilon(0.016));
  for (int i : {2, 9, 17, 20}) CHECK(fit.outlier[i]);
  int flagged = 0;
  for (bool o : fit.outlier) flagged += o;
  CHECK(flagged == 4);
}

TEST_CASE("a protocol switch is found as the lower envelope of two segments") {
  // LL-like 5 us + b / 20 GB/s below, Simple-like 30 us + b / 150 GB/s
  // above; they cross at b = 25 us / (1/20 - 1/150) ns/B = 577 kB. 1 KiB ..
  // 1 GiB, 21 sizes, e = 2% (sigma 1.15%). The bandwidths are set by about
  // 4 sizes each near the ends of their runs, so 3 x 1.15% / sqrt(4) = 1.7%;
  // the alphas by the 4-5 smallest sizes of each run, likewise. We allow 3%.
  const auto truth = Segs({{5, 20}, {30, 150}});
  const auto points = Curve(truth, 1024, 1 << 30, 0.02);
  const EnvelopeFit fit = FitEnvelope(points).value();
  REQUIRE(fit.segments.size() == 2);
  CHECK(fit.segments[0].alpha_us == doctest::Approx(5).epsilon(0.03));
  CHECK(fit.segments[0].algbw_gb_per_s == doctest::Approx(20).epsilon(0.03));
  CHECK(fit.segments[1].alpha_us == doctest::Approx(30).epsilon(0.03));
  CHECK(fit.segments[1].algbw_gb_per_s == doctest::Approx(150).epsilon(0.03));
  // Where the fitted segments cross: within 10% of the true 577 kB.
  const auto& a = fit.segments[0];
  const auto& b = fit.segments[1];
  const double cross = (b.alpha_us - a.alpha_us) * 1e-6 / (1 / (a.algbw_gb_per_s * 1e9) - 1 / (b.algbw_gb_per_s * 1e9));
  CHECK(cross == doctest::Approx(25e-6 / (1 / 20e9 - 1 / 150e9)).epsilon(0.10));
}

TEST_CASE("three protocols give three segments; one is not enough") {
  // LL 4 us / 10 GB/s, LL128 12 us / 60 GB/s, Simple 40 us / 200 GB/s: the
  // switches sit at 96 kB and 2 MB. 256 B .. 4 GiB, 25 sizes, e = 1%.
  const auto truth = Segs({{4, 10}, {12, 60}, {40, 200}});
  const auto points = Curve(truth, 256, 4.0 * (1 << 30), 0.01);
  const EnvelopeFit three = FitEnvelope(points).value();
  CHECK(three.segments.size() == 3);
  for (const TimedBytes& p : points) {
    CHECK(EnvelopeSeconds(three.segments, p.bytes) == doctest::Approx(p.seconds).epsilon(0.03));
  }
  // Forced to one segment, some size is off by more than 50%.
  const EnvelopeFit one = FitEnvelope(points, {.max_segments = 1}).value();
  double worst = 0;
  for (const TimedBytes& p : points) worst = std::max(worst, std::abs(EnvelopeSeconds(one.segments, p.bytes) / p.seconds - 1));
  CHECK(worst > 0.5);
}

TEST_CASE("the fitted curve never falls as bytes grow, even on very noisy data") {
  // e = 40%: the fit may be poor, but every segment has alpha >= 0 and a
  // positive slope, so the envelope is non-decreasing.
  const auto points = Curve(Segs({{5, 20}, {30, 150}}), 1024, 1 << 30, 0.4, 99);
  const EnvelopeFit fit = FitEnvelope(points).value();
  for (const AlphaBetaSegment& s : fit.segments) {
    CHECK(s.alpha_us >= 0);
    CHECK(s.algbw_gb_per_s > 0);
  }
  double last = 0;
  for (double b = 512; b <= 2.0 * (1 << 30); b *= 1.1) {
    const double t = EnvelopeSeconds(fit.segments, b);
    CHECK(t >= last);
    last = t;
  }
}

TEST_CASE("repeated sizes are fitted together; one size is refused") {
  std::vector<TimedBytes> points;
  for (double b : {1e3, 1e3, 1e6, 1e6, 1e9, 1e9}) points.push_back({b, 10e-6 + b / 100e9});
  const EnvelopeFit fit = FitEnvelope(points).value();
  CHECK(fit.segments.size() == 1);
  CHECK(fit.segments[0].algbw_gb_per_s == doctest::Approx(100).epsilon(1e-9));

  Result<EnvelopeFit> one = FitEnvelope({{1e3, 1e-5}, {1e3, 1.1e-5}});
  REQUIRE_FALSE(one.ok());
  CHECK(one.status().message() == "a fit needs at least 2 distinct sizes, found 1");
  CHECK_FALSE(FitEnvelope({{1e3, 0}, {1e4, 1e-5}}).ok());
  CHECK_FALSE(FitEnvelope({{1e3, NAN}, {1e4, 1e-5}}).ok());
}
