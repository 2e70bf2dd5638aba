// meshctl: the command-line client of a running meshagent, over its admin
// Unix socket (length-prefixed AdminRequest/AdminResponse frames). Plain
// POSIX sockets with receive timeouts: one request at a time, nothing to
// multiplex.
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/util/json_util.h>

#include "agent/prometheus_text.h"
#include "core/expected.h"
#include "core/node_id.h"
#include "proto/admin.pb.h"
#include "proto/frame.h"

namespace {

using mesh::core::Expected;
using mesh::core::Unexpected;

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr const char* kDefaultSocket = "/run/meshagent/admin.sock";
constexpr const char* kSocketEnv = "MESHCTL_SOCKET";
// How long to wait for the agent's answer unless --timeout says otherwise.
constexpr double kDefaultTimeoutS = 10.0;
// A ping without --timeout waits as long as the agent's configured ping
// timeout, which meshctl does not know; this only bounds a hung agent.
constexpr double kDefaultPingWaitS = 60.0;
// With --timeout S, a ping asks the agent to wait S for the echo and meshctl
// waits this much longer for the agent to report the outcome.
constexpr double kPingAnswerGraceS = 2.0;
constexpr unsigned kDefaultPingCount = 3;
constexpr double kDefaultPingIntervalS = 1.0;
constexpr size_t kReceiveChunk = 4096;

constexpr const char* kHelp = R"(NAME
    meshctl - query and control a running meshagent

SYNOPSIS
    meshctl [--socket PATH] [--json] [--timeout S] COMMAND [ARGS]
    meshctl --help

DESCRIPTION
    meshctl talks to the meshagent running on this machine over its admin
    Unix socket. Each command sends one request (ping sends one per echo)
    and prints the agent's answer, for people by default or as one JSON
    object with --json.

COMMANDS
    status
        The node's id, name, version and uptime, one summary line per
        layer (bottom up), and the one-hop neighbours with the time since
        each was last heard.

    metrics [--prometheus]
        Every counter and histogram of the node (count, mean, p50, p99,
        max), one series per line, sorted by name and labels. With
        --prometheus, the Prometheus text format instead: counters as
        meshagent_NAME_total, histograms as summaries (quantiles 0.5 and
        0.99, _sum, _count) with a meshagent_NAME_max gauge, and
        meshagent_up 1; the package's meshagent-prometheus.timer writes it
        for node_exporter's textfile collector.

    log LEVEL [LAYER]
        Sets the log level of LAYER (core, routing, agent, ...), or of
        every layer when LAYER is omitted. LEVEL is one of trace, debug,
        info, warn, error, critical, off. Lasts until the agent restarts.

    ping NODE [--count N] [--interval S]
        Sends N end-to-end echoes (default 3) to the node whose address is
        NODE (e.g. 10.0.0.2), S seconds apart (default 1), like ping(8).
        Each reply shows the hops the echo travelled and its round-trip
        time; a summary follows.

    neighbors
        OLSR's one-hop neighbours: main and link address, link status
        (symmetric, asymmetric, lost), willingness, whether we chose it as
        an MPR and whether it chose us (MPR selector), and the time since
        its latest HELLO; then the two-hop neighbours and who reaches them.

    routes
        The routing table: destination, next hop and hop count, sorted by
        destination. Agent messages and pings follow these routes.

