#include "validate/watchdog.h"

namespace foldplan::validate {

Watchdog::Watchdog(double timeout_s, std::function<void(const std::string&)> on_expire)
    : timeout_(timeout_s), on_expire_(std::move(on_expire)) {
  if (timeout_s > 0) thread_ = std::thread([this] { Loop(); });
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
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
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
