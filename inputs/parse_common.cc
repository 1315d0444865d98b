#include "inputs/parse_common.h"

#include <algorithm>
#include <filesystem>

namespace foldplan::inputs_internal {

int IntField(CheckedObject& object, const std::string& key, int min, int max) {
  return static_cast<int>(object.Int(key, min, max));
}

int IntField(CheckedObject& object, const std::string& key, int min, int max, int default_value) {
  return static_cast<int>(object.Int(key, min, max, default_value));
}

std::vector<int> IntListField(CheckedObject& object, const std::string& key, int min, int max,
                              const std::vector<int>& default_value) {
  const std::vector<int64_t> wide(default_value.begin(), default_value.end());
  std::vector<int> out;
  for (int64_t v : object.IntList(key, min, max, wide)) out.push_back(static_cast<int>(v));
  return out;
}

namespace {
// JsonErrors does not expose a count; its message has one line per error.
size_t ErrorCount(const JsonErrors& errors) {
  if (errors.empty()) return 0;
  const Status status = errors.status();  // message() refers into it
  const std::string& text = status.message();
  return 1 + size_t(std::count(text.begin(), text.end(), '\n'));
}
}  // namespace

std::optional<CheckedObject> RequiredObject(CheckedObject& parent, const std::string& key) {
  const size_t before = ErrorCount(*parent.errors());
  CheckedObject child = parent.Object(key);
  if (ErrorCount(*parent.errors()) != before) return std::nullopt;
  return child;
}

std::optional<CheckedObject> OptionalObject(CheckedObject& parent, const std::string& key) {
  const size_t before = ErrorCount(*parent.errors());
  auto child = parent.OptionalObject(key);  // nullopt when absent or null
  if (ErrorCount(*parent.errors()) != before) return std::nullopt;
  return child;
}

std::string DescribeString(const std::string& value) { return "\"" + value + "\""; }

bool CheckSchema(CheckedObject& root, const char* schema) {
  if (!root.errors()->empty()) return false;  // the file is not a JSON object
  root.Enum("schema", {schema});
  return root.errors()->empty();
}

std::string StemOf(const std::string& file) {
  return std::filesystem::path(file).stem().string();
}

bool LooksLikePath(const std::string& s) {
  return s.find('/') != std::string::npos ||
         (s.size() >= 5 && s.compare(s.size() - 5, 5, ".json") == 0);
}

}  // namespace foldplan::inputs_internal
