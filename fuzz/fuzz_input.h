// What every fuzz target shares: the bytes as text, and the one rule all of
// them check. A reader may accept an input or refuse it with a message
// naming the file; it may not crash, hang, overflow or return an empty
// error. A broken rule aborts, which libFuzzer (and the replay test) report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_check.h"
#include "core/status.h"

namespace foldplan::fuzz {

// The name errors must carry.
inline constexpr const char* kFuzzFile = "fuzz-input.json";

inline std::string AsText(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// A refusal must say what is wrong, and where.
inline void CheckRefusal(const Status& status, const char* file = kFuzzFile) {
  if (status.ok()) return;
  const std::string& m = status.message();
  if (m.empty() || m.find(file) == std::string::npos) {
    std::fprintf(stderr, "refusal without the file name: \"%s\"\n", m.c_str());
    std::abort();
  }
}

// The bytes parsed as a JSON file is; nullopt when refused (and the
// refusal checked).
inline std::optional<nlohmann::json> ParseJson(const uint8_t* data, size_t size) {
  auto json = ParseJsonText(AsText(data, size), kFuzzFile);
  CheckRefusal(json.status());
  if (!json.ok()) return std::nullopt;
  return std::move(json).value();
}

}  // namespace foldplan::fuzz
