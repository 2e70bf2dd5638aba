#include "agent/runtime/systemd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <asio/io_context.hpp>
#include <gtest/gtest.h>

namespace mesh::agent {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// A Unix datagram socket standing in for systemd's notification socket.
class NotifySocket {
 public:
  explicit NotifySocket(bool abstract) {
    static int counter = 0;
    name_ = "/tmp/mesh_notify_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, name_.data(), name_.size());
    auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name_.size() + 1);
    if (abstract) {
      address.sun_path[0] = '\0';
      length -= 1;
      name_[0] = '@';
    } else {
      std::filesystem::remove(name_);
    }
    bound_ = ::bind(fd_, reinterpret_cast<const sockaddr*>(&address), length) == 0;
    timeval timeout{2, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~NotifySocket() {
    ::close(fd_);
    if (name_[0] == '/') std::filesystem::remove(name_);
  }
  bool bound() const { return bound_; }
  const std::string& name() const { return name_; }
  // One datagram, or "" after the receive timeout.
  std::string receive() const {
    char buffer[4096];
    const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
  }

 private:
  std::string name_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(SystemdNotifyTest, ParsesWatchdogLikeSdWatchdogEnabled) {
  EXPECT_EQ(parse_watchdog("2000000", nullptr, 42), microseconds(2'000'000));
  EXPECT_EQ(parse_watchdog("2000000", "42", 42), microseconds(2'000'000));
  EXPECT_FALSE(parse_watchdog("2000000", "43", 42));  // meant for another process
  EXPECT_FALSE(parse_watchdog(nullptr, nullptr, 42));
  EXPECT_FALSE(parse_watchdog("0", nullptr, 42));
  EXPECT_FALSE(parse_watchdog("12x", nullptr, 42));
  EXPECT_FALSE(parse_watchdog("", nullptr, 42));
  EXPECT_FALSE(parse_watchdog("-5", nullptr, 42));
  EXPECT_FALSE(parse_watchdog("100", "abc", 42));
}

TEST(SystemdNotifyTest, WithoutNotifySocketEverythingIsANoOp) {
  const SystemdNotifier notifier("", microseconds(1000));
  EXPECT_FALSE(notifier.enabled());
  EXPECT_TRUE(notifier.notify("READY=1"));
  asio::io_context io;
  WatchdogPinger pinger(io, notifier);
  EXPECT_FALSE(pinger.interval());
}

TEST(SystemdNotifyTest, SendsOneDatagramToAPathSocket) {
  NotifySocket socket(false);
  ASSERT_TRUE(socket.bound());
  const SystemdNotifier notifier(socket.name(), std::nullopt);
  std::string error;
  ASSERT_TRUE(notifier.notify("READY=1\nSTATUS=serving", &error)) << error;
  EXPECT_EQ(socket.receive(), "READY=1\nSTATUS=serving");
  ASSERT_TRUE(notifier.notify("STOPPING=1", &error)) << error;
  EXPECT_EQ(socket.receive(), "STOPPING=1");
}

TEST(SystemdNotifyTest, SendsToAnAbstractSocket) {
  NotifySocket socket(true);
  ASSERT_TRUE(socket.bound());
  const SystemdNotifier notifier(socket.name(), std::nullopt);
  std::string error;
  ASSERT_TRUE(notifier.notify("READY=1", &error)) << error;
  EXPECT_EQ(socket.receive(), "READY=1");
}

TEST(SystemdNotifyTest, ReadsTheEnvironment) {
  NotifySocket socket(false);
  ASSERT_TRUE(socket.bound());
  ::setenv("NOTIFY_SOCKET", socket.name().c_str(), 1);
  ::setenv("WATCHDOG_USEC", "3000000", 1);
  ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
  const SystemdNotifier notifier = SystemdNotifier::from_environment();
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ::unsetenv("WATCHDOG_PID");
  EXPECT_TRUE(notifier.enabled());
  EXPECT_EQ(notifier.socket(), socket.name());
  EXPECT_EQ(notifier.watchdog_period(), microseconds(3'000'000));
  ASSERT_TRUE(notifier.notify("READY=1"));
  EXPECT_EQ(socket.receive(), "READY=1");
}

TEST(SystemdNotifyTest, ReportsAMissingSocket) {
  const SystemdNotifier notifier("/tmp/mesh_notify_test_no_such_socket", std::nullopt);
  std::string error;
  EXPECT_FALSE(notifier.notify("READY=1", &error));
  EXPECT_NE(error.find("mesh_notify_test_no_such_socket"), std::string::npos) << error;
  const SystemdNotifier relative("relative/path", std::nullopt);
  EXPECT_FALSE(relative.notify("READY=1", &error));
}

TEST(SystemdNotifyTest, WatchdogPingsEveryHalfPeriodFromTheEventLoop) {
  NotifySocket socket(false);
  ASSERT_TRUE(socket.bound());
  const SystemdNotifier notifier(socket.name(), milliseconds(40));
  asio::io_context io;
  WatchdogPinger pinger(io, notifier);
  ASSERT_TRUE(pinger.interval());
  EXPECT_EQ(*pinger.interval(), milliseconds(20));
  pinger.start();
  // Long enough for several pings even on a loaded machine; stop after 3.
  int pings = 0;
  while (pings < 3 && io.run_one_for(std::chrono::seconds(5)) > 0) {
    // Every handler run is one ping (nothing else is queued).
    ++pings;
    EXPECT_EQ(socket.receive(), "WATCHDOG=1");
  }
  EXPECT_EQ(pings, 3);
  pinger.stop();
  io.run_for(milliseconds(60));  // the cancelled wait completes; no further ping
  io.restart();
  EXPECT_EQ(io.run_for(milliseconds(60)), 0u);
}

}  // namespace
}  // namespace mesh::agent
