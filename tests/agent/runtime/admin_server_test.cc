#include "agent/runtime/admin_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include <asio.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/admin_service.h"
#include "core/log.h"
#include "proto/frame.h"
#include "tests/agent/test_world.h"

namespace mesh::agent {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using testing::ip;
using testing::LinkGraph;
using testing::ManualEnv;
using testing::test_config;

// Rounds of io_context work a test allows before deciding an answer will not
// come; each round returns as soon as the loop runs out of ready work.
constexpr int kPollRounds = 200;
constexpr milliseconds kPollStep{5};

int connect_to(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string frame_of(const proto::AdminRequest& request) {
  std::string frame;
  proto::append_frame(request.SerializeAsString(), frame);
  return frame;
}

void send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    ASSERT_GT(n, 0) << std::strerror(errno);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

class AdminServerTest : public ::testing::Test {
 protected:
  AdminServerTest() : graph_(env_) {
    core::log_to_null();
    // mkdtemp replaces the six trailing X characters.
    std::string pattern = "/tmp/meshagent-admin-" + std::string(6, 'X');
    dir_ = ::mkdtemp(pattern.data());
    path_ = dir_ + "/run/admin.sock";
    graph_.connect(ip(1), ip(2), milliseconds(1), milliseconds(1));
    for (uint8_t last : {1, 2}) {
      core::Link& link = graph_.add(ip(last));
      nodes_[last] = std::make_unique<Node>(test_config(last),
                                            NodeContext{env_, link, graph_.add_routing(ip(last)), storage_[last]});
      nodes_[last]->start();
    }
    env_.advance(seconds(3));
    service_ = std::make_unique<AdminService>(*nodes_[1]);
  }
  ~AdminServerTest() override {
    server_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
    core::log_to_stderr();
  }

  AdminServer& start_server() {
    server_ = std::make_unique<AdminServer>(io_, path_, *service_, nodes_[1]->metrics());
    server_->start();
    return *server_;
  }

  // Runs the io_context until `count` answers arrived on `fd` or the
  // connection closed; returns what arrived.
  // Runs the server's I/O up to `rounds` steps of kPollStep (real time)
  // until `count` answers came.
  std::vector<proto::AdminResponse> receive(int fd, size_t count, bool* closed = nullptr, int rounds = kPollRounds) {
    std::vector<proto::AdminResponse> out;
    proto::FrameReader reader;
    char buffer[4096];
    bool eof = false;
    for (int round = 0; round < rounds && out.size() < count && !eof; ++round) {
      io_.run_for(kPollStep);
      while (true) {
        const ssize_t n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
        if (n == 0) eof = true;
        if (n <= 0) break;
        reader.feed(std::string_view(buffer, static_cast<size_t>(n)));
      }
      while (auto message = reader.next()) {
        proto::AdminResponse response;
        EXPECT_TRUE(response.ParseFromString(*message));
        out.push_back(std::move(response));
      }
    }
    if (closed != nullptr) *closed = eof;
    return out;
  }

  // True once the server closed `fd` (EOF seen) within the poll budget.
  bool closed_by_server(int fd) {
    bool closed = false;
    receive(fd, SIZE_MAX, &closed);
    return closed;
  }

  asio::io_context io_;
  ManualEnv env_;
  LinkGraph graph_;
  std::map<uint8_t, core::MemoryStorage> storage_;
  std::map<uint8_t, std::unique_ptr<Node>> nodes_;
  std::unique_ptr<AdminService> service_;
  std::unique_ptr<AdminServer> server_;
  std::string dir_;
  std::string path_;
};

TEST_F(AdminServerTest, AnswersSeveralRequestsInOrderAndSurvivesAMalformedOne) {
  start_server();
  const int fd = connect_to(path_);
  ASSERT_GE(fd, 0);
  proto::AdminRequest status;
  status.mutable_status();
  proto::AdminRequest metrics;
  metrics.mutable_metrics();
  proto::AdminRequest log;
  log.mutable_log_level()->set_level("info");
  std::string malformed;
  proto::append_frame(std::string("\x0a\xff\xff", 3), malformed);  // a length running past the end
  send_all(fd, frame_of(status) + frame_of(metrics) + malformed + frame_of(log));

  const auto responses = receive(fd, 4);
  ASSERT_EQ(responses.size(), 4u);
  EXPECT_TRUE(responses[0].has_status());
  EXPECT_EQ(responses[0].status().node_id(), "10.0.0.1");
  EXPECT_TRUE(responses[1].has_metrics());
  EXPECT_THAT(responses[2].error(), HasSubstr("malformed request"));
  EXPECT_TRUE(responses[3].has_log_level()) << responses[3].error();
  ::close(fd);
}

TEST_F(AdminServerTest, AnAnswerReadyEarlyWaitsForTheSlowerOneBeforeIt) {
  start_server();
  const int fd = connect_to(path_);
  ASSERT_GE(fd, 0);
  proto::AdminRequest ping;
  ping.mutable_ping()->set_node("10.0.0.2");
  proto::AdminRequest status;
  status.mutable_status();
  send_all(fd, frame_of(ping) + frame_of(status));

  // The echo needs virtual time, which only the test advances.
  EXPECT_TRUE(receive(fd, 1).empty()) << "status overtook the ping";
  env_.advance(seconds(1));
  const auto responses = receive(fd, 2);
  ASSERT_EQ(responses.size(), 2u);
  ASSERT_TRUE(responses[0].has_ping()) << responses[0].error();
  EXPECT_EQ(responses[0].ping().hops(), 1u);
  EXPECT_TRUE(responses[1].has_status());
  ::close(fd);
}

TEST_F(AdminServerTest, AnswersAfterTheClientHalfCloses) {
  start_server();
  const int fd = connect_to(path_);
  ASSERT_GE(fd, 0);
  proto::AdminRequest status;
  status.mutable_status();
  send_all(fd, frame_of(status));
  ::shutdown(fd, SHUT_WR);
  bool closed = false;
  const auto responses = receive(fd, 2, &closed);
  ASSERT_EQ(responses.size(), 1u);
  EXPECT_TRUE(responses[0].has_status());
  EXPECT_TRUE(closed);
  ::close(fd);
}

TEST_F(AdminServerTest, OversizedFrameClosesTheConnection) {
  start_server();
  const int fd = connect_to(path_);
  ASSERT_GE(fd, 0);
  send_all(fd, std::string("\xff\xff\xff\xff", 4));
  EXPECT_TRUE(closed_by_server(fd));
  ::close(fd);
  // The server itself keeps serving.
  const int again = connect_to(path_);
  ASSERT_GE(again, 0);
  proto::AdminRequest status;
  status.mutable_status();
  send_all(again, frame_of(status));
  EXPECT_EQ(receive(again, 1).size(), 1u);
  ::close(again);
}

TEST_F(AdminServerTest, ConnectionsBeyondTheLimitAreRefusedWithAnErrorAndCounted) {
  AdminServer& server = start_server();
  std::vector<int> open;
  for (size_t i = 0; i < AdminServer::kMaxConnections; ++i) {
    const int fd = connect_to(path_);
    ASSERT_GE(fd, 0);
    open.push_back(fd);
  }
  // Each may hold a partial frame; these declare the largest one.
  for (int fd : open) send_all(fd, std::string("\x00\x10\x00\x00", 4));
  io_.run_for(kPollStep);

  const int extra = connect_to(path_);
  ASSERT_GE(extra, 0);
  bool closed = false;
  const auto refused = receive(extra, 2, &closed);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_THAT(refused[0].error(), HasSubstr("admin connections"));
  EXPECT_TRUE(closed);
  ::close(extra);
  EXPECT_EQ(nodes_[1]->metrics().counter("admin_connections_refused_total").value(), 1u);

  // One closing makes room for the next client, which is served.
  ::close(open.back());
  open.pop_back();
  io_.run_for(kPollStep);
  const int next = connect_to(path_);
  ASSERT_GE(next, 0);
  proto::AdminRequest status;
  status.mutable_status();
  send_all(next, frame_of(status));
  const auto served = receive(next, 1);
  ASSERT_EQ(served.size(), 1u);
  EXPECT_TRUE(served[0].has_status()) << served[0].error();
  ::close(next);
  for (int fd : open) ::close(fd);
  EXPECT_EQ(server.socket_path(), path_);
}

TEST_F(AdminServerTest, OversizedAndMalformedFramesAreCounted) {
  start_server();
  const int fd = connect_to(path_);
  ASSERT_GE(fd, 0);
  std::string malformed;
  proto::append_frame(std::string("\x0a\xff\xff", 3), malformed);
  send_all(fd, malformed + std::string("\x00\x10\x00\x01", 4));  // then one byte over the limit
  EXPECT_TRUE(closed_by_server(fd));
  ::close(fd);
  core::Metrics& metrics = nodes_[1]->metrics();
  EXPECT_EQ(metrics.counter("admin_frames_dropped_total", {{"reason", "malformed"}}).value(), 1u);
  EXPECT_EQ(metrics.counter("admin_frames_dropped_total", {{"reason", "oversized"}}).value(), 1u);
}

TEST_F(AdminServerTest, CreatesTheDirectoryAndRestrictsTheSocket) {
  ASSERT_FALSE(fs::exists(dir_ + "/run"));
  start_server();
  struct stat socket_stat {};
  ASSERT_EQ(::stat(path_.c_str(), &socket_stat), 0);
  EXPECT_TRUE(S_ISSOCK(socket_stat.st_mode));
  EXPECT_EQ(socket_stat.st_mode & 07777, 0660u);
  struct stat dir_stat {};
  ASSERT_EQ(::stat((dir_ + "/run").c_str(), &dir_stat), 0);
  EXPECT_EQ(dir_stat.st_mode & 07777, 0750u);
}

TEST_F(AdminServerTest, SecondServerOnTheSamePathRefusesToStart) {
  start_server();
  AdminServer second(io_, path_, *service_, nodes_[1]->metrics());
  try {
    second.start();
    FAIL() << "a second server took over a live socket";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("another meshagent is already serving " + path_));
    EXPECT_THAT(e.what(), HasSubstr("pid " + std::to_string(::getpid())));
    EXPECT_THAT(e.what(), HasSubstr("set admin.socket to another path"));
  }
  second.stop();
  // The first server still owns its socket.
  EXPECT_TRUE(fs::exists(path_));
  const int fd = connect_to(path_);
  ASSERT_GE(fd, 0);
  proto::AdminRequest status;
  status.mutable_status();
  send_all(fd, frame_of(status));
  EXPECT_EQ(receive(fd, 1).size(), 1u);
  ::close(fd);
}

TEST_F(AdminServerTest, StaleSocketFileIsReplaced) {
  fs::create_directories(dir_ + "/run");
  {
    // A socket file whose listener is gone, as a crashed agent leaves it.
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path_.data(), path_.size());
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
    ::close(fd);
  }
  ASSERT_TRUE(fs::is_socket(path_));
  start_server();
  const int fd = connect_to(path_);
  ASSERT_GE(fd, 0);
  proto::AdminRequest status;
  status.mutable_status();
  send_all(fd, frame_of(status));
  EXPECT_EQ(receive(fd, 1).size(), 1u);
  ::close(fd);
}

