#include "core/json_check.h"

#include <cmath>
#include <sstream>

#include "core/atomic_file.h"

namespace foldplan {
namespace {

using nlohmann::json;

const json& EmptyObject() {
  static const json kEmpty = json::object();
  return kEmpty;
}

std::string Range(int64_t min, int64_t max) {
  constexpr int64_t kLo = std::numeric_limits<int64_t>::min();
  constexpr int64_t kHi = std::numeric_limits<int64_t>::max();
  if (min == kLo && max == kHi) return "";
  if (max == kHi) return " >= " + std::to_string(min);
  if (min == kLo) return " <= " + std::to_string(max);
  return " in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

std::string NumberRange(double min, double max) {
  std::ostringstream s;
  s << " in [" << min << ", " << max << "]";
  return s.str();
}

std::string OneOf(std::initializer_list<const char*> allowed) {
  std::string out = "one of ";
  bool first = true;
  for (const char* a : allowed) {
    if (!first) out += ", ";
    out += "\"" + std::string(a) + "\"";
    first = false;
  }
  return out;
}

bool InList(std::initializer_list<const char*> allowed, const std::string& v) {
  for (const char* a : allowed) {
    if (v == a) return true;
  }
  return false;
}

}  // namespace

std::string EscapePointerToken(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

namespace {

// Where the parser is, kept by the parse callback: one frame per open object
// or array, so a limit or a duplicate key can be reported by its pointer.
struct ParseFrame {
  bool is_object = false;
  std::string key;           // object: the last key read
  int64_t items = 0;         // array: elements started so far
  std::set<std::string> keys;  // object: keys read so far
};

struct ParseRefusal {
  std::string pointer;
  std::string what;
};

std::string PointerOf(const std::vector<ParseFrame>& frames) {
  std::string pointer;
  for (const ParseFrame& f : frames) {
    pointer += "/" + (f.is_object ? EscapePointerToken(f.key) : std::to_string(f.items - 1));
  }
  return pointer.empty() ? "/" : pointer;
}

}  // namespace

Result<json> ParseJsonText(const std::string& text, const std::string& file) {
  std::vector<ParseFrame> frames;
  // A value starts: count it as an element of an enclosing array.
  auto element_starts = [&frames] {
    if (!frames.empty() && !frames.back().is_object) ++frames.back().items;
  };
  const json::parser_callback_t watch = [&](int, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        element_starts();
        if (static_cast<int>(frames.size()) >= kMaxJsonDepth) {
          throw ParseRefusal{PointerOf(frames), JsonTooDeepText()};
        }
        frames.push_back(ParseFrame{event == json::parse_event_t::object_start, "", 0, {}});
        break;
      case json::parse_event_t::key: {
        ParseFrame& object = frames.back();  // a key is only read inside an object
        object.key = parsed.get<std::string>();
        if (!object.keys.insert(object.key).second) {
          throw ParseRefusal{PointerOf(frames), JsonDuplicateKeyText()};
        }
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!frames.empty()) frames.pop_back();
        break;
      case json::parse_event_t::value:
        element_starts();
        break;
    }
    return true;
  };
  try {
    return json::parse(text, watch);
  } catch (const ParseRefusal& refusal) {
    return Status::Error(file + ": " + refusal.pointer + ": " + refusal.what);
  } catch (const json::parse_error& e) {
    return JsonSyntaxError(text, file, e.byte, e.what());
  } catch (const json::exception& e) {
    // e.g. a number out of range such as 1e999999
    return Status::Error(file + ": not valid JSON: " + e.what());
  }
}

std::string JsonTooDeepText() {
  return "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels, the most a foldplan file may have";
}

std::string JsonDuplicateKeyText() {
  return "duplicate key (JSON readers disagree on which one wins, so foldplan takes neither)";
}

Status JsonSyntaxError(const std::string& text, const std::string& file, size_t byte, const std::string& what) {
  // The byte offset as line:column, for a human.
  size_t line = 1, col = 1;
  for (size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  const auto pos = what.find("syntax error");
  return Status::Error(file + ":" + std::to_string(line) + ":" + std::to_string(col) +
                       ": not valid JSON: " + (pos == std::string::npos ? what : what.substr(pos)));
}

Result<json> ParseJsonFile(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseJsonText(text.value(), path);
}

namespace {

constexpr size_t kDescribeChars = 60;

// Appends compact JSON for `value` to `out`, stopping once `out` passes
// `limit` characters: the cost is bounded by the limit, not the value.
void AppendBounded(const json& value, std::string& out, size_t limit) {
  if (out.size() > limit) return;
  switch (value.type()) {
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = value.begin(); it != value.end() && out.size() <= limit; ++it) {
        if (!first) out += ',';
        first = false;
        AppendBounded(json(it.key()), out, limit);
        out += ':';
        AppendBounded(it.value(), out, limit);
      }
      out += '}';
      return;
    }
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (auto it = value.begin(); it != value.end() && out.size() <= limit; ++it) {
        if (!first) out += ',';
        first = false;
        AppendBounded(*it, out, limit);
      }
      out += ']';
      return;
    }
    case json::value_t::string: {
      // Cut long strings before quoting them; `replace` keeps a UTF-8
      // sequence cut in half from throwing.
      const std::string& s = value.get_ref<const std::string&>();
      const json cut = s.size() > limit ? json(s.substr(0, limit)) : value;
      out += cut.dump(-1, ' ', false, json::error_handler_t::replace);
      return;
    }
    default:
      out += value.dump();
  }
}

}  // namespace

