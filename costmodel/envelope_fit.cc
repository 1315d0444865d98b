// The envelope fit (envelope_fit.h): per-segment robust least squares in
// relative error, an exhaustive search over contiguous splits of the sizes.
#include "costmodel/envelope_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <Eigen/Dense>

#include "core/median.h"

namespace foldplan {
namespace {

constexpr double kTukeyC = 4.685;        // 95% efficiency at normal errors
constexpr double kMadToSigma = 1.4826;   // MAD of a normal sample / its sigma
constexpr int kIrlsIterations = 12;
constexpr double kTrimmedShare = 0.75;   // residuals the split score keeps
// A further segment must cut the trimmed sum of squares by this factor
// (halve the rms relative error): a protocol switch misfits one line by
// tens of percent near the switch, noise of a few percent does not; any
// gentler threshold lets the search fit noise with a second line.
constexpr double kSegmentGain = 4;
// The smallest squared relative residual the score believes (0.01%):
// below it, splits and segment counts are told apart by noise in the
// last digits, and more segments would always win.
constexpr double kScoreFloor = 1e-8;
// Slowest segment slope: 1 / (1e9 GB/s), the calibration file's largest rate.
constexpr double kMinBeta = 1e-18;  // s / byte
// More distinct sizes than this: splits are tried on a grid of this many
// positions, so K = 3 stays O(kSplitGrid^2) fits.
constexpr int kSplitGrid = 48;

struct Line {
  double alpha = 0;  // s
  double beta = 0;   // s / byte
  double At(double bytes) const { return alpha + beta * bytes; }
};


// Weighted least squares of (alpha + beta x_i) / t_i = 1, alpha >= 0, beta >= kMinBeta.
Line WeightedFit(const std::vector<TimedBytes>& p, const std::vector<int>& idx, const std::vector<double>& w) {
  const int n = static_cast<int>(idx.size());
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd y(n);
  for (int r = 0; r < n; ++r) {
    const TimedBytes& q = p[idx[r]];
    const double sw = std::sqrt(w[r]);
    a(r, 0) = sw / q.seconds;
    a(r, 1) = sw * q.bytes / q.seconds;
    y(r) = sw;
  }
  // Columns differ by ~10 orders of magnitude (1/t against bytes/t): scale
  // each to unit norm before the QR, and back after.
  Eigen::Vector2d norm(a.col(0).norm(), a.col(1).norm());
  Line line;
  if (norm(0) == 0) return line;  // every weight 0: nothing to fit
  if (norm(1) == 0) norm(1) = 1;
  const Eigen::MatrixXd scaled = a * norm.cwiseInverse().asDiagonal();
  const Eigen::Vector2d x = scaled.colPivHouseholderQr().solve(y).cwiseQuotient(norm);
  line.alpha = x(0);
  line.beta = x(1);
  // The constraints, one at a time: a one-variable least squares each.
  auto beta_only = [&] {
    const double num = a.col(1).dot(y), den = a.col(1).squaredNorm();
    return den > 0 ? num / den : kMinBeta;
  };
  auto alpha_only = [&](double beta) {
    const Eigen::VectorXd rest = y - beta * a.col(1);
    return std::max(0.0, a.col(0).dot(rest) / a.col(0).squaredNorm());
  };
  if (!(line.alpha >= 0)) {
    line.alpha = 0;
    line.beta = beta_only();
  }
  if (!(line.beta >= kMinBeta)) {
    line.beta = kMinBeta;
    line.alpha = alpha_only(line.beta);
  }
  return line;
}

double TukeyWeight(double r, double scale) {
  const double u = r / (kTukeyC * scale);
  return std::abs(u) >= 1 ? 0 : (1 - u * u) * (1 - u * u);
}

double RobustScale(const std::vector<double>& residuals) {
  std::vector<double> abs_dev;
  abs_dev.reserve(residuals.size());
  for (double r : residuals) abs_dev.push_back(std::abs(r));
  return std::max(kMinRelativeScale, kMadToSigma * Median(abs_dev));
}

// One segment's robust line over the points `idx`.
Line RobustFit(const std::vector<TimedBytes>& p, const std::vector<int>& idx) {
  std::vector<double> w(idx.size(), 1.0), r(idx.size());
  Line line = WeightedFit(p, idx, w);
  for (int it = 0; it < kIrlsIterations; ++it) {
    for (size_t i = 0; i < idx.size(); ++i) r[i] = line.At(p[idx[i]].bytes) / p[idx[i]].seconds - 1;
    const double scale = RobustScale(r);
    for (size_t i = 0; i < idx.size(); ++i) w[i] = TukeyWeight(r[i], scale);
    const Line next = WeightedFit(p, idx, w);
    const bool settled = std::abs(next.alpha - line.alpha) <= 1e-12 * std::max(line.alpha, 1e-12) &&
                         std::abs(next.beta - line.beta) <= 1e-12 * line.beta;
    line = next;
    if (settled) break;
  }
  return line;
}

double EnvelopeAt(const std::vector<Line>& lines, double bytes) {
  double t = std::numeric_limits<double>::infinity();
  for (const Line& l : lines) t = std::min(t, l.At(bytes));
  return t;
}

std::vector<double> Residuals(const std::vector<TimedBytes>& p, const std::vector<Line>& lines) {
  std::vector<double> r;
  r.reserve(p.size());
  for (const TimedBytes& q : p) r.push_back(EnvelopeAt(lines, q.bytes) / q.seconds - 1);
  return r;
}

// Sum of the smallest kTrimmedShare of squared residuals, each at least kScoreFloor.
double TrimmedScore(const std::vector<double>& r) {
  std::vector<double> sq;
  sq.reserve(r.size());
  for (double x : r) sq.push_back(std::max(x * x, kScoreFloor));
  const size_t h = std::max<size_t>(1, static_cast<size_t>(std::ceil(kTrimmedShare * sq.size())));
  std::partial_sort(sq.begin(), sq.begin() + h, sq.end());
  double s = 0;
  for (size_t i = 0; i < h; ++i) s += sq[i];
  return s;
}

struct Candidate {
  std::vector<Line> lines;
  double score = std::numeric_limits<double>::infinity();
};

// Fits one split: `starts` are the first distinct-size index of each run.
Candidate FitSplit(const std::vector<TimedBytes>& p, const std::vector<int>& first_point_of_size,
                   const std::vector<int>& starts) {
  Candidate c;
  const int sizes = static_cast<int>(first_point_of_size.size()) - 1;  // last entry: p.size()
  for (size_t k = 0; k < starts.size(); ++k) {
    const int from = starts[k], to = k + 1 < starts.size() ? starts[k + 1] : sizes;
    std::vector<int> idx;
    for (int i = first_point_of_size[from]; i < first_point_of_size[to]; ++i) idx.push_back(i);
    c.lines.push_back(RobustFit(p, idx));
  }
  c.score = TrimmedScore(Residuals(p, c.lines));
  return c;
}

// Split positions to try: every distinct size, or a grid of kSplitGrid.
std::vector<int> SplitPositions(int sizes) {
  std::vector<int> out;
  const int step = std::max(1, (sizes + kSplitGrid - 1) / kSplitGrid);
  for (int s = kMinSizesPerSegment; s <= sizes - kMinSizesPerSegment; s += step) out.push_back(s);
  return out;
}

Candidate BestSplit(const std::vector<TimedBytes>& p, const std::vector<int>& first, int segments) {
  const int sizes = static_cast<int>(first.size()) - 1;
  Candidate best;
  if (segments == 1) return FitSplit(p, first, {0});
  const std::vector<int> pos = SplitPositions(sizes);
  for (size_t i = 0; i < pos.size(); ++i) {
    if (segments == 2) {
      Candidate c = FitSplit(p, first, {0, pos[i]});
      if (c.score < best.score) best = std::move(c);
      continue;
    }
    for (size_t j = i + 1; j < pos.size(); ++j) {
      if (pos[j] - pos[i] < kMinSizesPerSegment) continue;
      Candidate c = FitSplit(p, first, {0, pos[i], pos[j]});
      if (c.score < best.score) best = std::move(c);
    }
  }
  return best;
}

}  // namespace

double EnvelopeSeconds(const std::vector<AlphaBetaSegment>& segments, double bytes) {
  if (segments.empty()) return 0;
  double t = std::numeric_limits<double>::infinity();
  for (const AlphaBetaSegment& s : segments) t = std::min(t, s.alpha_us * 1e-6 + bytes / (s.algbw_gb_per_s * 1e9));
  return t;
}

Result<EnvelopeFit> FitEnvelope(const std::vector<TimedBytes>& points, const EnvelopeFitOptions& options) {
  for (const TimedBytes& q : points) {
    if (!(q.bytes > 0 && std::isfinite(q.bytes) && q.seconds > 0 && std::isfinite(q.seconds))) {
      return Status::Error("a fitted point needs positive, finite bytes and seconds");
    }
  }
  std::vector<TimedBytes> p = points;
  std::vector<size_t> order(p.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return points[a].bytes < points[b].bytes; });
  for (size_t i = 0; i < order.size(); ++i) p[i] = points[order[i]];
  std::vector<int> first;  // index of the first point of each distinct size, then p.size()
  for (size_t i = 0; i < p.size(); ++i) {
    if (i == 0 || p[i].bytes != p[i - 1].bytes) first.push_back(static_cast<int>(i));
  }
  const int sizes = static_cast<int>(first.size());
  first.push_back(static_cast<int>(p.size()));
  if (sizes < 2) return Status::Error("a fit needs at least 2 distinct sizes, found " + std::to_string(sizes));