    topology
        OLSR's topology set (who advertised a link to whom in its TC, with
        the ANSN and the time left) and the HNA networks announced.

    members [--all]
        Medley's membership list as this node sees it: name, id, state
        (alive or suspect; with --all also failed and left members, kept
        for membership.failed_retention_s), incarnation, hops away (- when
        no route is known) and the time since the member itself was last
        heard. Lists are weakly consistent: two nodes may disagree briefly.

    lock RESOURCE [--timeout S] -- CMD [ARGS...]
        Like flock(1) across the mesh: waits until this node holds the
        named resource (Camera mutual exclusion), runs CMD with the grant's
        fencing token in MESH_FENCING_TOKEN, releases the resource when CMD
        exits and exits with CMD's status (128 + N if a signal N ended it).
        The lock is tied to meshctl's connection: if meshctl dies, the
        agent releases it. --timeout S gives up after S seconds of waiting
        (exit 1); without it meshctl waits as long as it takes.

    locks
        Camera's state per resource on this node: phase (idle, waiting,
        held), fencing token, request id, fast or slow path, OKs still
        awaited, local waiters, requests deferred and recently OKed.

    kgroups
        Every k-group this node serves in: target, epoch, generation
        (re-selections within the epoch), this node's role (leader,
        follower, electing, candidate), the term it has promised, the
        leader it follows, the last committed sequence number (applied, on
        a follower), whether the group is sealed (migrated to its
        successor), and the members in priority order.

    kgroup TARGET [--log]
        Computes the group of TARGET (device:ID, cluster:ID or
        routine:ID) in the current epoch from this node's membership view
        alone, without messages: its members in priority order with their
        selection scores; the first is the preferred leader. Nodes whose
        member lists agree print the same group. With --json prints
        exactly {"target", "epoch", "leader", "members": [{"name", "id",
        "score"}]}.
        With --log, prints instead the text log this node's replica of
        TARGET's most recent group holds: every committed entry applied
        here, as SEQ TEXT in sequence order (SEQ is the entry's position
        in the target's log, kept across migrations). Exits 1 if this
        node serves in no group of TARGET. With --json: {"target",
        "epoch", "generation", "role", "sealed", "entries": [{"seq",
        "text"}]}.

    kgroup-write TARGET TEXT [--timeout S]
        Appends TEXT (one argument, 1 to 512 bytes) to TARGET's replicated
        text log. Any agent accepts the write and forwards it to the
        group's leader, following redirects and waiting out elections;
        the first write to a target creates its group. Prints the entry's
        sequence number only once the leader committed it at a quorum
        (f + 1 members); with --json {"seq", "leader", "epoch",
        "generation", "attempts"}. --timeout S (default: the agent's
        kgroup.write_timeout_ms) bounds the wait; if the write is not
        acknowledged by then meshctl exits 1, and the write may or may not
        be applied later.

    help
        Prints this text.

OPTIONS
    --socket PATH
        The agent's admin socket. Default: $MESHCTL_SOCKET, else
        /run/meshagent/admin.sock (the agent's admin.socket setting).

    --json
        Prints exactly one JSON object per command, with the protobuf field
        names of proto/admin.proto: StatusReply for status, MetricsReply
        for metrics, LogLevelReply for log, PingSummary for ping,
        NeighborsReply for neighbors, RoutesReply for routes, e.g.
        {"routes": [{"destination": "10.0.0.5", "next_hop": "10.0.0.2",
        "hops": 4}]}, TopologyReply for topology and MembersReply for
        members, e.g. {"members": [{"name": "n1", "id": "10.0.0.1",
        "state": "alive", "incarnation": "0", "hops": 1, ...}]}
        (incarnation is a string: protobuf's JSON form of uint64).

    --all
        members: also list failed and left members.

    --log
        kgroup: print this node's copy of the target's log.

    --timeout S
        Seconds to wait for the agent's answer (default 10). For ping, the
        agent waits S seconds for each echo (default: its ping_timeout)
        and meshctl 2 seconds more for the agent's report.

    -h, --help
        Prints this text.

EXIT STATUS
    0   the command succeeded; for ping, at least one reply came back.
    1   the agent reported an error, no echo was answered, or no agent
        answers at the socket.
    2   the command line is wrong.
    For lock, once the resource is granted: the status of CMD. For
    kgroup-write, 1 also when the write was not acknowledged in time.

ENVIRONMENT
    MESHCTL_SOCKET
        The admin socket to use when --socket is not given.

EXAMPLES
    meshctl status
    meshctl --json metrics
    meshctl log debug routing
    meshctl log info
    meshctl ping 10.0.0.2 --count 5 --interval 0.2
    meshctl routes
    meshctl --json neighbors
    meshctl members --all
    meshctl kgroup device:lamp
    meshctl kgroup-write device:lamp 'on at 18:00' --timeout 5
    meshctl --json kgroup device:lamp --log
    meshctl kgroups
    meshctl lock pump --timeout 30 -- sh -c 'echo "token $MESH_FENCING_TOKEN"'
    MESHCTL_SOCKET=/tmp/mesh/n1/admin.sock meshctl status
)";

struct CommandLine {
  std::string socket;
  bool json = false;
  bool all = false;
  bool log = false;
  bool prometheus = false;
  std::optional<double> timeout_s;
  std::optional<unsigned> count;
  std::optional<double> interval_s;
  bool help = false;
  std::vector<std::string> words;   // the command and its positional arguments
  std::optional<size_t> dash_dash;  // index in words of the first word after "--"
};

std::optional<double> parse_seconds(std::string_view text) {
  const std::string copy(text);
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || errno != 0 || !std::isfinite(value) || value < 0) {
    return std::nullopt;
  }
  return value;
}

std::optional<unsigned> parse_count(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  unsigned value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  return value;
}

Expected<CommandLine, std::string> parse_command_line(int argc, char** argv) {
  CommandLine line;
  if (const char* env = std::getenv(kSocketEnv); env != nullptr && *env != '\0') {
    line.socket = env;
  } else {
    line.socket = kDefaultSocket;
  }
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (options_done || arg.size() < 2 || arg[0] != '-') {
      line.words.emplace_back(arg);
      continue;
    }
    if (arg == "--") {
      options_done = true;
      line.dash_dash = line.words.size();
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      line.help = true;
      continue;
    }
    if (arg == "--json") {
      line.json = true;
      continue;
    }
    if (arg == "--all") {
      line.all = true;
      continue;
    }
    if (arg == "--log") {
      line.log = true;
      continue;
    }
    if (arg == "--prometheus") {
      line.prometheus = true;
      continue;
    }
    // Options with a value: "--name VALUE" or "--name=VALUE".
    std::string_view name = arg;
    std::optional<std::string_view> value;
    if (const size_t eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    if (name != "--socket" && name != "--timeout" && name != "--count" && name != "--interval") {
      return Unexpected(fmt::format("unknown option '{}'", arg));
    }
    if (!value) {
      if (i + 1 >= argc) return Unexpected(fmt::format("option {} needs a value", name));
      value = argv[++i];
    }
    if (name == "--socket") {
      if (value->empty()) return Unexpected(std::string("--socket needs a path"));
      line.socket = *value;
    } else if (name == "--timeout") {
      line.timeout_s = parse_seconds(*value);
      if (!line.timeout_s || *line.timeout_s <= 0) {
        return Unexpected(fmt::format("--timeout wants a positive number of seconds, not '{}'", *value));
      }
    } else if (name == "--count") {
      line.count = parse_count(*value);
      if (!line.count || *line.count == 0) {
        return Unexpected(fmt::format("--count wants a positive whole number, not '{}'", *value));
      }
    } else {
      line.interval_s = parse_seconds(*value);
      if (!line.interval_s) {
        return Unexpected(fmt::format("--interval wants a number of seconds, not '{}'", *value));
      }
    }
  }
  return line;
}

// One connection to the agent. Every failure is a reason text for "no agent
// answers at PATH: <reason>".
class AgentConnection {
 public:
  explicit AgentConnection(std::string path) : path_(std::move(path)) {}
  AgentConnection(const AgentConnection&) = delete;
  AgentConnection& operator=(const AgentConnection&) = delete;
  ~AgentConnection() {
    if (fd_ >= 0) ::close(fd_);
  }

  const std::string& path() const { return path_; }

  Expected<mesh::proto::AdminResponse, std::string> call(const mesh::proto::AdminRequest& request, double wait_s) {
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

 private:
  std::optional<std::string> connect_socket() {
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

  std::optional<std::string> set_timeouts(double wait_s) {
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

  std::string path_;
  int fd_ = -1;
  mesh::proto::FrameReader reader_;
};

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

void print_json(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  std::cout << out << "\n";
}

std::string format_number(double value) { return fmt::format("{:.3g}", value); }

// Columns left-aligned except those marked numeric, two spaces apart.
void print_table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& numeric,
                 const std::string& indent = "") {
  std::vector<size_t> widths(numeric.size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      if (c > 0) line += "  ";
      const bool last = c + 1 == row.size();
      if (numeric[c]) {
        line += fmt::format("{:>{}}", row[c], widths[c]);
      } else {
        line += last ? row[c] : fmt::format("{:<{}}", row[c], widths[c]);
      }
    }
    std::cout << line << "\n";
  }
}

int run_status(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 1) return usage_error("status takes no arguments");
  mesh::proto::AdminRequest request;
  request.mutable_status();
  auto response = connection.call(request, line.timeout_s.value_or(kDefaultTimeoutS));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_status()) return unexpected_answer("status");
  const mesh::proto::StatusReply& status = response->status();
  if (line.json) {
    print_json(status);
    return kExitOk;
  }
  std::cout << fmt::format("node {} ({}) version {} up {:.1f} s\n", status.node_id(), status.name(), status.version(),
                           status.uptime_s());
  std::vector<std::vector<std::string>> layers;
  for (const auto& layer : status.layers()) layers.push_back({layer.layer(), layer.summary()});
  print_table(layers, {false, false}, "  ");
  if (status.neighbours().empty()) {
    std::cout << "neighbours: none\n";
    return kExitOk;
  }
  std::cout << fmt::format("neighbours: {}\n", status.neighbours_size());
  std::vector<std::vector<std::string>> neighbours;
  for (const auto& n : status.neighbours()) {
    neighbours.push_back(
        {n.id(), n.name().empty() ? "-" : n.name(), fmt::format("heard {:.1f} s ago", n.last_heard_s())});
  }
  print_table(neighbours, {false, false, false}, "  ");
  return kExitOk;
}

