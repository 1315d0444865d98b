#include "inputs/pipeline_schedule.h"

#include <iterator>

namespace foldplan {
namespace {

struct ScheduleName {
  PipelineSchedule schedule;
  const char* name;
  const char* alias;  // the command line's short form, or null
};

// In enum order (Name indexes it).
constexpr ScheduleName kNames[] = {
    {PipelineSchedule::k1F1B, "1f1b", nullptr},
    {PipelineSchedule::kInterleaved1F1B, "interleaved-1f1b", "interleaved"},
    {PipelineSchedule::kGPipe, "gpipe", nullptr},
    {PipelineSchedule::kZeroBubbleH1, "zb-h1", "zb"},
    {PipelineSchedule::kDualPipeV, "dualpipev", nullptr},
};
static_assert(std::size(kNames) == kPipelineScheduleCount);

constexpr bool InEnumOrder() {
  for (int i = 0; i < kPipelineScheduleCount; ++i) {
    if (kNames[i].schedule != kAllPipelineSchedules[static_cast<size_t>(i)] ||
        static_cast<int>(kNames[i].schedule) != i) {
      return false;
    }
  }
  return true;
}
static_assert(InEnumOrder());

}  // namespace

const char* Name(PipelineSchedule schedule) {
  const int i = static_cast<int>(schedule);
  return i >= 0 && i < kPipelineScheduleCount ? kNames[i].name : "?";
}

std::optional<PipelineSchedule> PipelineScheduleNamed(std::string_view name) {
  for (const ScheduleName& n : kNames) {
    if (name == n.name || (n.alias && name == n.alias)) return n.schedule;
  }
  return std::nullopt;
}

std::string PipelineScheduleChoices() {
  std::string out;
  for (const ScheduleName& n : kNames) {
    out += (out.empty() ? "" : ", ") + std::string(n.name);
    if (n.alias) out += " (alias " + std::string(n.alias) + ")";
  }
  return out;
}

PipelineSchedule DefaultSchedule(int vpp) {
  return vpp > 1 ? PipelineSchedule::kInterleaved1F1B : PipelineSchedule::k1F1B;
}

}  // namespace foldplan
