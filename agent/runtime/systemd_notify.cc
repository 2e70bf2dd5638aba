#include "agent/runtime/systemd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "core/log.h"

namespace mesh::agent {

namespace {

template <typename T>
std::optional<T> parse_number(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  const std::string_view s(text);
  T value{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<std::chrono::microseconds> parse_watchdog(const char* usec, const char* pid, long own_pid) {
  const auto period = parse_number<unsigned long long>(usec);
  if (!period || *period == 0) return std::nullopt;
  if (pid != nullptr) {
    const auto target = parse_number<long>(pid);
    if (!target || *target != own_pid) return std::nullopt;
  }
  return std::chrono::microseconds(static_cast<std::chrono::microseconds::rep>(*period));
}

SystemdNotifier SystemdNotifier::from_environment() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  return SystemdNotifier(
      socket != nullptr ? socket : "",
      parse_watchdog(std::getenv("WATCHDOG_USEC"), std::getenv("WATCHDOG_PID"), static_cast<long>(::getpid())));
}

SystemdNotifier::SystemdNotifier(std::string socket, std::optional<std::chrono::microseconds> watchdog)
    : socket_(std::move(socket)), watchdog_(watchdog) {}

bool SystemdNotifier::notify(std::string_view state, std::string* error) const {
  if (socket_.empty()) return true;
  const auto fail = [&](std::string message) {
    if (error != nullptr) *error = std::move(message);
    return false;
  };
  // systemd accepts a path or an abstract name ('@' stands for the leading NUL).
  if (socket_[0] != '/' && socket_[0] != '@') {
    return fail(fmt::format("NOTIFY_SOCKET=\"{}\" is neither an absolute path nor an abstract name", socket_));
  }
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_.size() > sizeof(address.sun_path)) {
    return fail(fmt::format("NOTIFY_SOCKET=\"{}\" is too long for a Unix socket address", socket_));
  }
  std::memcpy(address.sun_path, socket_.data(), socket_.size());
  if (socket_[0] == '@') address.sun_path[0] = '\0';
  const auto length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_.size() + (socket_[0] == '@' ? 0 : 1));

  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(fmt::format("socket(AF_UNIX): {}", std::strerror(errno)));
  const ssize_t sent =
      ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&address), length);
  const int saved = errno;
  ::close(fd);
  if (sent < 0) return fail(fmt::format("sendto {}: {}", socket_, std::strerror(saved)));
  if (static_cast<size_t>(sent) != state.size()) return fail(fmt::format("sendto {}: short write", socket_));
  return true;
}

WatchdogPinger::WatchdogPinger(asio::io_context& io, const SystemdNotifier& notifier)
    : notifier_(notifier), timer_(io) {
  if (notifier_.enabled() && notifier_.watchdog_period()) interval_ = *notifier_.watchdog_period() / 2;
}

void WatchdogPinger::start() {
  if (!interval_ || running_) return;
  running_ = true;
  arm();
}

void WatchdogPinger::stop() {
  running_ = false;
  timer_.cancel();
}

void WatchdogPinger::arm() {
  timer_.expires_after(*interval_);
  timer_.async_wait([this](const asio::error_code& error) {
    if (error || !running_) return;
    std::string problem;
    if (!notifier_.notify("WATCHDOG=1", &problem)) {
      core::log("agent").warn("systemd watchdog ping failed error=\"{}\"", problem);
    }
    arm();
  });
}

}  // namespace mesh::agent
