// Turns a hang into an error. A collective that one rank never joins blocks
// the others forever; the watchdog thread gives every step a deadline and,
// when one passes, reports what was running and on which group, then calls
// the given action (foldbench: Backend::Abort, which aborts the NCCL
// communicators and the MPI job).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace foldplan::validate {

class Watchdog {
 public:
  // About 31 years: far beyond any step, and 1e18 ns, which steady_clock's
  // 64-bit nanosecond count holds with room for now() on top.
  static constexpr double kMaxTimeout_s = 1e9;

  // `on_expire(what)` runs on the watchdog thread and is expected not to
  // return (it aborts). timeout_s <= 0 (or NaN) disables the watchdog; a
  // huge one (1e30, inf) is clamped to kMaxTimeout_s, so that the deadline
  // cannot overflow the clock and fire at once.
  Watchdog(double timeout_s, std::function<void(const std::string& what)> on_expire);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts the deadline for `what` ("op ulysses, case q, timed iteration 2,
  // on cp group 1 (world ranks 2, 3)"); Disarm() ends it.
  void Arm(std::string what);
  void Disarm();

 private:
  void Loop();

  const std::chrono::steady_clock::duration timeout_;
  std::function<void(const std::string&)> on_expire_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool armed_ = false, stop_ = false;
  std::string what_;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;
};

}  // namespace foldplan::validate
