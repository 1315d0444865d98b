// The pipeline schedules foldplan knows, and their names. One home for the
// list: the layout key (`schedule=`), the job's candidate list, the
// analytical step (costmodel/schedule.h), the simulator's order of work
// (sim/pipeline_order.h) and the exporters all read it from here.
#pragma once

#include <optional>
#include <string_view>

namespace foldplan {

// doc/cost-model.md derives each one's step time; sim/pipeline_order.h
// gives each one's order of work per pipeline rank.
enum class PipelineSchedule {
  k1F1B,             // one forward, one backward (PipeDream-Flush), vpp == 1
  kInterleaved1F1B,  // Megatron's interleaved 1F1B over vpp model chunks
  kGPipe,            // "gpipe": all forwards, then all backwards; vpp == 1
  kZeroBubbleH1,     // "zb-h1": ZB-H1 (Qi et al. 2023), backward split into B (input grad) and W (weight grad); vpp == 1
  kDualPipeV,        // "dualpipev": DeepSeek's DualPipe cut in half (torchtitan's DualPipeV), 2 chunks per rank, V-shaped
};
const char* Name(PipelineSchedule schedule);  // "1f1b", "interleaved-1f1b", "gpipe", "zb-h1", "dualpipev"

}  // namespace foldplan
