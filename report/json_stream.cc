#include "report/json_stream.h"

#include <deque>
#include <unordered_set>
#include <vector>

#include "core/json_check.h"

namespace foldplan {

using nlohmann::json;

std::string PointerOfPath(JsonPath path) {
  std::string pointer;
  for (const std::string& token : path) pointer += "/" + EscapePointerToken(token);
  return pointer.empty() ? "/" : pointer;
}

namespace {

// Objects with more keys than this look repeated keys up in a hash set.
constexpr size_t kLinearKeys = 32;

class StreamHandler {
 public:
  explicit StreamHandler(const JsonStreamRules& rules) : rules_(rules) {}

  bool null() { return Scalar(json(nullptr)); }
  bool boolean(bool v) { return Scalar(json(v)); }
  bool number_integer(json::number_integer_t v) { return Scalar(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return Scalar(json(v)); }
  bool number_float(json::number_float_t v, const std::string&) { return Scalar(json(v)); }
  bool string(std::string& v) { return Scalar(json(std::move(v))); }
  bool binary(json::binary_t&) { return Scalar(json(nullptr)); }  // not produced by the JSON reader
  bool start_object(std::size_t) { return Open(true); }
  bool start_array(std::size_t) { return Open(false); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(std::string& k) {
    Frame& f = frames_.back();
    if (f.many.empty() && f.keys.size() < kLinearKeys) {
      for (const std::string& seen : f.keys) {
        if (seen == k) return Duplicate(k);
      }
      f.keys.push_back(k);
      if (f.keys.size() == kLinearKeys) f.many.insert(f.keys.begin(), f.keys.end());
    } else if (!f.many.insert(k).second) {
      return Duplicate(k);
    }
    path_.back() = k;
    if (!f.skip) f.key_kept = !rules_.keep || rules_.keep(Path());
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    syntax_byte_ = position;
    syntax_what_ = e.what();
    syntax_error_ = true;
    return false;
  }

  json root;
  bool stopped = false, syntax_error_ = false;
  size_t syntax_byte_ = 0;
  std::string syntax_what_, refused_pointer_, refused_what_;

 private:
  struct Frame {
    bool object = false;
    bool skip = false;          // not kept: nothing under it is built
    bool streamed = false;      // array whose elements go to rules.element
    bool element_root = false;  // this container is an element of a streamed array
    bool key_kept = true;       // object: whether the current member is kept
    json* node = nullptr;
    int64_t items = 0;  // array: elements started
    bool index_stale = false;  // array: path_'s token not yet the current index
    std::vector<std::string> keys;
    std::unordered_set<std::string> many;
  };

  // Array indices are written into path_ only when a path is asked for
  // (most elements are never asked about).
  JsonPath Path() {
    for (size_t i = 0; i < frames_.size(); ++i) {
      if (frames_[i].index_stale) {
        path_[i] = std::to_string(frames_[i].items - 1);
        frames_[i].index_stale = false;
      }
    }
    return JsonPath(path_.data(), frames_.size());
  }

  // Where the next value goes (nullptr: not kept); *element when it starts
  // an element of a streamed array.
  json* Place(bool* element) {
    *element = false;
    if (frames_.empty()) return &root;
    Frame& f = frames_.back();
    if (!f.object) {
      ++f.items;
      f.index_stale = true;
    }
    if (f.skip || (f.object && !f.key_kept)) return nullptr;
    if (f.object) return &(*f.node)[path_.back()];
    if (f.streamed) {
      *element = true;
      elements_.emplace_back();
      return &elements_.back();
    }
    f.node->push_back(nullptr);
    return &f.node->back();
  }

  bool Scalar(json v) {
    bool element = false;
    json* slot = Place(&element);
    if (frames_.size() == 1 && frames_[0].object && rules_.top_level && !rules_.top_level(path_[0], v)) {
      stopped = true;
      return false;
    }
    if (!slot) return true;
    *slot = std::move(v);
    return element ? Deliver() : true;
  }

  bool Open(bool object) {
    bool element = false;
    json* slot = Place(&element);
    if (static_cast<int>(frames_.size()) >= kMaxJsonDepth) {
      refused_pointer_ = PointerOfPath(Path());
      refused_what_ = JsonTooDeepText();
      return false;
    }
    Frame f;
    f.object = object;
    f.element_root = element;
    if (!slot) {
      f.skip = true;
    } else {
      *slot = object ? json::object() : json::array();
      f.node = slot;
      f.streamed = !object && rules_.streamed && rules_.streamed(Path());
    }
    frames_.push_back(std::move(f));
    path_.emplace_back();
    return true;
  }

  bool Close() {
    const bool element = frames_.back().element_root;
    frames_.pop_back();
    path_.pop_back();
    return element ? Deliver() : true;
  }

  bool Deliver() {
    json e = std::move(elements_.back());
    elements_.pop_back();
    if (rules_.element && !rules_.element(Path(), std::move(e))) {
      stopped = true;
      return false;
    }
    return true;
  }

  bool Duplicate(const std::string& k) {
    path_.back() = k;
    refused_pointer_ = PointerOfPath(Path());
    refused_what_ = JsonDuplicateKeyText();
    return false;
  }

  const JsonStreamRules& rules_;
  std::vector<Frame> frames_;
  std::vector<std::string> path_;  // path_[i]: frame i's current key or index
  std::deque<json> elements_;      // streamed elements being built (nested ones stack up)
};

}  // namespace

Result<JsonStreamResult> StreamJson(const std::string& text, const std::string& file, const JsonStreamRules& rules) {
  StreamHandler h(rules);
  try {
    json::sax_parse(text, &h);
  } catch (const json::exception& e) {
    return Status::Error(file + ": not valid JSON: " + e.what());
  }
  if (!h.refused_what_.empty()) return Status::Error(file + ": " + h.refused_pointer_ + ": " + h.refused_what_);
  if (h.syntax_error_) return JsonSyntaxError(text, file, h.syntax_byte_, h.syntax_what_);
  JsonStreamResult out;
  out.kept = std::move(h.root);
  out.stopped = h.stopped;
  return out;
}

}  // namespace foldplan
