// A large JSON file read keeping only what the caller uses: one SAX pass
// (nlohmann::json::sax_parse) that builds the kept fields only, hands each
// element of a streamed array (a list that may hold millions of entries) to
// the caller as soon as it is complete and then drops it, and lets the
// caller stop at a top-level field (the schema, checked before the body).
// Memory is the kept fields plus one element, not a parse tree of the file.
// The file's rules are those of core/json_check.h's ParseJsonText: a syntax
// error names line:column; nesting past kMaxJsonDepth and a repeated key are
// refused with their JSON pointer.
#pragma once

#include <functional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace foldplan {

// A position in the file: the keys and array indices from the root.
using JsonPath = std::span<const std::string>;

struct JsonStreamRules {
  // Whether the member at `path` (its key last) of a kept object is kept;
  // unset: every member is.
  std::function<bool(JsonPath path)> keep;
  // Whether the array at `path` is streamed: its elements go to `element`
  // one at a time; the kept tree holds an empty array in its place.
  std::function<bool(JsonPath path)> streamed;
  // A complete element of a streamed array, at `path` (its index last).
  // False stops the reading (the caller recorded why).
  std::function<bool(JsonPath path, nlohmann::json&& element)> element;
  // A top-level scalar member, as soon as it is read. False stops the
  // reading (the caller has what it needed, or recorded an error).
  std::function<bool(const std::string& key, const nlohmann::json& value)> top_level;
};

struct JsonStreamResult {
  nlohmann::json kept;   // the kept fields (what was read when stopped)
  bool stopped = false;  // a callback stopped the reading
};

// `file` names the text in errors.
Result<JsonStreamResult> StreamJson(const std::string& text, const std::string& file, const JsonStreamRules& rules);

// The pointer text of `path` ("/a/0/b"; "/" for the root).
std::string PointerOfPath(JsonPath path);

}  // namespace foldplan
