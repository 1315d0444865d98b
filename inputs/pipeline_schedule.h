// The pipeline schedules foldplan knows, and their names. One home for the
// list: the layout key (`schedule=`), the job's candidate list
// (`pipeline_schedules`), the pipeline description (planner/pipeline.h), the
// analytical step (costmodel/schedule.h), the simulator's order of work
// (sim/pipeline_order.h) and the exporters all read it from here. It sits in
// inputs/ because job files name schedules and inputs/ may not depend on the
// planner; what each schedule needs of a layout is legality's rule
// (planner/legality.h, pipeline_schedule).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace foldplan {

// doc/cost-model.md derives each one's step time; sim/pipeline_order.h
// gives each one's order of work per pipeline rank.
enum class PipelineSchedule {
  k1F1B,             // one forward, one backward (PipeDream-Flush)
  kInterleaved1F1B,  // Megatron's interleaved 1F1B over vpp model chunks per rank
  kGPipe,            // every forward, then every backward
  kZeroBubbleH1,     // Qi et al. 2023's ZB-H1: the backward split into input-gradient B and
                     // weight-gradient W, W filling the bubble; 1F1B's activation memory
  kDualPipeV,        // DeepSeek's V-shaped DualPipe (torchtitan's DualPipeV): two model chunks
                     // per rank, the second run back up the ranks (planner/pipeline.h)
};
inline constexpr int kPipelineScheduleCount = 5;
inline constexpr std::array<PipelineSchedule, kPipelineScheduleCount> kAllPipelineSchedules = {
    PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B, PipelineSchedule::kGPipe,
    PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipeV};

// "1f1b", "interleaved-1f1b", "gpipe", "zb-h1", "dualpipev".
const char* Name(PipelineSchedule schedule);
// The names above and the command-line aliases "interleaved"
// (interleaved-1f1b) and "zb" (zb-h1); nullopt for anything else.
std::optional<PipelineSchedule> PipelineScheduleNamed(std::string_view name);
// The accepted names, aliases marked, for "expected one of ..." messages.
std::string PipelineScheduleChoices();

// The schedule a layout that names none runs (the implied one):
// interleaved 1F1B when vpp > 1, else 1F1B.
PipelineSchedule DefaultSchedule(int vpp);

}  // namespace foldplan
