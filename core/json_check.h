// Checked reading of JSON input files. Every accessor names the field by its
// JSON pointer, so a bad file gets "FILE: /moe/top_k: expected an integer
// >= 1, found -1". Errors are collected (not thrown) so that one run reports
// every problem in a file; Finish() adds one error per unknown field.
//
//   JsonErrors errors("data/models/x.json");
//   CheckedObject root(json, "", &errors);
//   int layers = root.Int("layers", 1);
//   root.Finish();
//   if (!errors.empty()) return errors.status();
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace foldplan {

// The deepest nesting of objects and arrays a file may have. foldplan's own
// formats need six; the bound keeps every recursive walk of a parsed value
// (nlohmann's serializer among them) far from the stack's end.
inline constexpr int kMaxJsonDepth = 64;

// Parses text as JSON; a syntax error names the file, line and column.
// Refused, with the file and the JSON pointer: nesting deeper than
// kMaxJsonDepth, and an object with the same key twice.
Result<nlohmann::json> ParseJsonText(const std::string& text, const std::string& file);
// Reads and parses a file.
Result<nlohmann::json> ParseJsonFile(const std::string& path);

// The refusals every JSON reader of foldplan gives (ParseJsonText, and the
// streaming reader report/json_stream.h), one wording: nesting past
// kMaxJsonDepth, a key given twice in one object, and a syntax error at
// `byte` of `text` as "FILE:LINE:COLUMN: not valid JSON: syntax error ...".
std::string JsonTooDeepText();
std::string JsonDuplicateKeyText();
Status JsonSyntaxError(const std::string& text, const std::string& file, size_t byte, const std::string& what);

// One key as a JSON pointer token (RFC 6901: "~" -> "~0", "/" -> "~1").
std::string EscapePointerToken(const std::string& key);

// Short rendering of a JSON value for "found ..." in messages: at most
// about 60 characters whatever the value's size.
std::string DescribeJsonValue(const nlohmann::json& value);

class JsonErrors {
 public:
  explicit JsonErrors(std::string file) : file_(std::move(file)) {}
  void Add(const std::string& pointer, const std::string& what);
  bool empty() const { return lines_.empty(); }
  // All errors, one per line, each prefixed with the file name.
  Status status() const;
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::vector<std::string> lines_;
};

class CheckedObject {
 public:
  // `value` must outlive this object. A non-object value records an error and
  // behaves as an empty object.
  CheckedObject(const nlohmann::json& value, std::string pointer, JsonErrors* errors);

  bool Has(const std::string& key) const;
  std::string Pointer(const std::string& key) const;

  // Required unless a default is given; ranges are inclusive.
  int64_t Int(const std::string& key, int64_t min = std::numeric_limits<int64_t>::min(),
              int64_t max = std::numeric_limits<int64_t>::max());
  int64_t Int(const std::string& key, int64_t min, int64_t max, int64_t default_value);
  double Number(const std::string& key, double min, double max);
  double Number(const std::string& key, double min, double max, double default_value);
  bool Bool(const std::string& key);
  bool Bool(const std::string& key, bool default_value);
  std::string String(const std::string& key);
  std::string String(const std::string& key, const std::string& default_value);
  // One of `allowed`; required unless a default is given.
  std::string Enum(const std::string& key, std::initializer_list<const char*> allowed);
  std::string Enum(const std::string& key, std::initializer_list<const char*> allowed,
                   const std::string& default_value);
  // A list of integers in [min, max]; required unless a default is given.
  std::vector<int64_t> IntList(const std::string& key, int64_t min, int64_t max);
  std::vector<int64_t> IntList(const std::string& key, int64_t min, int64_t max,
                               std::vector<int64_t> default_value);
  // A non-empty list of strings each in `allowed`.
  std::vector<std::string> EnumList(const std::string& key,
                                    std::initializer_list<const char*> allowed,
                                    std::vector<std::string> default_value);

  // A non-empty list of free-form strings, each vetted by `problem` (which
  // returns "" for a good item, else what is wrong with it). The three
  // descriptions complete "expected ..." for a bad list, a non-string item,
  // and an item `problem` rejects.
  // With `single_allowed`, a lone string stands for a list of that one
  // (its errors then name the field itself).
  struct StringListRules {
    std::string list_expected;
    std::string item_expected;
    std::string valid_expected;
    std::function<std::string(const std::string&)> problem;
    bool single_allowed = false;
  };
  std::vector<std::string> StringList(const std::string& key, const StringListRules& rules,
                                      std::vector<std::string> default_value);
  // A boolean or a non-empty list of booleans.
  std::vector<bool> BoolList(const std::string& key, std::vector<bool> default_value);

  // A field's value for a caller that checks it itself (lists of objects);
  // marks it read. Requires Has(key).
  const nlohmann::json& Raw(const std::string& key) { return *Field(key); }

  // Sub-objects. Object() records an error when missing and returns an empty view.
  CheckedObject Object(const std::string& key);
  std::optional<CheckedObject> OptionalObject(const std::string& key);

  // Records an error for every key that no accessor asked for.
  void Finish();

  JsonErrors* errors() const { return errors_; }
  const std::string& pointer() const { return pointer_; }

 private:
  const nlohmann::json* Field(const std::string& key);
  void Missing(const std::string& key, const std::string& expected);
  void Wrong(const std::string& key, const std::string& expected, const nlohmann::json& found);

  const nlohmann::json* value_;
  std::string pointer_;
  JsonErrors* errors_;
  std::set<std::string> seen_;
};

// The list of objects at `key`, each read by `item(CheckedObject&)` under
// its own pointer (".../key/3"); an error for a missing field, a non-list
// or one longer than `max_items`, and (from CheckedObject) for an element
// that is not an object, which `item` then does not see.
template <class F>
void ForEachObject(CheckedObject& parent, const std::string& key, F item, size_t max_items = size_t{1} << 20) {
  if (!parent.Has(key)) {
    parent.errors()->Add(parent.Pointer(key), "missing; expected a list of objects");
    return;
  }
  const nlohmann::json& list = parent.Raw(key);
  if (!list.is_array() || list.size() > max_items) {
    parent.errors()->Add(parent.Pointer(key), "expected a list of objects, found " + DescribeJsonValue(list));
    return;
  }
  for (size_t i = 0; i < list.size(); ++i) {
    CheckedObject o(list[i], parent.Pointer(key) + "/" + std::to_string(i), parent.errors());
    if (list[i].is_object()) item(o);
  }
}

}  // namespace foldplan
