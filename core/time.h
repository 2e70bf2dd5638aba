#pragma once

#include <chrono>
#include <cstdint>

namespace mesh::core {

// Protocol time: microseconds on the Env clock. In the agent the clock is the
// monotonic clock since start; in the simulator it is virtual time. Protocol
// code never reads any other clock.
struct EnvClock {
  using rep = int64_t;
  using period = std::micro;
  using duration = std::chrono::duration<rep, period>;
  using time_point = std::chrono::time_point<EnvClock>;
  static constexpr bool is_steady = true;
};

using Duration = EnvClock::duration;
using TimePoint = EnvClock::time_point;

inline constexpr double to_seconds(Duration d) { return std::chrono::duration<double>(d).count(); }
inline constexpr double to_millis(Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
inline constexpr Duration from_seconds(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}
inline constexpr Duration from_millis(double ms) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double, std::milli>(ms));
}

}  // namespace mesh::core
