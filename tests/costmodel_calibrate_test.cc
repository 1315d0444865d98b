// calibrate (costmodel/calibrate.h): measured series placed on the cluster,
// the seeded hold-out, fits scored on held-out sizes only, and the v2 file
// read back by LoadCommParams.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>

#include "core/atomic_file.h"
#include "core/json_check.h"
#include "costmodel/calibrate.h"
#include "costmodel/collective.h"
#include "costmodel/evaluate.h"
#include "inputs/loader.h"
#include "inputs/measurements.h"
#include "inputs/nccl_tests_log.h"
#include "topology/topology.h"

using namespace foldplan;

namespace {

const std::string kData = FOLDPLAN_TEST_DATA_DIR;

ClusterSpec H100() { return LoadCluster("h100-dgx-16n").value(); }

// A series of `ranks` GPUs on node 0 with times alpha + bytes / B at
// 1 KiB x 2^i, i < sizes.
MeasuredSeries Synthetic(const ClusterSpec& cluster, int ranks, double alpha_s, double gb_per_s, int sizes) {
  const Topology topo = Topology::Build(cluster).value();
  std::vector<int> gpus;
  for (int g = 0; g < ranks; ++g) gpus.push_back(g);
  MeasuredSeries s;
  s.span = topo.Span(gpus);
  s.key = {Collective::kAllReduce, ranks, ClassOf(s.span), RanksPerDomainOf(s.span)};
  s.sources = {"synthetic"};
  for (int i = 0; i < sizes; ++i) {
    const double b = 1024.0 * std::pow(2.0, i);
    s.points.push_back({b, alpha_s + b / (gb_per_s * 1e9), "synthetic " + std::to_string(i)});
  }
  return s;
}

Calibration Run(std::vector<MeasuredSeries> series, const CalibrateOptions& o = {}) {
  return Calibrate(std::move(series), {}, {}, {}, H100(), o).value();
}

}  // namespace

TEST_CASE("an nccl-tests run on one host is an intra-domain series, two hosts an inter-domain one") {
  const ClusterSpec cluster = H100();
  const NcclTestsLog one = LoadNcclTestsLog(kData + "/nccl_tests/all_reduce_perf_h100x8.log").value();
  const MeasuredSeries s1 = SeriesFromNcclTests(one, Topology::Build(cluster).value()).value();
  CHECK(Name(s1.key) == "all_reduce/8/intra_domain/8");
  CHECK(s1.points.size() == one.rows.size());
  CHECK(s1.points.front().bytes == one.rows.front().size_bytes);
  CHECK(s1.points.front().seconds == doctest::Approx(one.rows.front().out_of_place.time_us * 1e-6));
  CHECK(s1.points.front().where.find("all_reduce_perf_h100x8.log:") != std::string::npos);

  const NcclTestsLog two = LoadNcclTestsLog(kData + "/nccl_tests/alltoall_perf_2x8_mpi.log").value();
  const MeasuredSeries s2 = SeriesFromNcclTests(two, Topology::Build(cluster).value()).value();
  CHECK(Name(s2.key) == "all_to_all/16/inter_domain/8");
  CHECK(s2.span.nodes == 2);
}

TEST_CASE("a measurement with wrong elements is refused, naming its file and line") {
  const NcclTestsLog log = LoadNcclTestsLog(kData + "/nccl_tests/reduce_scatter_perf_wrong.log").value();
  Result<MeasuredSeries> s = SeriesFromNcclTests(log, Topology::Build(H100()).value());
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message().find("reduce_scatter_perf_wrong.log:21:") != std::string::npos);
  CHECK(s.status().message().find("refused, not fitted") != std::string::npos);
}

TEST_CASE("a group on more hosts than the cluster has nodes is an error that names --cluster") {
  const NcclTestsLog log = LoadNcclTestsLog(kData + "/nccl_tests/alltoall_perf_2x8_mpi.log").value();
  Result<MeasuredSeries> s = SeriesFromNcclTests(log, Topology::Build(LoadCluster("h200-dgx-1n").value()).value());
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message().find("spans 2 hosts, but cluster h200-dgx-1n has 1 nodes") != std::string::npos);
}

