#include "validate/watchdog.h"

#include <algorithm>

namespace foldplan::validate {
namespace {

// Converting seconds beyond the clock's range is undefined (in practice a
// negative count, a deadline in the past): clamp first. Not positive
// (0, negative, NaN): zero, which leaves the watchdog off.
std::chrono::steady_clock::duration ClockTimeout(double timeout_s) {
  using Duration = std::chrono::steady_clock::duration;
  if (!(timeout_s > 0)) return Duration::zero();
  const auto clamped = std::chrono::duration_cast<Duration>(
      std::chrono::duration<double>(std::min(timeout_s, Watchdog::kMaxTimeout_s)));
  return std::max(clamped, Duration(1));  // below one tick is still on
}

}  // namespace

Watchdog::Watchdog(double timeout_s, std::function<void(const std::string&)> on_expire)
    : timeout_(ClockTimeout(timeout_s)), on_expire_(std::move(on_expire)) {
  if (timeout_ > std::chrono::steady_clock::duration::zero()) {
    thread_ = std::thread([this] { Loop(); });
  }
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::Arm(std::string what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = true;
    what_ = std::move(what);
    deadline_ = std::chrono::steady_clock::now() + timeout_;
  }
  changed_.notify_all();
}

void Watchdog::Disarm() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
  }
  changed_.notify_all();
}

void Watchdog::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (!armed_) {
      changed_.wait(lock);
      continue;
    }
    const auto deadline = deadline_;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && armed_ && !stop_ &&
        deadline_ == deadline) {
      const std::string what = what_;
      lock.unlock();
      on_expire_(what);  // aborts; returns only in tests
      lock.lock();
      armed_ = false;
    }
  }
}

}  // namespace foldplan::validate