TEST_F(AdminServerTest, LeftoverRegularFileIsReplaced) {
  fs::create_directories(dir_ + "/run");
  std::ofstream(path_) << "not a socket";
  start_server();
  EXPECT_TRUE(fs::is_socket(path_));
}

TEST_F(AdminServerTest, StopClosesConnectionsAndRemovesTheSocket) {
  AdminServer& server = start_server();
  const int fd = connect_to(path_);
  ASSERT_GE(fd, 0);
  io_.run_for(kPollStep);
  server.stop();
  EXPECT_FALSE(fs::exists(path_));
  EXPECT_TRUE(closed_by_server(fd));
  ::close(fd);
  EXPECT_LT(connect_to(path_), 0);
  server.stop();  // harmless twice
}

TEST_F(AdminServerTest, UnusablePathGivesAClearError) {
  AdminServer server(io_, std::string(200, 'x'), *service_, nodes_[1]->metrics());
  try {
    server.start();
    FAIL() << "started on a path too long for a Unix socket";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("longer than"));
  }
}

// The grant belongs to the connection: a meshctl killed while it holds a lock
// closes its socket, and the next requester gets the resource.
TEST_F(AdminServerTest, ClosingTheConnectionReleasesItsLock) {
  start_server();
  proto::AdminRequest lock;
  lock.mutable_lock()->set_resource("pump");
  lock.mutable_lock()->set_timeout_ms(30000);
  // Camera needs the other node's OK, which travels on virtual time.
  auto await_grant = [this](int fd) -> std::optional<proto::LockReply> {
    for (int round = 0; round < kPollRounds; ++round) {
      env_.advance(milliseconds(100));
      // A few real-time steps per virtual step: the grant waits on virtual
      // time, so waiting longer in real time only slows the test.
      const auto answers = receive(fd, 1, nullptr, 4);
      if (!answers.empty()) {
        EXPECT_TRUE(answers[0].has_lock()) << answers[0].error();
        return answers[0].lock();
      }
    }
    return std::nullopt;
  };

  const int holder = connect_to(path_);
  ASSERT_GE(holder, 0);
  send_all(holder, frame_of(lock));
  const auto first = await_grant(holder);
  ASSERT_TRUE(first.has_value());

  const int waiter = connect_to(path_);
  ASSERT_GE(waiter, 0);
  send_all(waiter, frame_of(lock));
  env_.advance(seconds(2));
  EXPECT_TRUE(receive(waiter, 1).empty()) << "granted while the first connection still holds it";

  ::close(holder);
  const auto second = await_grant(waiter);
  ASSERT_TRUE(second.has_value()) << "the closed connection's lock was never released";
  EXPECT_GT(second->fencing_token(), first->fencing_token());
  ::close(waiter);
}

}  // namespace
}  // namespace mesh::agent