  // One more segment only when it at least halves the trimmed rms error.
  const int max_k = std::clamp(options.max_segments, 1, 3);
  Candidate chosen = BestSplit(p, first, 1);
  for (int k = 2; k <= max_k && k * kMinSizesPerSegment <= sizes; ++k) {
    Candidate c = BestSplit(p, first, k);
    if (c.score * kSegmentGain > chosen.score) break;
    chosen = std::move(c);
  }

  EnvelopeFit fit;
  const std::vector<double> r = Residuals(p, chosen.lines);
  fit.relative_scale = RobustScale(r);
  fit.outlier.assign(points.size(), false);
  for (size_t i = 0; i < p.size(); ++i) fit.outlier[order[i]] = TukeyWeight(r[i], fit.relative_scale) == 0;
  // Keep the segments that are the lowest at some fitted size.
  std::vector<bool> used(chosen.lines.size(), false);
  for (int s = 0; s < sizes; ++s) {
    const double b = p[first[s]].bytes;
    size_t best = 0;
    for (size_t k = 1; k < chosen.lines.size(); ++k) {
      if (chosen.lines[k].At(b) < chosen.lines[best].At(b)) best = k;
    }
    used[best] = true;
  }
  for (size_t k = 0; k < chosen.lines.size(); ++k) {
    if (!used[k]) continue;
    fit.segments.push_back({chosen.lines[k].alpha * 1e6, 1.0 / chosen.lines[k].beta / 1e9});
  }
  std::sort(fit.segments.begin(), fit.segments.end(),
            [](const AlphaBetaSegment& a, const AlphaBetaSegment& b) { return a.algbw_gb_per_s < b.algbw_gb_per_s; });
  return fit;
}

}  // namespace foldplan