int run_metrics(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 1) return usage_error("metrics takes no arguments");
  mesh::proto::AdminRequest request;
  request.mutable_metrics();
  auto response = connection.call(request, line.timeout_s.value_or(kDefaultTimeoutS));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_metrics()) return unexpected_answer("metrics");
  const mesh::proto::MetricsReply& metrics = response->metrics();
  if (line.prometheus) {
    std::cout << mesh::agent::to_prometheus_text(metrics);
    return kExitOk;
  }
  if (line.json) {
    print_json(metrics);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> counters = {{"COUNTER", "VALUE"}};
  for (const auto& c : metrics.counters()) counters.push_back({c.series(), std::to_string(c.value())});
  print_table(counters, {false, true});
  if (!metrics.histograms().empty()) {
    std::cout << "\n";
    std::vector<std::vector<std::string>> histograms = {{"HISTOGRAM", "COUNT", "MEAN", "P50", "P99", "MAX"}};
    for (const auto& h : metrics.histograms()) {
      histograms.push_back({h.series(), std::to_string(h.count()), format_number(h.mean()), format_number(h.p50()),
                            format_number(h.p99()), format_number(h.max())});
    }
    print_table(histograms, {false, true, true, true, true, true});
  }
  return kExitOk;
}

int run_log(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() < 2 || line.words.size() > 3) return usage_error("log wants LEVEL [LAYER]");
  mesh::proto::AdminRequest request;
  request.mutable_log_level()->set_level(line.words[1]);
  if (line.words.size() == 3) request.mutable_log_level()->set_layer(line.words[2]);
  auto response = connection.call(request, line.timeout_s.value_or(kDefaultTimeoutS));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_log_level()) return unexpected_answer("log");
  const mesh::proto::LogLevelReply& reply = response->log_level();
  if (line.json) {
    print_json(reply);
    return kExitOk;
  }
  std::vector<std::string> layers(reply.layers().begin(), reply.layers().end());
  std::cout << fmt::format("log level {} for {}\n", reply.level(), fmt::join(layers, ", "));
  return kExitOk;
}

