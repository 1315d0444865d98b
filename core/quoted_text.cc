#include "core/quoted_text.h"

namespace foldplan {
namespace {

void AppendEscaped(std::string& out, std::string_view text, bool keep_lines) {
  static const char kHex[] = "0123456789abcdef";
  auto hex = [&](unsigned char c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (keep_lines && (c == '\n' || c == '\t')) {
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      hex(c);
    } else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      // A C1 control in UTF-8 (U+009B is CSI on some terminals).
      hex(c);
      hex(static_cast<unsigned char>(text[++i]));
    } else {
      out += static_cast<char>(c);
    }
  }
}

}  // namespace

std::string EscapeControlBytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  AppendEscaped(out, text, true);
  return out;
}

std::string Quoted(std::string_view text, size_t max_bytes) {
  std::string out = "\"";
  AppendEscaped(out, text.substr(0, max_bytes), false);
  out += text.size() > max_bytes ? "\"..." : "\"";
  return out;
}

}  // namespace foldplan
