// A measured time-against-bytes curve fitted as the lower envelope of up
// to three alpha-beta segments, t(b) = min_k (alpha_k + b / B_k): protocol
// switches (LL -> LL128 -> Simple) make one straight line wrong
// (../shared/reference/cost-model.md section 3). Every fit is in relative
// error, so a 10 us point counts as much as a 10 ms one. The method, in
// full in doc/cost-model-comm.md section 5:
//  - one segment: least squares of (alpha + beta b_i) / t_i - 1, weighted
//    (Eigen's QR of the two-column system), with alpha >= 0 and beta > 0,
//    so every segment, and hence the envelope, never falls as bytes grow;
//  - outliers: iteratively reweighted least squares with Tukey's biweight
//    (c = 4.685) on the relative residuals, scaled by 1.4826 x their
//    median absolute deviation (at least kMinRelativeScale): a point further
//    than c scales from the curve gets weight 0, one inside about 1;
//  - segments: every split of the sorted sizes into K contiguous runs of at
//    least kMinSizesPerSegment sizes (K = 1 .. max_segments), scored by the
//    sum of the smallest 75% of squared relative residuals of the envelope
//    (trimmed, so outliers do not choose the split); one more segment only
//    when it cuts that score 4-fold (halves the rms relative error).
#pragma once

#include <vector>

#include "core/status.h"
#include "costmodel/comm_params.h"

namespace foldplan {

struct TimedBytes {
  double bytes = 0;
  double seconds = 0;
};

struct EnvelopeFitOptions {
  int max_segments = 3;  // [1, 3]
};

// Sizes per segment when a curve has more than one (3: two points always
// fit a line exactly, and say nothing of its error).
inline constexpr int kMinSizesPerSegment = 3;
// The smallest residual scale the outlier weights use (1%): timers and
// clocks resolve no better, and an exact synthetic curve would otherwise
// call every point an outlier.
inline constexpr double kMinRelativeScale = 0.01;

struct EnvelopeFit {
  // Ascending bandwidth; each is the lowest at some fitted size.
  std::vector<AlphaBetaSegment> segments;
  std::vector<bool> outlier;    // per input point: weight 0 in the final fit
  double relative_scale = 0;    // 1.4826 x MAD of the final relative residuals
};

// Fails when the points have fewer than two distinct sizes or a time or
// size that is not positive and finite.
Result<EnvelopeFit> FitEnvelope(const std::vector<TimedBytes>& points, const EnvelopeFitOptions& options = {});

// min_k (alpha_k + bytes / B_k), seconds; 0 for no segments.
double EnvelopeSeconds(const std::vector<AlphaBetaSegment>& segments, double bytes);

}  // namespace foldplan