std::string DescribeJsonValue(const json& value) {
  std::string dumped;
  AppendBounded(value, dumped, kDescribeChars);
  if (dumped.size() > kDescribeChars) {
    size_t cut = kDescribeChars - 3;
    // Not inside a UTF-8 sequence: messages may be quoted in JSON output.
    while (cut > 0 && (static_cast<unsigned char>(dumped[cut]) & 0xC0) == 0x80) --cut;
    dumped = dumped.substr(0, cut) + "...";
  }
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object " + dumped;
    case json::value_t::array: return "an array " + dumped;
    case json::value_t::string: return "the string " + dumped;
    case json::value_t::boolean: return "the boolean " + dumped;
    default: return dumped;
  }
}

void JsonErrors::Add(const std::string& pointer, const std::string& what) {
  lines_.push_back(file_ + ": " + (pointer.empty() ? std::string("/") : pointer) + ": " + what);
}

Status JsonErrors::status() const {
  if (lines_.empty()) return Status();
  std::string all;
  for (size_t i = 0; i < lines_.size(); ++i) {
    if (i) all += "\n";
    all += lines_[i];
  }
  return Status::Error(all);
}

CheckedObject::CheckedObject(const json& value, std::string pointer, JsonErrors* errors)
    : value_(&value), pointer_(std::move(pointer)), errors_(errors) {
  if (!value.is_object()) {
    errors_->Add(pointer_, "expected an object, found " + DescribeJsonValue(value));
    value_ = &EmptyObject();
  }
}

bool CheckedObject::Has(const std::string& key) const { return value_->contains(key); }

std::string CheckedObject::Pointer(const std::string& key) const {
  return pointer_ + "/" + EscapePointerToken(key);
}

const json* CheckedObject::Field(const std::string& key) {
  seen_.insert(key);
  auto it = value_->find(key);
  return it == value_->end() ? nullptr : &*it;
}

void CheckedObject::Missing(const std::string& key, const std::string& expected) {
  errors_->Add(Pointer(key), "missing; expected " + expected);
}

void CheckedObject::Wrong(const std::string& key, const std::string& expected, const json& found) {
  errors_->Add(Pointer(key), "expected " + expected + ", found " + DescribeJsonValue(found));
}

int64_t CheckedObject::Int(const std::string& key, int64_t min, int64_t max) {
  const std::string expected = "an integer" + Range(min, max);
  const json* v = Field(key);
  if (!v) {
    Missing(key, expected);
    return min > 0 ? min : 0;
  }
  if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(max)) ||
      v->get<int64_t>() < min || v->get<int64_t>() > max) {
    Wrong(key, expected, *v);
    return min > 0 ? min : 0;
  }
  return v->get<int64_t>();
}

int64_t CheckedObject::Int(const std::string& key, int64_t min, int64_t max, int64_t default_value) {
  if (!Has(key)) {
    seen_.insert(key);
    return default_value;
  }
  return Int(key, min, max);
}

double CheckedObject::Number(const std::string& key, double min, double max) {
  const std::string expected = "a number" + NumberRange(min, max);
  const json* v = Field(key);
  if (!v) {
    Missing(key, expected);
    return min;
  }
  if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < min ||
      v->get<double>() > max) {
    Wrong(key, expected, *v);
    return min;
  }
  return v->get<double>();
}

double CheckedObject::Number(const std::string& key, double min, double max, double default_value) {
  if (!Has(key)) {
    seen_.insert(key);
    return default_value;
  }
  return Number(key, min, max);
}

bool CheckedObject::Bool(const std::string& key) {
  const json* v = Field(key);
  if (!v) {
    Missing(key, "true or false");
    return false;
  }
  if (!v->is_boolean()) {
    Wrong(key, "true or false", *v);
    return false;
  }
  return v->get<bool>();
}

bool CheckedObject::Bool(const std::string& key, bool default_value) {
  if (!Has(key)) {
    seen_.insert(key);
    return default_value;
  }
  return Bool(key);
}

std::string CheckedObject::String(const std::string& key) {
  const json* v = Field(key);
  if (!v) {
    Missing(key, "a string");
    return "";
  }
  if (!v->is_string()) {
    Wrong(key, "a string", *v);
    return "";
  }
  return v->get<std::string>();
}

std::string CheckedObject::String(const std::string& key, const std::string& default_value) {
  if (!Has(key)) {
    seen_.insert(key);
    return default_value;
  }
  return String(key);
}

