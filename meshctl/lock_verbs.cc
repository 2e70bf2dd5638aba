// meshctl verbs about Camera mutual exclusion: lock, locks.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "meshctl/output.h"
#include "meshctl/verbs.h"

namespace mesh::meshctl {
namespace {

constexpr std::string_view kHelp = R"(    lock RESOURCE [--timeout S] -- CMD [ARGS...]
        Like flock(1) across the mesh: waits until this node holds the
        named resource (Camera mutual exclusion), runs CMD with the grant's
        fencing token in MESH_FENCING_TOKEN, releases the resource when CMD
        exits and exits with CMD's status (128 + N if a signal N ended it).
        The lock is tied to meshctl's connection: if meshctl dies, the
        agent releases it. --timeout S gives up after S seconds of waiting
        (exit 1); without it meshctl waits as long as it takes. While CMD
        runs, meshctl checks every second that the grant still holds: if
        this node was cut off from most of the mesh for [mutex]
        hold_lease_ms, the grant lapses (the rest of the mesh may take the
        resource again), and meshctl stops CMD with SIGTERM, says so, and
        exits with CMD's status (143 if SIGTERM ended it). Where the
        resource can check MESH_FENCING_TOKEN, also have it refuse tokens
        below the newest it saw.

    locks
        Camera's state per resource on this node: phase (idle, waiting,
        held, or lapsed: held, but the holder lease ran out), fencing
        token, request id, fast or slow path, OKs still awaited, local
        waiters, requests deferred and recently OKed.
)";

constexpr auto kChildPoll = std::chrono::milliseconds(50);
constexpr auto kGrantCheck = std::chrono::seconds(1);

// Why this node no longer holds `resource` under `token`, or nothing while
// it does (or the agent cannot say: then CMD goes on, and a dead agent has
// dropped the lock with the connection anyway).
std::optional<std::string> grant_gone(AgentConnection& connection, const std::string& resource, uint64_t token) {
  mesh::proto::AdminRequest request;
  request.mutable_locks();
  auto response = connection.call(request, kDefaultTimeoutS);
  if (!response || !response->error().empty() || !response->has_locks()) return std::nullopt;
  for (const auto& lock : response->locks().locks()) {
    if (lock.resource() != resource) continue;
    if (lock.phase() == "lapsed") {
      return fmt::format(
          "the grant on '{}' (token {}) lapsed: this node lost touch with most of the mesh for "
          "[mutex] hold_lease_ms, and the rest of the mesh may take it again",
          resource, token);
    }
    if (lock.phase() != "held" || lock.fencing_token() != token) {
      return fmt::format("'{}' is no longer held under token {} (phase {}, token {})", resource, token, lock.phase(),
                         lock.fencing_token());
    }
    return std::nullopt;
  }
  return fmt::format("'{}' is no longer held under token {}", resource, token);
}

// Waits for CMD, whatever signals arrive meanwhile, and stops it (SIGTERM)
// if the grant goes; CMD's exit status as a shell reports it.
int wait_while_held(pid_t child, AgentConnection& connection, const std::string& resource, uint64_t token) {
  int status = 0;
  bool stopped = false;
  auto next_check = std::chrono::steady_clock::now() + kGrantCheck;
  for (;;) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) return kExitFailure;
    if (!stopped && std::chrono::steady_clock::now() >= next_check) {
      if (const auto why = grant_gone(connection, resource, token)) {
        std::cerr << fmt::format("meshctl: {}; stopping the command (SIGTERM)\n", *why);
        ::kill(child, SIGTERM);
        stopped = true;
      }
      next_check = std::chrono::steady_clock::now() + kGrantCheck;
    }
    std::this_thread::sleep_for(kChildPoll);
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
  const int status = wait_while_held(child, connection, resource, grant.fencing_token());

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

constexpr Verb kVerbs[] = {
    {"lock", run_lock},
    {"locks", run_locks},
};

}  // namespace

const VerbFamily& lock_verbs() {
  static constexpr VerbFamily family{kHelp, kVerbs};
  return family;
}

}  // namespace mesh::meshctl
