// A layout that names no schedule, against a job that lists schedules: the
// job's first one its pp and vpp can run (planner/layout.h, LayoutFromPins).
#include <doctest/doctest.h>

#include "planner/layout.h"

using namespace foldplan;

TEST_CASE("a layout without schedule= takes the job's first schedule its vpp runs") {
  JobSpec job;
  job.pipeline_schedules = {PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B,
                            PipelineSchedule::kDualPipeV};
  // vpp 2: 1f1b runs one chunk, so the interleaved schedule (the implied one).
  auto two = ParseLayout("tp=1,pp=4,vpp=2,ep=8,etp=1", 64, &job);
  REQUIRE(two.ok());
  CHECK(two->schedule_or_default() == PipelineSchedule::kInterleaved1F1B);
  // vpp 1: 1f1b, the first.
  auto one = ParseLayout("tp=1,pp=4,ep=8,etp=1", 64, &job);
  REQUIRE(one.ok());
  CHECK(one->schedule_or_default() == PipelineSchedule::k1F1B);
  // A schedule listed first that runs the layout stays the job's first.
  job.pipeline_schedules = {PipelineSchedule::kDualPipeV, PipelineSchedule::kInterleaved1F1B};
  auto v = ParseLayout("tp=1,pp=4,vpp=2,ep=8,etp=1", 64, &job);
  REQUIRE(v.ok());
  CHECK(v->schedule == PipelineSchedule::kDualPipeV);
  // None runs it: the first, which legality then refuses (schedule_needs).
  job.pipeline_schedules = {PipelineSchedule::kZeroBubbleH1};
  auto none = ParseLayout("tp=1,pp=4,vpp=2,ep=8,etp=1", 64, &job);
  REQUIRE(none.ok());
  CHECK(none->schedule == PipelineSchedule::kZeroBubbleH1);
  // Named: as named.
  job.pipeline_schedules = {PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B};
  auto named = ParseLayout("tp=1,pp=4,vpp=1,ep=8,etp=1,schedule=gpipe", 64, &job);
  REQUIRE(named.ok());
  CHECK(named->schedule == PipelineSchedule::kGPipe);
}
