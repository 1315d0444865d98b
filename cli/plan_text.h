// The text a costed layout is shown as, shared by `plan`, `explain` and
// `diff`: durations, the options column, the full breakdown, and how two
// layouts differ (plan's "why it wins" and diff's "the gap"). Differences
// are always b minus a: positive where b spends more.
#pragma once

#include <string>
#include <vector>

#include "costmodel/evaluate.h"
#include "planner/search.h"

namespace foldplan {

// "16.45 s", "71.9 ms", "970 us".
std::string Seconds(double s);
// plan --stats: "search: C candidates, L legal and scored (F fit), P pruned
// by the bound, S scored in full; T s on N threads, peak RSS M MiB"
// (pruned: fitting layouts whose objective was proven above the worst kept
// one, so not computed; the count depends on the threads' timing).
std::string SearchStatsLine(const SearchResult& result, double seconds, int threads);
// This process's peak resident set so far, MiB (getrusage).
double PeakRssMiB();
// The options column of plan's table: "mbs1 none ulysses packed fp8".
std::string OptionsText(const Layout& layout);
// A layout in the compact notation every table and sentence names it by:
// "tp2 cp1 dp8 pp16x4 | ep64 etp1 edp2, mbs1 none deepep" (the degrees,
// then the options). The canonical `--layout` text is printed once, for
// the layout a command is about (BreakdownText), and whole in --json.
std::string CompactLayout(const Layout& layout);
// "MFU 59.1% of bf16 peak"; for an FP8 recipe the precision's peak too:
// "MFU 38.0% of bf16 peak, 19.0% of fp8 peak".
std::string MfuText(const StepBreakdown& step, Precision precision);
// "231.5 TFLOP/s per GPU": model FLOPs per step / step time / GPUs.
std::string TflopsText(const StepBreakdown& step);
// The largest exposed communication kinds, "ep_dispatch 12 ms, tp_ag 3 ms" ("-": none).
std::string TopExposed(const Evaluation& e, size_t n);
// explain's breakdown: the step, pipeline, the attention kernels (with the
// job: its backend, and ring CP's steps), throughput, every collective and
// memory term. Its tables narrowed to `columns` (0: as wide as they are).
std::string BreakdownText(const Evaluation& e, const JobSpec* job = nullptr, size_t columns = 0);

struct Difference {
  std::string what;  // a step component or a memory term's name
  double delta = 0;  // b - a: seconds (step) or GiB (memory)
};
// The five parts the step is a sum of (compute x micro-batches, exposed
// communication in the pipeline, bubble, exposed data-parallel, optimizer),
// b - a, largest magnitude first; those under 1 us left out.
std::vector<Difference> StepDifferences(const Evaluation& a, const Evaluation& b);
// The memory terms of each one's worst stage, b - a in GiB, largest
// magnitude first; those under 0.005 GiB left out.
std::vector<Difference> MemoryDifferences(const Evaluation& a, const Evaluation& b);

// Why `a` ranks before `b` under `objective`: for throughput, the step time
// b takes more and the step differences, then both peaks; for memory, the
// peak b needs more and the memory differences, then both step times.
// `b_name` is how the first line calls b ("the runner-up (...)").
std::string WhyItWinsText(const Evaluation& a, const Evaluation& b, Objective objective, const std::string& b_name);
// The step differences as plan has always printed them (the recipe comparison uses them).
std::string StepDifferencesText(const Evaluation& a, const Evaluation& b);

}  // namespace foldplan
