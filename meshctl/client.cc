#include "meshctl/client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iostream>

namespace mesh::meshctl {
namespace {

constexpr size_t kReceiveChunk = 4096;

}  // namespace

AgentConnection::~AgentConnection() {
  if (fd_ >= 0) ::close(fd_);
}

Expected<proto::AdminResponse, std::string> AgentConnection::call(const proto::AdminRequest& request, double wait_s) {
  if (fd_ < 0) {
    if (auto error = connect_socket()) return Unexpected(*error);
  }
  if (auto error = set_timeouts(wait_s)) return Unexpected(*error);
  std::string frame;
  if (!mesh::proto::append_frame(request.SerializeAsString(), frame)) {
    return Unexpected(std::string("request too large"));
  }
  size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t n = ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Unexpected(fmt::format("sending the request failed: {}", std::strerror(errno)));
    }
    sent += static_cast<size_t>(n);
  }
  char buffer[kReceiveChunk];
  while (true) {
    if (std::optional<std::string> message = reader_.next()) {
      mesh::proto::AdminResponse response;
      if (!response.ParseFromString(*message)) {
        return Unexpected(std::string("the answer is not an AdminResponse (a different meshagent version?)"));
      }
      return response;
    }
    if (reader_.error() != mesh::proto::FrameReader::Error::none) {
      return Unexpected(std::string("the answer's frame is larger than the admin protocol allows"));
    }
    const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return Unexpected(fmt::format("no answer within {:.1f} s", wait_s));
      }
      return Unexpected(fmt::format("receiving the answer failed: {}", std::strerror(errno)));
    }
    if (n == 0) return Unexpected(std::string("the agent closed the connection without answering"));
    reader_.feed(std::string_view(buffer, static_cast<size_t>(n)));
  }
}

std::optional<std::string> AgentConnection::connect_socket() {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path_.size() >= sizeof(address.sun_path)) return std::string("the socket path is too long");
  std::memcpy(address.sun_path, path_.data(), path_.size());
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return fmt::format("cannot create a socket: {}", std::strerror(errno));
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    return std::string(std::strerror(error));
  }
  return std::nullopt;
}

std::optional<std::string> AgentConnection::set_timeouts(double wait_s) {
  timeval tv{};
  const auto micros = static_cast<int64_t>(wait_s * 1e6);
  tv.tv_sec = static_cast<time_t>(micros / 1000000);
  tv.tv_usec = static_cast<suseconds_t>(micros % 1000000);
  if (::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return fmt::format("cannot set a socket timeout: {}", std::strerror(errno));
  }
  return std::nullopt;
}

uint32_t agent_timeout_ms(const CommandLine& line) {
  return line.timeout_s ? static_cast<uint32_t>(std::min(*line.timeout_s * 1000.0, 3.6e6)) : 0;
}

double answer_wait_s(const CommandLine& line) { return line.timeout_s.value_or(kDefaultTimeoutS) + kPingAnswerGraceS; }

int usage_error(const std::string& message) {
  std::cerr << "meshctl: " << message << "\nTry 'meshctl --help' for usage.\n";
  return kExitUsage;
}

int no_agent(const AgentConnection& connection, const std::string& reason) {
  std::cerr << fmt::format(
      "meshctl: no agent answers at {}: {}. Is meshagent running? Use --socket PATH or MESHCTL_SOCKET.\n",
      connection.path(), reason);
  return kExitFailure;
}

int agent_error(const std::string& error) {
  std::cerr << "meshctl: " << error << "\n";
  return kExitFailure;
}

int unexpected_answer(std::string_view command) {
  std::cerr << fmt::format("meshctl: the agent's answer to {} holds no result (a different meshagent version?)\n",
                           command);
  return kExitFailure;
}

}  // namespace mesh::meshctl
