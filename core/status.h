// Errors as values. A Status is either ok or carries one human-readable
// message; Result<T> is a value or the Status explaining why there is none.
// Messages for bad input name the file, the JSON pointer, what was expected
// and what was found (see core/json_check.h). Asserts are for bugs only.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace foldplan {

class Status {
 public:
  Status() = default;  // ok
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !message_.has_value(); }
  // Empty for an ok status.
  const std::string& message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "a Result without a value needs an error");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T& value() & {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  const T* operator->() const { return &value(); }
  const T& operator*() const { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace foldplan