TEST_CASE("the hold-out: round(share x sizes) interior sizes, the same for the same seed") {
  // 13 sizes, share 0.25: round(3.25) = 3 held out, never 1 KiB or 4 MiB.
  const MeasuredSeries s = Synthetic(H100(), 8, 20e-6, 100, 13);
  const Calibration a = Run({s});
  REQUIRE(a.series.size() == 1);
  const SeriesFit& f = a.series.front();
  CHECK(f.held_out_sizes == 3);
  CHECK(f.fitted_sizes == 10);
  for (double b : f.held_out_bytes) {
    CHECK(b > 1024);
    CHECK(b < 4.0 * 1024 * 1024);
  }
  CHECK(Run({s}).series.front().held_out_bytes == f.held_out_bytes);
  // Another seed draws another set (for at least one of four seeds).
  bool differs = false;
  for (uint64_t seed = 2; seed <= 5; ++seed) {
    differs |= Run({s}, {.seed = seed}).series.front().held_out_bytes != f.held_out_bytes;
  }
  CHECK(differs);
  // 3 sizes: nothing held out, no error figure.
  const Calibration small = Run({Synthetic(H100(), 8, 20e-6, 100, 3)});
  const SeriesFit& tiny = small.series.front();
  CHECK(tiny.held_out_sizes == 0);
  CHECK_FALSE(tiny.fit_error.has_value());
}

TEST_CASE("errors are measured on the held-out sizes only") {
  // An exact line with one size measured 2x too slow. Held out, the fit
  // (which never saw it) predicts half its time: |1/2 - 1| = 50%; fitted,
  // Tukey's weight drops it and the held-out sizes are exact. Either way
  // the figure is of held-out points.
  const ClusterSpec cluster = H100();
  MeasuredSeries s = Synthetic(cluster, 8, 20e-6, 100, 13);
  const std::vector<double> held = Run({s}).series.front().held_out_bytes;
  const double inside = held.front();
  double outside = 0;
  for (const MeasuredPoint& p : s.points) {
    if (p.bytes > 1024 && p.bytes < 4e6 && std::find(held.begin(), held.end(), p.bytes) == held.end()) outside = p.bytes;
  }
  for (const auto& [bytes, expect_max] : {std::pair{inside, 0.5}, std::pair{outside, 0.0}}) {
    MeasuredSeries bad = s;
    for (MeasuredPoint& p : bad.points) {
      if (p.bytes == bytes) p.seconds *= 2;
    }
    const SeriesFit f = Run({bad}).series.front();
    REQUIRE(f.fit_error.has_value());
    CHECK(f.fit_error->points == 3);
    CHECK(f.fit_error->max == doctest::Approx(expect_max).epsilon(1e-6));
  }
}

TEST_CASE("an exact curve is fitted exactly; the defaults are scored on the same points") {
  // H100 NVLink inside one node: the defaults give all-reduce by NVLS at
  // 2 x 7/9 x 0.85 x 370.8 GB/s busbw; the synthetic 20 us + b / 100 GB/s is far
  // from that, and its error is reported beside the fit's, on the 3 points.
  const MeasuredSeries s = Synthetic(H100(), 8, 20e-6, 100, 13);
  const Calibration c = Run({s});
  const SeriesFit& f = c.series.front();
  REQUIRE(f.fit.segments.size() == 1);
  CHECK(f.fit.segments[0].alpha_us == doctest::Approx(20).epsilon(1e-9));
  CHECK(f.fit.segments[0].algbw_gb_per_s == doctest::Approx(100).epsilon(1e-9));
  CHECK(f.fit_error->median < 1e-9);
  const CommParams defaults = DefaultCommParams(H100());
  std::vector<double> expected;
  for (double b : f.held_out_bytes) {
    const double measured = 20e-6 + b / 100e9;
    expected.push_back(std::abs(CollectiveTime(Collective::kAllReduce, b, s.span, defaults).seconds / measured - 1));
  }
  std::sort(expected.begin(), expected.end());
  CHECK(f.default_error->median == doctest::Approx(expected[1]));
  CHECK(f.default_error->max == doctest::Approx(expected[2]));
  // busbw at large sizes: 100 GB/s x 2 x 7/8; the line: NVLS at line rate,
  // the port carrying 9/8 of the buffer: 450 x 8/9 x 14/8 = 2 x 7/9 x 450 = 700.
  CHECK(f.busbw_at_large_gb_per_s == doctest::Approx(175));
  CHECK(f.line_busbw_gb_per_s == doctest::Approx(700).epsilon(0.001));
  CHECK(c.warnings.empty());
}