// One request without arguments; the reply, or the exit status on failure.
template <typename Reply>
Expected<Reply, int> simple_call(AgentConnection& connection, const CommandLine& line, std::string_view command,
                                 void (*fill)(mesh::proto::AdminRequest&),
                                 bool (mesh::proto::AdminResponse::*has)() const,
                                 const Reply& (mesh::proto::AdminResponse::*get)() const) {
  if (line.words.size() != 1) return Unexpected(usage_error(fmt::format("{} takes no arguments", command)));
  mesh::proto::AdminRequest request;
  fill(request);
  auto response = connection.call(request, line.timeout_s.value_or(kDefaultTimeoutS));
  if (!response) return Unexpected(no_agent(connection, response.error()));
  if (!response->error().empty()) return Unexpected(agent_error(response->error()));
  if (!((*response).*has)()) return Unexpected(unexpected_answer(command));
  return ((*response).*get)();
}

int run_neighbors(AgentConnection& connection, const CommandLine& line) {
  auto reply = simple_call<mesh::proto::NeighborsReply>(
      connection, line, "neighbors", [](mesh::proto::AdminRequest& r) { r.mutable_neighbors(); },
      &mesh::proto::AdminResponse::has_neighbors, &mesh::proto::AdminResponse::neighbors);
  if (!reply) return reply.error();
  if (line.json) {
    print_json(*reply);
    return kExitOk;
  }
  if (reply->neighbors().empty()) {
    std::cout << "no neighbours heard\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"NEIGHBOR", "LINK", "STATUS", "WILLINGNESS", "MPR", "MPR_SELECTOR", "HEARD"}};
  for (const auto& n : reply->neighbors()) {
    rows.push_back({n.id(), n.link_address(), n.status(), std::to_string(n.willingness()), n.mpr() ? "yes" : "no",
                    n.mpr_selector() ? "yes" : "no", fmt::format("{:.1f} s ago", n.last_heard_s())});
  }
  print_table(rows, {false, false, false, true, false, false, false});
  if (!reply->two_hop().empty()) {
    std::cout << "\n";
    std::vector<std::vector<std::string>> two_hop = {{"TWO_HOP", "VIA"}};
    for (const auto& t : reply->two_hop()) two_hop.push_back({t.id(), t.via()});
    print_table(two_hop, {false, false});
  }
  return kExitOk;
}

int run_routes(AgentConnection& connection, const CommandLine& line) {
  auto reply = simple_call<mesh::proto::RoutesReply>(
      connection, line, "routes", [](mesh::proto::AdminRequest& r) { r.mutable_routes(); },
      &mesh::proto::AdminResponse::has_routes, &mesh::proto::AdminResponse::routes);
  if (!reply) return reply.error();
  if (line.json) {
    print_json(*reply);
    return kExitOk;
  }
  if (reply->routes().empty()) {
    std::cout << "no routes\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"DESTINATION", "NEXT_HOP", "HOPS"}};
  for (const auto& r : reply->routes()) rows.push_back({r.destination(), r.next_hop(), std::to_string(r.hops())});
  print_table(rows, {false, false, true});
  return kExitOk;
}

int run_topology(AgentConnection& connection, const CommandLine& line) {
  auto reply = simple_call<mesh::proto::TopologyReply>(
      connection, line, "topology", [](mesh::proto::AdminRequest& r) { r.mutable_topology(); },
      &mesh::proto::AdminResponse::has_topology, &mesh::proto::AdminResponse::topology);
  if (!reply) return reply.error();
  if (line.json) {
    print_json(*reply);
    return kExitOk;
  }
  if (reply->entries().empty()) {
    std::cout << "no topology entries\n";
  } else {
    std::vector<std::vector<std::string>> rows = {{"LAST_HOP", "DESTINATION", "ANSN", "EXPIRES"}};
    for (const auto& e : reply->entries()) {
      rows.push_back(
          {e.last_hop(), e.destination(), std::to_string(e.ansn()), fmt::format("in {:.1f} s", e.expires_in_s())});
    }
    print_table(rows, {false, false, true, false});
  }
  if (!reply->hna().empty()) {
    std::cout << "\n";
    std::vector<std::vector<std::string>> rows = {{"GATEWAY", "NETWORK", "EXPIRES"}};
    for (const auto& h : reply->hna()) {
      rows.push_back({h.gateway(), h.network(), fmt::format("in {:.1f} s", h.expires_in_s())});
    }
    print_table(rows, {false, false, false});
  }
  return kExitOk;
}

int run_members(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 1) return usage_error("members takes no arguments (only --all)");
  mesh::proto::AdminRequest request;
  request.mutable_members()->set_all(line.all);
  auto response = connection.call(request, line.timeout_s.value_or(kDefaultTimeoutS));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_members()) return unexpected_answer("members");
  const mesh::proto::MembersReply& reply = response->members();
  if (line.json) {
    print_json(reply);
    return kExitOk;
  }
  if (reply.members().empty()) {
    std::cout << "no members\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"NAME", "ID", "STATE", "INCARNATION", "HOPS", "HEARD"}};
  for (const auto& m : reply.members()) {
    rows.push_back({m.name().empty() ? "-" : m.name(), m.id(), m.state(), std::to_string(m.incarnation()),
                    m.hops() < 0 ? "-" : std::to_string(m.hops()),
                    m.last_heard_s_ago() < 0 ? "-" : fmt::format("{:.1f} s ago", m.last_heard_s_ago())});
  }
  print_table(rows, {false, false, false, true, true, false});
  return kExitOk;
}

// Waits for CMD, whatever signals arrive meanwhile; its exit status as a
// shell reports it.
int wait_for_child(pid_t child) {
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return kExitFailure;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitFailure;
}

int run_lock(AgentConnection& connection, const CommandLine& line) {
  if (!line.dash_dash || *line.dash_dash != 2 || line.words.size() < 3) {
    return usage_error("lock wants RESOURCE [--timeout S] -- CMD [ARGS...]");
  }
  const std::string& resource = line.words[1];
  mesh::proto::AdminRequest request;
  request.mutable_lock()->set_resource(resource);
  // No receive timeout without --timeout: the grant may take as long as the
  // holders ahead of us do.
  double wait_s = 0;
  if (line.timeout_s) {
    request.mutable_lock()->set_timeout_ms(static_cast<uint32_t>(std::llround(*line.timeout_s * 1000.0)));
    wait_s = *line.timeout_s + kPingAnswerGraceS;
  }
  auto response = connection.call(request, wait_s);
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_lock()) return unexpected_answer("lock");
  const mesh::proto::LockReply& grant = response->lock();

  std::vector<char*> argv;
  for (size_t i = *line.dash_dash; i < line.words.size(); ++i) argv.push_back(const_cast<char*>(line.words[i].c_str()));
  argv.push_back(nullptr);
  const std::string token = std::to_string(grant.fencing_token());
  std::cout.flush();
  const pid_t child = ::fork();
  if (child < 0) {
    std::cerr << fmt::format("meshctl: cannot start {}: {}\n", argv[0], std::strerror(errno));
    return kExitFailure;
  }
  if (child == 0) {
    ::setenv("MESH_FENCING_TOKEN", token.c_str(), 1);
    ::execvp(argv[0], argv.data());
    const int error = errno;
    std::cerr << fmt::format("meshctl: cannot run {}: {}\n", argv[0], std::strerror(error));
    ::_exit(error == ENOENT ? 127 : 126);
  }
  const int status = wait_for_child(child);

  mesh::proto::AdminRequest unlock;
  unlock.mutable_unlock()->set_resource(resource);
  auto released = connection.call(unlock, kDefaultTimeoutS);
  if (!released || !released->error().empty() || !released->has_unlock() || !released->unlock().released()) {
    // Closing the connection (on exit) releases it all the same.
    std::cerr << fmt::format("meshctl: could not release '{}' explicitly: {}\n", resource,
                             !released ? released.error() : released->error());
  }
  return status;
}

