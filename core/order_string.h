// Megatron order strings: '-'-joined distinct axis names from tp, cp, ep,
// dp, pp, fastest-varying first ("tp-cp-ep-dp-pp"). The one tokenizer of
// the job reader, the legality check (which runs it per candidate, so it
// does not allocate) and the rank generator; each words its own errors.
#pragma once

#include <array>
#include <string_view>

namespace foldplan {

inline constexpr std::array<std::string_view, 5> kOrderAxisNames = {"tp", "cp", "ep", "dp", "pp"};

struct OrderString {
  enum class Problem { kNone, kEmptyToken, kUnknownAxis, kRepeatedAxis };
  Problem problem = Problem::kNone;
  std::string_view token;    // the first token at fault (a view into the input)
  std::array<int, 5> axes{};  // indices into kOrderAxisNames, in order
  int count = 0;              // axes named (the first `count` of `axes`)

  bool ok() const { return problem == Problem::kNone; }
  bool Has(int axis) const {
    for (int i = 0; i < count; ++i) {
      if (axes[static_cast<size_t>(i)] == axis) return true;
    }
    return false;
  }
};

// Reads `order` up to its first problem (an empty token, one that names no
// axis, or an axis named twice); stops there.
inline OrderString ParseOrderString(std::string_view order) {
  OrderString out;
  size_t start = 0;
  while (start <= order.size()) {
    size_t dash = order.find('-', start);
    if (dash == std::string_view::npos) dash = order.size();
    const std::string_view token = order.substr(start, dash - start);
    int axis = 0;
    while (axis < static_cast<int>(kOrderAxisNames.size()) && token != kOrderAxisNames[axis]) {
      ++axis;
    }
    using P = OrderString::Problem;
    const P problem = token.empty()                                        ? P::kEmptyToken
                      : axis == static_cast<int>(kOrderAxisNames.size()) ? P::kUnknownAxis
                      : out.Has(axis)                                      ? P::kRepeatedAxis
                                                                           : P::kNone;
    if (problem != P::kNone) {
      out.problem = problem;
      out.token = token;
      return out;
    }
    out.axes[static_cast<size_t>(out.count++)] = axis;
    start = dash + 1;
  }
  return out;
}

}  // namespace foldplan