TEST_CASE("series of one shape measured under different link sharing are merged with a warning") {
  MeasuredSeries a = Synthetic(H100(), 8, 20e-6, 100, 13), b = a;
  b.groups_sharing_links = 2;
  const Calibration c = Run({a, b});
  REQUIRE(c.series.size() == 1);
  CHECK(c.series.front().series.points.size() == 26);
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0] == "all_reduce/8/intra_domain/8: merged measurements taken with 1 and 2 groups sharing a "
                         "host's links; if they differ, calibrate each apart");
}

TEST_CASE("a series past kMaxSeriesPoints, or nothing to fit, is an error") {
  MeasuredSeries big = Synthetic(H100(), 8, 20e-6, 100, 13);
  while (big.points.size() <= kMaxSeriesPoints) big.points.push_back(big.points.front());
  Result<Calibration> r = Calibrate({big}, {}, {}, {}, H100(), {});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("at most 16384 are fitted per series") != std::string::npos);
  Result<Calibration> none = Calibrate({}, {}, {}, {{"m.json", "foldbench", "", 0}}, H100(), {});
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message() == "nothing to fit in m.json: no collective sweep, nccl-tests row or compute case");
}

TEST_CASE("a fit above the line rate is a warning") {
  // 2000 GB/s algbw on 8 ranks: busbw 3500 GB/s against NVLS's 700 at line
  // rate (2 x 7/9 x 450; the 64 GiB probe's 25 us take 0.1 GB/s off).
  const Calibration c = Run({Synthetic(H100(), 8, 5e-6, 2000, 13)});
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0].find("above the 699.9") != std::string::npos);
}

TEST_CASE("the v2 file reads back: same fits, GPU checked, v1 still read") {
  const ClusterSpec cluster = H100();
  const NcclTestsLog log = LoadNcclTestsLog(kData + "/nccl_tests/all_reduce_perf_h100x8.log").value();
  std::vector<MeasuredSeries> series = {SeriesFromNcclTests(log, Topology::Build(cluster).value()).value()};
  const Calibration c =
      Calibrate(series, {}, {log}, {{"all_reduce_perf_h100x8.log", "nccl-tests", "abc", 1}}, cluster, {}).value();
  CHECK(c.gpu == "NVIDIA H100 80GB HBM3");
  const std::string path = "costmodel_calibrate_test.calibration.json";
  REQUIRE(WriteFileAtomically(path, CalibrationFileJson(c, cluster, "2026-12-01T00:00:00Z", "test").dump(1)).ok());
  // "NVIDIA H100 80GB HBM3" and the cluster's "H100 SXM5" are one part: no force needed.
  const CommParams p = LoadCommParams(path, cluster).value();
  REQUIRE(p.fits.size() == 1);
  CHECK(p.fits[0].collective == Collective::kAllReduce);
  CHECK(p.fits[0].gpus == 8);
  CHECK(p.fits[0].placement == PlacementClass::kIntraDomain);
  CHECK(p.fits[0].ranks_per_domain == 8);
  CHECK(p.fits[0].segments == c.series[0].fit.segments);
  CHECK(p.fits[0].max_bytes == c.series[0].max_bytes);
  CHECK(p.calibrated_gpu == "NVIDIA H100 80GB HBM3");
  // On a B200 cluster: refused unless forced.
  const ClusterSpec b200 = LoadCluster("b200-dgx-32n").value();
  Result<CommParams> refused = LoadCommParams(path, b200);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("/gpu: calibrated on \"NVIDIA H100 80GB HBM3\", but the cluster's GPU is") !=
        std::string::npos);
  CHECK(LoadCommParams(path, b200, {.allow_other_gpu = true}).ok());
  std::remove(path.c_str());
}

