// core/decimal_text.h: one rule for numbers a person types. Decimal digits
// (and a '-') only, fitting the type; real numbers finite and decimal.
#include <doctest/doctest.h>

#include <limits>

#include "core/decimal_text.h"

using foldplan::ParseDecimalInteger;
using foldplan::ParseDecimalNumber;
using foldplan::ParseDecimalUnsigned;

TEST_CASE("a decimal integer is digits with an optional minus, nothing else") {
  CHECK(ParseDecimalInteger("42") == 42);
  CHECK(ParseDecimalInteger("-7") == -7);
  CHECK(ParseDecimalInteger("007") == 7);  // decimal, not octal
  CHECK(ParseDecimalInteger("9223372036854775807") == std::numeric_limits<int64_t>::max());
  for (const char* bad : {"", "-", "+1", "0x10", " 1", "1 ", "1e3", "1.0", "ten", "9223372036854775808", "1\n"}) {
    CHECK_MESSAGE(!ParseDecimalInteger(bad), bad);
  }
}

TEST_CASE("an unsigned decimal integer refuses a minus and does not saturate past 2^64 - 1") {
  CHECK(ParseDecimalUnsigned("18446744073709551615") == std::numeric_limits<uint64_t>::max());
  CHECK(!ParseDecimalUnsigned("18446744073709551616"));
  CHECK(!ParseDecimalUnsigned("-1"));
  CHECK(!ParseDecimalUnsigned("1e23"));
}

TEST_CASE("a decimal number is finite, with an optional fraction and exponent, and no hex, inf or spaces") {
  CHECK(ParseDecimalNumber("0.5") == 0.5);
  CHECK(ParseDecimalNumber("-2") == -2.0);
  CHECK(ParseDecimalNumber("1e-3") == 0.001);
  CHECK(ParseDecimalNumber(".25") == 0.25);
  CHECK(ParseDecimalNumber("3.") == 3.0);
  for (const char* bad : {"", ".", "-", "inf", "nan", "0x1p3", "1e400", " 1", "1 ", "1e", "1e+", "+1", "1,5"}) {
    CHECK_MESSAGE(!ParseDecimalNumber(bad), bad);
  }
}
