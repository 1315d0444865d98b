// The pipeline schedules' names (inputs/pipeline_schedule.h): every name
// reads back as its schedule, the command-line aliases too, and the implied
// schedule follows vpp.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "inputs/pipeline_schedule.h"

using namespace foldplan;

TEST_CASE("every schedule's name reads back as the schedule, in enum order") {
  std::set<std::string> names;
  for (int i = 0; i < kPipelineScheduleCount; ++i) {
    const PipelineSchedule s = kAllPipelineSchedules[static_cast<size_t>(i)];
    CHECK(static_cast<int>(s) == i);
    CHECK(PipelineScheduleNamed(Name(s)) == s);
    names.insert(Name(s));
  }
  CHECK(names == std::set<std::string>{"1f1b", "interleaved-1f1b", "gpipe", "zb-h1", "dualpipev"});
  // The values the layout files and plan files already use keep their numbers.
  CHECK(static_cast<int>(PipelineSchedule::k1F1B) == 0);
  CHECK(static_cast<int>(PipelineSchedule::kInterleaved1F1B) == 1);
}

TEST_CASE("the command-line aliases interleaved and zb name their schedules; other text names none") {
  CHECK(PipelineScheduleNamed("interleaved") == PipelineSchedule::kInterleaved1F1B);
  CHECK(PipelineScheduleNamed("zb") == PipelineSchedule::kZeroBubbleH1);
  CHECK_FALSE(PipelineScheduleNamed("1F1B"));  // names are lower case
  CHECK_FALSE(PipelineScheduleNamed("dualpipe"));
  CHECK_FALSE(PipelineScheduleNamed(""));
  CHECK(PipelineScheduleChoices() ==
        "1f1b, interleaved-1f1b (alias interleaved), gpipe, zb-h1 (alias zb), dualpipev");
}

TEST_CASE("the implied schedule is interleaved 1F1B with vpp > 1, else 1F1B") {
  CHECK(DefaultSchedule(1) == PipelineSchedule::k1F1B);
  CHECK(DefaultSchedule(2) == PipelineSchedule::kInterleaved1F1B);
  CHECK(DefaultSchedule(8) == PipelineSchedule::kInterleaved1F1B);
}
