// Numbers typed by a person (command-line values and the numbers inside
// them): one rule, so every flag takes the same forms. An integer is an
// optional '-' and decimal digits, nothing else: no sign '+', no hex or
// octal prefix, no exponent, no space before or after, and it must fit the
// type (no saturation). A real number is an optional '-', decimal digits
// with an optional fraction and an optional exponent (e, E), and finite:
// no inf, nan, hex floats or spaces. Ranges beyond the type's are the
// caller's (each flag documents its own).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace foldplan {

std::optional<int64_t> ParseDecimalInteger(std::string_view text);
// Digits only (no '-'): the seeds and sizes that are unsigned.
std::optional<uint64_t> ParseDecimalUnsigned(std::string_view text);
std::optional<double> ParseDecimalNumber(std::string_view text);

}  // namespace foldplan