int run_locks(AgentConnection& connection, const CommandLine& line) {
  auto reply = simple_call<mesh::proto::LocksReply>(
      connection, line, "locks", [](mesh::proto::AdminRequest& r) { r.mutable_locks(); },
      &mesh::proto::AdminResponse::has_locks, &mesh::proto::AdminResponse::locks);
  if (!reply) return reply.error();
  if (line.json) {
    print_json(*reply);
    return kExitOk;
  }
  if (reply->locks().empty()) {
    std::cout << "no resources\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"RESOURCE", "PHASE", "TOKEN", "PATH", "AWAITING_OKS", "QUEUED", "DEFERRED", "RECENT_OKS", "REQUEST"}};
  for (const auto& l : reply->locks()) {
    rows.push_back({l.resource(), l.phase(), std::to_string(l.fencing_token()), l.slow_path() ? "slow" : "fast",
                    std::to_string(l.awaiting_oks()), std::to_string(l.queued_locally()), std::to_string(l.deferred()),
                    std::to_string(l.recently_oked()), l.request().empty() ? "-" : l.request()});
  }
  print_table(rows, {false, false, true, false, true, true, true, true, false});
  return kExitOk;
}

int run_ping(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 2) return usage_error("ping wants one NODE (an IPv4 address such as 10.0.0.2)");
  const std::string& node = line.words[1];
  if (!mesh::core::NodeId::parse(node)) return usage_error(fmt::format("not an IPv4 address: '{}'", node));
  const unsigned count = line.count.value_or(kDefaultPingCount);
  const double interval_s = line.interval_s.value_or(kDefaultPingIntervalS);

  mesh::proto::AdminRequest request;
  request.mutable_ping()->set_node(node);
  double wait_s = kDefaultPingWaitS;
  if (line.timeout_s) {
    request.mutable_ping()->set_timeout_ms(static_cast<uint32_t>(std::llround(*line.timeout_s * 1000.0)));
    wait_s = *line.timeout_s + kPingAnswerGraceS;
  }

  mesh::proto::PingSummary summary;
  summary.set_node(node);
  for (unsigned i = 0; i < count; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::duration<double>(interval_s));
    auto response = connection.call(request, wait_s);
    if (!response) return no_agent(connection, response.error());
    summary.set_sent(summary.sent() + 1);
    if (!response->error().empty() || !response->has_ping()) {
      if (!line.json) {
        std::cout << (response->error().empty() ? std::string("the agent's answer holds no ping result")
                                                : response->error())
                  << "\n";
      }
      continue;
    }
    const mesh::proto::PingReply& reply = response->ping();
    summary.set_received(summary.received() + 1);
    summary.add_rtt_ms(reply.rtt_ms());
    summary.set_hops(reply.hops());
    if (!line.json) {
      std::cout << fmt::format("reply from {}: hops={} time={:.2f} ms\n", reply.node(), reply.hops(), reply.rtt_ms());
      std::cout.flush();
    }
  }
  if (summary.received() > 0) {
    const auto& rtts = summary.rtt_ms();
    double sum = 0;
    for (double rtt : rtts) sum += rtt;
    summary.set_min_ms(*std::min_element(rtts.begin(), rtts.end()));
    summary.set_max_ms(*std::max_element(rtts.begin(), rtts.end()));
    summary.set_avg_ms(sum / static_cast<double>(rtts.size()));
  }
  if (line.json) {
    print_json(summary);
  } else {
    std::cout << fmt::format("--- {} ping statistics ---\n", node);
    std::cout << fmt::format("{} sent, {} received", summary.sent(), summary.received());
    if (summary.received() > 0) {
      std::cout << fmt::format(", min/avg/max = {:.2f}/{:.2f}/{:.2f} ms", summary.min_ms(), summary.avg_ms(),
                               summary.max_ms());
    }
    std::cout << "\n";
  }
  return summary.received() > 0 ? kExitOk : kExitFailure;
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string member_label(const mesh::proto::KgroupMember& member) {
  return member.name().empty() ? member.id() : fmt::format("{}({})", member.name(), member.id());
}