TEST_CASE("a calibration covering some classes records each missing class once") {
  const ClusterSpec cluster = H100();
  const Topology topo = Topology::Build(cluster).value();
  CommParams p = DefaultCommParams(cluster);
  p.fits.push_back({Collective::kAllReduce, 8, PlacementClass::kIntraDomain, {{20, 100}}, 8});
  p.misses = std::make_shared<FitMisses>();
  std::vector<int> node, two_nodes;
  for (int g = 0; g < 8; ++g) node.push_back(g);
  for (int g = 0; g < 16; ++g) two_nodes.push_back(g);
  const GroupSpan intra = topo.Span(node), inter = topo.Span(two_nodes);
  CHECK(CollectiveTime(Collective::kAllReduce, 1e6, intra, p).seconds == doctest::Approx(20e-6 + 1e6 / 100e9));
  CHECK(std::string(CollectiveTime(Collective::kAllReduce, 1e6, intra, p).algorithm) == "calibrated");
  for (int i = 0; i < 3; ++i) {
    CollectiveTime(Collective::kAllReduce, 1e6 * (i + 1), inter, p);
    CollectiveTime(Collective::kAllGather, 1e6 * (i + 1), intra, p);
  }
  const auto missing = p.misses->List();
  REQUIRE(missing.size() == 2);
  CHECK(missing[0] == std::pair{Collective::kAllGather, PlacementClass::kIntraDomain});
  CHECK(missing[1] == std::pair{Collective::kAllReduce, PlacementClass::kInterDomain});
  CHECK(p.misses->ListBeyond().empty());  // the fit knows no largest size
  // A fit measured up to 4 MiB, asked for 64 MiB: extended, and recorded once.
  p.fits[0].max_bytes = 4 << 20;
  CollectiveTime(Collective::kAllReduce, 1 << 20, intra, p);
  CHECK(p.misses->ListBeyond().empty());
  CHECK(CollectiveTime(Collective::kAllReduce, 64 << 20, intra, p).seconds == doctest::Approx(20e-6 + (64 << 20) / 100e9));
  CollectiveTime(Collective::kAllReduce, 128 << 20, intra, p);
  REQUIRE(p.misses->ListBeyond().size() == 1);
  CHECK(p.misses->ListBeyond()[0] == std::pair{Collective::kAllReduce, PlacementClass::kIntraDomain});
  // Defaults alone record nothing.
  CHECK_FALSE(DefaultCommParams(cluster).misses);
}

TEST_CASE("foldbench's compute cases become the file's compute section, and the cost model uses it") {
  const MeasurementSet set = LoadMeasurements(kData + "/inputs/measurements_compute_synthetic.json").value();
  ClusterSpec h200 = LoadCluster("h200-dgx-1n").value();
  const Calibration c = Calibrate({}, {set}, {}, {}, h200, {}).value();
  REQUIRE_FALSE(c.compute.is_null());
  REQUIRE(c.compute["grouped_gemm_bf16"].size() >= 1);
  const nlohmann::json point = c.compute["grouped_gemm_bf16"][0];
  const std::string path = "costmodel_calibrate_test.compute.json";
  REQUIRE(WriteFileAtomically(path, CalibrationFileJson(c, h200, "t", "test").dump(1)).ok());
  h200.calibration = path;
  const ModelSpec model = LoadModel("mixtral-8x7b").value();
  const JobSpec job = LoadJob("default").value();
  auto cost = CostModel::Create(h200, model, job);
  REQUIRE(cost.ok());
  CHECK(cost.value()->profile().GroupedGemmFlopsPerS(point["experts"].get<int>(), point["tokens_per_expert"].get<double>(),
                                                     point["K"].get<double>(), point["N"].get<double>()) ==
        doctest::Approx(point["tflops"].get<double>() * 1e12));
  std::remove(path.c_str());
}
