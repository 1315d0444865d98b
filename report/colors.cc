#include "report/colors.h"

#include <cmath>

#include "report/svg.h"

namespace foldplan {

namespace {
// Tableau 10 lightened: labels in dark text stay readable on every one.
constexpr const char* kPalette[10] = {"#8fb8de", "#ffbe7d", "#8cd17d", "#ff9d9a", "#c5b0d5",
                                      "#d4a6a0", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5"};
constexpr const char* kParts[12] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                                    "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#d37295"};
}  // namespace

std::string GroupColor(int index, int count) {
  if (count <= 10) return kPalette[index % 10];
  const double hue = std::fmod(index * 137.508, 360.0);
  const int light = 68 + (index % 3) * 6;  // 68, 74, 80 %: more distinct neighbours
  return "hsl(" + Num(hue, 1) + ",60%," + std::to_string(light) + "%)";
}

std::string PartColor(int index) { return kParts[index % 12]; }

}  // namespace foldplan