int run_kgroups(AgentConnection& connection, const CommandLine& line) {
  auto reply = simple_call<mesh::proto::KgroupsReply>(
      connection, line, "kgroups", [](mesh::proto::AdminRequest& r) { r.mutable_kgroups(); },
      &mesh::proto::AdminResponse::has_kgroups, &mesh::proto::AdminResponse::kgroups);
  if (!reply) return reply.error();
  if (line.json) {
    print_json(*reply);
    return kExitOk;
  }
  if (reply->groups().empty()) {
    std::cout << "this node serves in no k-group\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"TARGET", "EPOCH", "GEN", "ROLE", "TERM", "LEADER", "COMMIT", "SEALED", "MEMBERS"}};
  for (const auto& g : reply->groups()) {
    std::vector<std::string> members;
    for (const auto& m : g.members()) members.push_back(member_label(m));
    rows.push_back({g.target(), std::to_string(g.epoch()), std::to_string(g.generation()), g.role(),
                    std::to_string(g.term()), g.leader().empty() ? "-" : g.leader(), std::to_string(g.commit()),
                    g.sealed() ? "yes" : "no", fmt::format("{}", fmt::join(members, " "))});
  }
  print_table(rows, {false, true, true, false, true, false, true, false, false});
  return kExitOk;
}

int run_kgroup(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 2) {
    return usage_error("kgroup takes one TARGET: device:ID, cluster:ID or routine:ID (e.g. kgroup device:lamp)");
  }
  mesh::proto::AdminRequest request;
  request.mutable_kgroup()->set_target(line.words[1]);
  request.mutable_kgroup()->set_log(line.log);
  auto response = connection.call(request, line.timeout_s.value_or(kDefaultTimeoutS));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_kgroup()) return unexpected_answer("kgroup");
  const mesh::proto::KgroupReply& reply = response->kgroup();
  if (line.log) {
    if (line.json) {
      std::string out = fmt::format(R"({{"target": {}, "epoch": {}, "generation": {}, "role": {}, "sealed": {}, )"
                                    R"("entries": [)",
                                    json_string(reply.target()), reply.log_epoch(), reply.log_generation(),
                                    json_string(reply.log_role()), reply.log_sealed() ? "true" : "false");
      for (int i = 0; i < reply.records_size(); ++i) {
        out += fmt::format(R"({}{{"seq": {}, "text": {}}})", i == 0 ? "" : ", ", reply.records(i).seq(),
                           json_string(reply.records(i).text()));
      }
      std::cout << out << "]}\n";
      return kExitOk;
    }
    std::cout << fmt::format("{} epoch {} generation {}: this node is {}{}, {} entries\n", reply.target(),
                             reply.log_epoch(), reply.log_generation(), reply.log_role(),
                             reply.log_sealed() ? " (sealed)" : "", reply.records_size());
    if (reply.records().empty()) return kExitOk;
    std::vector<std::vector<std::string>> rows = {{"SEQ", "TEXT"}};
    for (const auto& r : reply.records()) rows.push_back({std::to_string(r.seq()), r.text()});
    print_table(rows, {true, false});
    return kExitOk;
  }
  if (line.json) {
    std::cout << reply.selection_json() << "\n";
    return kExitOk;
  }
  std::cout << fmt::format("{} epoch {}: preferred leader {}\n", reply.target(), reply.epoch(),
                           reply.leader().empty() ? "none (no live members known)" : reply.leader());
  if (reply.members().empty()) return kExitOk;
  std::vector<std::vector<std::string>> rows = {{"NAME", "ID", "SCORE"}};
  for (const auto& m : reply.members()) rows.push_back({m.name().empty() ? "-" : m.name(), m.id(), m.score()});
  print_table(rows, {false, false, false});
  return kExitOk;
}

