#include "core/decimal_text.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace foldplan {
namespace {

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

std::optional<int64_t> ParseDecimalInteger(std::string_view text) {
  const std::string_view digits = !text.empty() && text[0] == '-' ? text.substr(1) : text;
  if (!AllDigits(digits)) return std::nullopt;
  int64_t v = 0;
  // from_chars reports a value outside int64 as an error: no saturation.
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<uint64_t> ParseDecimalUnsigned(std::string_view text) {
  if (!AllDigits(text)) return std::nullopt;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<double> ParseDecimalNumber(std::string_view text) {
  // The grammar first: strtod alone would take hex, inf, nan and spaces.
  size_t i = 0;
  if (i < text.size() && text[i] == '-') ++i;
  const size_t int_start = i;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  size_t mantissa_digits = i - int_start;
  if (i < text.size() && text[i] == '.') {
    const size_t frac_start = ++i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    mantissa_digits += i - frac_start;
  }
  if (mantissa_digits == 0) return std::nullopt;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (!AllDigits(text.substr(i))) return std::nullopt;
    i = text.size();
  }
  if (i != text.size()) return std::nullopt;
  const std::string copy(text);  // strtod needs the terminating NUL
  const double v = std::strtod(copy.c_str(), nullptr);
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace foldplan
