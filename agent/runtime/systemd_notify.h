#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

namespace mesh::agent {

// systemd's notification protocol (sd_notify(3)) without libsystemd: one
// datagram of "KEY=VALUE\n" lines to the AF_UNIX socket named by
// $NOTIFY_SOCKET (a path, or "@name" for the abstract namespace). Outside
// systemd (no NOTIFY_SOCKET) every call is a no-op, so the agent runs the
// same under a shell, the testbed and Type=notify units.
class SystemdNotifier {
 public:
  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID from the environment.
  static SystemdNotifier from_environment();
  // For tests: an explicit socket (empty: disabled) and watchdog period.
  SystemdNotifier(std::string socket, std::optional<std::chrono::microseconds> watchdog);

  bool enabled() const { return !socket_.empty(); }
  const std::string& socket() const { return socket_; }

  // WATCHDOG_USEC when set, positive and meant for this process
  // (WATCHDOG_PID unset or equal to getpid()).
  std::optional<std::chrono::microseconds> watchdog_period() const { return watchdog_; }

  // Sends `state` ("READY=1", "WATCHDOG=1\nSTATUS=...", ...) as one datagram.
  // True when sent, or when there is no socket to send to; on failure
  // `error` (if given) says why.
  bool notify(std::string_view state, std::string* error = nullptr) const;

 private:
  std::string socket_;
  std::optional<std::chrono::microseconds> watchdog_;
};

// Parses WATCHDOG_USEC / WATCHDOG_PID values as sd_watchdog_enabled(3) does:
// nullopt when unset, malformed, zero, or addressed to another pid.
std::optional<std::chrono::microseconds> parse_watchdog(const char* usec, const char* pid, long own_pid);

// Sends WATCHDOG=1 every half watchdog period from the io_context's thread,
// so a hung event loop stops the pings and systemd restarts the agent.
// Does nothing when the notifier has no watchdog period.
class WatchdogPinger {
 public:
  WatchdogPinger(asio::io_context& io, const SystemdNotifier& notifier);
  WatchdogPinger(const WatchdogPinger&) = delete;
  WatchdogPinger& operator=(const WatchdogPinger&) = delete;

  // The interval between pings, if pinging at all.
  std::optional<std::chrono::microseconds> interval() const { return interval_; }
  void start();
  void stop();

 private:
  void arm();

  const SystemdNotifier& notifier_;
  asio::steady_timer timer_;
  std::optional<std::chrono::microseconds> interval_;
  bool running_ = false;
};

}  // namespace mesh::agent