int run_kgroup_write(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 3) {
    return usage_error(
        "kgroup-write takes a TARGET and one TEXT argument (quote text with spaces), e.g. kgroup-write device:lamp "
        "'on at 18:00'");
  }
  if (line.words[2].empty()) return usage_error("kgroup-write: TEXT must not be empty");
  mesh::proto::AdminRequest request;
  auto& write = *request.mutable_kgroup_write();
  write.set_target(line.words[1]);
  write.set_text(line.words[2]);
  double wait_s = kDefaultTimeoutS;
  if (line.timeout_s) {
    write.set_timeout_ms(static_cast<uint32_t>(std::min(*line.timeout_s * 1000.0, 3.6e6)));
    wait_s = *line.timeout_s;
  }
  // The agent reports a timeout itself; this only bounds a hung agent.
  auto response = connection.call(request, wait_s + kPingAnswerGraceS);
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_kgroup_write()) return unexpected_answer("kgroup-write");
  const mesh::proto::KgroupWriteReply& reply = response->kgroup_write();
  if (line.json) {
    std::cout << fmt::format(R"({{"seq": {}, "leader": {}, "epoch": {}, "generation": {}, "attempts": {}}})"
                             "\n",
                             reply.seq(), json_string(reply.leader()), reply.epoch(), reply.generation(),
                             reply.attempts());
    return kExitOk;
  }
  std::cout << fmt::format("committed seq {} (leader {}, epoch {}, generation {}, {} attempts)\n", reply.seq(),
                           reply.leader(), reply.epoch(), reply.generation(), reply.attempts());
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = parse_command_line(argc, argv);
  if (!parsed) return usage_error(parsed.error());
  const CommandLine& line = *parsed;
  if (line.help || (!line.words.empty() && line.words[0] == "help")) {
    std::cout << kHelp;
    return kExitOk;
  }
  if (line.words.empty()) {
    return usage_error(
        "no command given (status, metrics, log, ping, neighbors, routes, topology, members, lock, locks, kgroups, "
        "kgroup, kgroup-write)");
  }
  const std::string& command = line.words[0];
  if ((line.count || line.interval_s) && command != "ping") {
    return usage_error("--count and --interval apply to ping only");
  }
  if (line.all && command != "members") return usage_error("--all applies to members only");
  if (line.log && command != "kgroup") return usage_error("--log applies to kgroup only");
  if (line.prometheus && command != "metrics") return usage_error("--prometheus applies to metrics only");
  AgentConnection connection(line.socket);
  if (command == "status") return run_status(connection, line);
  if (command == "metrics") return run_metrics(connection, line);
  if (command == "log") return run_log(connection, line);
  if (command == "ping") return run_ping(connection, line);
  if (command == "neighbors" || command == "neighbours") return run_neighbors(connection, line);
  if (command == "routes") return run_routes(connection, line);
  if (command == "topology") return run_topology(connection, line);
  if (command == "members") return run_members(connection, line);
  if (command == "lock") return run_lock(connection, line);
  if (command == "locks") return run_locks(connection, line);
  if (command == "kgroups") return run_kgroups(connection, line);
  if (command == "kgroup") return run_kgroup(connection, line);
  if (command == "kgroup-write") return run_kgroup_write(connection, line);
  return usage_error(
      fmt::format("unknown command '{}' (status, metrics, log, ping, neighbors, routes, topology, members, lock, "
                  "locks, kgroups, kgroup, kgroup-write)",
                  command));
}