std::string CheckedObject::Enum(const std::string& key, std::initializer_list<const char*> allowed) {
  const json* v = Field(key);
  if (!v) {
    Missing(key, OneOf(allowed));
    return *allowed.begin();
  }
  if (!v->is_string() || !InList(allowed, v->get<std::string>())) {
    Wrong(key, OneOf(allowed), *v);
    return *allowed.begin();
  }
  return v->get<std::string>();
}

std::string CheckedObject::Enum(const std::string& key, std::initializer_list<const char*> allowed,
                                const std::string& default_value) {
  if (!Has(key)) {
    seen_.insert(key);
    return default_value;
  }
  return Enum(key, allowed);
}

std::vector<int64_t> CheckedObject::IntList(const std::string& key, int64_t min, int64_t max) {
  const std::string expected = "a non-empty list of integers" + Range(min, max);
  const json* v = Field(key);
  if (!v) {
    Missing(key, expected);
    return {};
  }
  if (!v->is_array() || v->empty()) {
    Wrong(key, expected, *v);
    return {};
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_number_integer() || e.get<int64_t>() < min || e.get<int64_t>() > max) {
      errors_->Add(Pointer(key) + "/" + std::to_string(i),
                   "expected an integer" + Range(min, max) + ", found " + DescribeJsonValue(e));
      continue;
    }
    out.push_back(e.get<int64_t>());
  }
  return out;
}

std::vector<int64_t> CheckedObject::IntList(const std::string& key, int64_t min, int64_t max,
                                            std::vector<int64_t> default_value) {
  if (!Has(key)) {
    seen_.insert(key);
    return default_value;
  }
  return IntList(key, min, max);
}

std::vector<bool> CheckedObject::BoolList(const std::string& key, std::vector<bool> default_value) {
  if (!Has(key)) {
    seen_.insert(key);
    return default_value;
  }
  const json* v = Field(key);
  if (v->is_boolean()) return {v->get<bool>()};
  if (!v->is_array() || v->empty()) {
    Wrong(key, "a boolean or a non-empty list of booleans", *v);
    return default_value;
  }
  std::vector<bool> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_boolean()) {
      errors_->Add(Pointer(key) + "/" + std::to_string(i), "expected a boolean, found " + DescribeJsonValue(e));
      continue;
    }
    out.push_back(e.get<bool>());
  }
  return out;
}

std::vector<std::string> CheckedObject::EnumList(const std::string& key,
                                                 std::initializer_list<const char*> allowed,
                                                 std::vector<std::string> default_value) {
  if (!Has(key)) {
    seen_.insert(key);
    return default_value;
  }
  const json* v = Field(key);
  const std::string expected = "a non-empty list of strings, each " + OneOf(allowed);
  if (!v->is_array() || v->empty()) {
    Wrong(key, expected, *v);
    return default_value;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_string() || !InList(allowed, e.get<std::string>())) {
      errors_->Add(Pointer(key) + "/" + std::to_string(i),
                   "expected " + OneOf(allowed) + ", found " + DescribeJsonValue(e));
      continue;
    }
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::vector<std::string> CheckedObject::StringList(const std::string& key,
                                                   const StringListRules& rules,
                                                   std::vector<std::string> default_value) {
  if (!Has(key)) {
    seen_.insert(key);
    return default_value;
  }
  const json* v = Field(key);
  if (rules.single_allowed && v->is_string()) {
    const std::string problem = rules.problem ? rules.problem(v->get<std::string>()) : "";
    if (!problem.empty()) {
      Wrong(key, rules.valid_expected + " (" + problem + ")", *v);
      return default_value;
    }
    return {v->get<std::string>()};
  }
  if (!v->is_array() || v->empty()) {
    Wrong(key, rules.list_expected, *v);
    return default_value;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    const std::string pointer = Pointer(key) + "/" + std::to_string(i);
    if (!e.is_string()) {
      errors_->Add(pointer, "expected " + rules.item_expected + ", found " + DescribeJsonValue(e));
      continue;
    }
    const std::string problem = rules.problem ? rules.problem(e.get<std::string>()) : "";
    if (!problem.empty()) {
      errors_->Add(pointer, "expected " + rules.valid_expected + ", found " + DescribeJsonValue(e) +
                                " (" + problem + ")");
      continue;
    }
    out.push_back(e.get<std::string>());
  }
  return out;
}

CheckedObject CheckedObject::Object(const std::string& key) {
  const json* v = Field(key);
  if (!v) {
    Missing(key, "an object");
    return CheckedObject(EmptyObject(), Pointer(key), errors_);
  }
  return CheckedObject(*v, Pointer(key), errors_);
}

std::optional<CheckedObject> CheckedObject::OptionalObject(const std::string& key) {
  const json* v = Field(key);
  if (!v || v->is_null()) return std::nullopt;
  return CheckedObject(*v, Pointer(key), errors_);
}

void CheckedObject::Finish() {
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    if (!seen_.count(it.key())) errors_->Add(Pointer(it.key()), "unknown field");
  }
}

}  // namespace foldplan
