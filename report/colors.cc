#include "report/colors.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "costmodel/memory.h"
#include "report/svg.h"

namespace foldplan {

namespace {
// Tableau 10 lightened: labels in dark text stay readable on every one.
constexpr const char* kPalette[10] = {"#8fb8de", "#ffbe7d", "#8cd17d", "#ff9d9a", "#c5b0d5",
                                      "#d4a6a0", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5"};
constexpr const char* kSeries[12] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                                     "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#d37295"};

// Every term of costmodel/memory.h, a Tableau 20 colour each: weights and
// their copies blue, gradients orange, optimizer green, activations red,
// buffers brown and grey.
constexpr std::pair<const char*, const char*> kTermColors[] = {
    {memory_term::kParameters, "#4e79a7"},
    {memory_term::kFp8WeightCopies, "#a0cbe8"},
    {memory_term::kFp8ScalingState, "#499894"},
    {memory_term::kGradients, "#f28e2b"},
    {memory_term::kOptimizerStates, "#59a14f"},
    {memory_term::kFsdpGatheredParameters, "#86bcb6"},
    {memory_term::kFsdpUnshardedGradients, "#ffbe7d"},
    {memory_term::kActivations, "#e15759"},
    {memory_term::kRecomputeWorkingSet, "#ff9d9a"},
    {memory_term::kMtpActivations, "#d37295"},
    {memory_term::kEmbeddingActivations, "#fabfd2"},
    {memory_term::kOutputLogits, "#b07aa1"},
    {memory_term::kMtpLogits, "#d4a6c8"},
    {memory_term::kDispatchBuffers, "#b6992d"},
    {memory_term::kEpOverlap, "#f1ce63"},
    {memory_term::kFlexDispatcherBuffers, "#8cd17d"},
    {memory_term::kNcclBuffers, "#9d7660"},
    {memory_term::kOptimizerBuckets, "#d7b5a6"},
    {memory_term::kCudaContext, "#79706e"},
    {memory_term::kFragmentation, "#bab0ac"},
};
static_assert(std::size(kTermColors) == kMemoryTermCount, "a colour for every memory term");

// The step's parts (breakdown_svg.cc names them); "exposed <kind>" parts
// are hashed.
constexpr std::pair<const char*, const char*> kStepColors[] = {
    {"compute", "#4e79a7"},          {"exposed host", "#b07aa1"},
    {"other pipeline time", "#bab0ac"}, {"pipeline bubble", "#79706e"},
    {"data-parallel exposed", "#f28e2b"}, {"optimizer", "#59a14f"},
    {"host syncs", "#d4a6c8"},
};

// A hue from the name (FNV-1a), the same in every run and report.
std::string HashedColor(std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  const double hue = static_cast<double>(h % 360);
  const int light = 42 + static_cast<int>((h >> 20) % 3) * 8;  // 42, 50, 58 %
  return "hsl(" + Num(hue, 0) + ",55%," + std::to_string(light) + "%)";
}

template <size_t N>
std::string Lookup(const std::pair<const char*, const char*> (&table)[N], std::string_view name) {
  for (const auto& [key, color] : table) {
    if (name == key) return color;
  }
  return HashedColor(name);
}
}  // namespace

std::string GroupColor(int index, int count) {
  if (count <= 10) return kPalette[index % 10];
  const double hue = std::fmod(index * 137.508, 360.0);
  const int light = 68 + (index % 3) * 6;  // 68, 74, 80 %: more distinct neighbours
  return "hsl(" + Num(hue, 1) + ",60%," + std::to_string(light) + "%)";
}

std::string MemoryTermColor(std::string_view term) { return Lookup(kTermColors, term); }

std::string StepPartColor(std::string_view part) { return Lookup(kStepColors, part); }

std::string SeriesColor(int index) { return kSeries[index % 12]; }

std::string TextColorOn(std::string_view fill) {
  if (fill.size() != 7 || fill[0] != '#') return "#ffffff";  // the hashed hues are mid-dark
  unsigned r = 0, g = 0, b = 0;
  std::sscanf(std::string(fill).c_str(), "#%02x%02x%02x", &r, &g, &b);
  const double luminance = 0.299 * r + 0.587 * g + 0.114 * b;  // ITU-R BT.601 weights
  return luminance > 150 ? "#1f2733" : "#ffffff";
}

}  // namespace foldplan
