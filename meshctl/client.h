#pragma once

// What every meshctl verb shares: the parsed command line, the connection to
// the agent's admin socket, the exit statuses and the error reports.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/expected.h"
#include "proto/admin.pb.h"
#include "proto/frame.h"

namespace mesh::meshctl {

using core::Expected;
using core::Unexpected;

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// How long to wait for the agent's answer unless --timeout says otherwise.
constexpr double kDefaultTimeoutS = 10.0;
// With --timeout S, a ping asks the agent to wait S for the echo and meshctl
// waits this much longer for the agent to report the outcome (lock and
// kgroup-write likewise).
constexpr double kPingAnswerGraceS = 2.0;

struct CommandLine {
  std::string socket;
  bool json = false;
  bool all = false;
  bool log = false;
  bool through_leader = false;  // kgroup --log: read the log at the group's leader
  bool prometheus = false;  // metrics
  std::optional<double> timeout_s;
  std::optional<unsigned> count;
  std::optional<double> interval_s;
  bool help = false;
  std::optional<std::string> file;        // device add, routine add
  bool replace = false;                   // device add, routine add
  bool wait = false;                      // routine run
  std::optional<std::string> command_id;  // device set
  bool ignore_preconditions = false;      // device set
  std::optional<std::string> lock_strategy;  // device set: a combo's --lock
  std::vector<std::string> words;   // the command and its positional arguments
  std::optional<size_t> dash_dash;  // index in words of the first word after "--"
};

// One connection to the agent. Every failure is a reason text for "no agent
// answers at PATH: <reason>". Plain POSIX sockets with receive timeouts: one
// request at a time, nothing to multiplex.
class AgentConnection {
 public:
  explicit AgentConnection(std::string path) : path_(std::move(path)) {}
  AgentConnection(const AgentConnection&) = delete;
  AgentConnection& operator=(const AgentConnection&) = delete;
  ~AgentConnection();

  const std::string& path() const { return path_; }

  // Sends one request and waits up to wait_s seconds (0: forever) for its
  // answer; connects on first use.
  Expected<proto::AdminResponse, std::string> call(const proto::AdminRequest& request, double wait_s);

 private:
  std::optional<std::string> connect_socket();
  std::optional<std::string> set_timeouts(double wait_s);

  std::string path_;
  int fd_ = -1;
  proto::FrameReader reader_;
};

// A request the agent bounds with --timeout (device set, catalog changes,
// routine run): the timeout to send (0: the agent's default), and how long
// meshctl waits for the answer, longer by kPingAnswerGraceS so that the
// agent's own report of a timeout arrives.
uint32_t agent_timeout_ms(const CommandLine& line);
double answer_wait_s(const CommandLine& line);

// Each prints its message to stderr and returns the exit status to use.
int usage_error(const std::string& message);
int no_agent(const AgentConnection& connection, const std::string& reason);
int agent_error(const std::string& error);
int unexpected_answer(std::string_view command);

// One request without arguments; the reply, or the exit status on failure.
template <typename Reply>
Expected<Reply, int> simple_call(AgentConnection& connection, const CommandLine& line, std::string_view command,
                                 void (*fill)(proto::AdminRequest&), bool (proto::AdminResponse::*has)() const,
                                 const Reply& (proto::AdminResponse::*get)() const) {
  if (line.words.size() != 1) return Unexpected(usage_error(fmt::format("{} takes no arguments", command)));
  proto::AdminRequest request;
  fill(request);
  auto response = connection.call(request, line.timeout_s.value_or(kDefaultTimeoutS));
  if (!response) return Unexpected(no_agent(connection, response.error()));
  if (!response->error().empty()) return Unexpected(agent_error(response->error()));
  if (!((*response).*has)()) return Unexpected(unexpected_answer(command));
  return ((*response).*get)();
}

}  // namespace mesh::meshctl
