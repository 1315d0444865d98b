// Input quoted in a message, made safe for a terminal: a file or flag value
// may hold ESC, BEL and other control bytes that would otherwise reach
// stderr raw (colours, a cleared screen, a retitled window). Every C0 byte,
// DEL, and the C1 controls (U+0080..U+009F in UTF-8) come out as \xNN;
// everything else, UTF-8 text included, is kept.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace foldplan {

// `text` with its control bytes escaped, except newline and tab (a message
// of several lines stays one): what every error line printed goes through.
std::string EscapeControlBytes(std::string_view text);

// "\"text\"" with every control byte escaped (newline and tab too), cut
// after `max_bytes` bytes of the value with "..." after the quote: how a
// message quotes a value read from input.
std::string Quoted(std::string_view text, size_t max_bytes = 80);

}  // namespace foldplan
