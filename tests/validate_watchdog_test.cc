// The watchdog fires exactly when a step outlives its deadline, and says
// which step it was. Deadlines here are 10 ms against waits of up to 10 s,
// so the outcome does not depend on the machine's speed.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <limits>
#include <string>
#include <thread>

#include "validate/watchdog.h"

using foldplan::validate::Watchdog;

TEST_CASE("watchdog: a step past its deadline is reported by name") {
  std::promise<std::string> fired;
  Watchdog watchdog(0.01, [&](const std::string& what) { fired.set_value(what); });
  watchdog.Arm("op ulysses on cp group 1");
  std::future<std::string> what = fired.get_future();
  REQUIRE(what.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(what.get() == "op ulysses on cp group 1");
}

TEST_CASE("watchdog: a disarmed step never fires, and re-arming starts a new deadline") {
  std::atomic<int> fired{0};
  {
    Watchdog watchdog(10.0, [&](const std::string&) { ++fired; });
    for (int i = 0; i < 100; ++i) {
      watchdog.Arm("step " + std::to_string(i));
      watchdog.Disarm();
    }
  }  // joins the thread
  CHECK(fired == 0);
}

TEST_CASE("watchdog: timeout 0 disables it") {
  std::atomic<int> fired{0};
  {
    Watchdog watchdog(0, [&](const std::string&) { ++fired; });
    watchdog.Arm("never watched");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(fired == 0);
}

TEST_CASE("watchdog: a huge timeout (1e30, inf) does not fire at once") {
  // 1e30 s overflowed the clock's nanosecond count into a deadline in the
  // past, so every step "timed out" at once.
  for (double timeout_s : {1e30, std::numeric_limits<double>::infinity(),
                           Watchdog::kMaxTimeout_s * 10}) {
    CAPTURE(timeout_s);
    std::atomic<int> fired{0};
    {
      Watchdog watchdog(timeout_s, [&](const std::string&) { ++fired; });
      watchdog.Arm("a long step");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      watchdog.Disarm();
    }
    CHECK(fired == 0);
  }
}

TEST_CASE("watchdog: a negative or NaN timeout leaves it off") {
  for (double timeout_s : {-1.0, std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(timeout_s);
    std::atomic<int> fired{0};
    {
      Watchdog watchdog(timeout_s, [&](const std::string&) { ++fired; });
      watchdog.Arm("never watched");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    CHECK(fired == 0);
  }
}

TEST_CASE("watchdog: a timeout below one clock tick still fires") {
  std::promise<std::string> fired;
  Watchdog watchdog(1e-12, [&](const std::string& what) { fired.set_value(what); });
  watchdog.Arm("a tiny deadline");
  std::future<std::string> what = fired.get_future();
  REQUIRE(what.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(what.get() == "a tiny deadline");
}
