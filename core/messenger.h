#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/env.h"
#include "core/metrics.h"
#include "core/rtt_estimator.h"
#include "core/transport.h"

namespace mesh::core {

// When to retransmit a request and when to give up. Every attempt reuses the
// request's msg_id, so the receiver can tell a retransmission from a new
// request.
//
// The first wait is adaptive unless a caller says otherwise: the Messenger
// measures each destination's round trips and uses its RTO (RttEstimator,
// RFC 6298) in place of first_timeout once it has a sample, so a request to
// a near peer is retransmitted after about one round trip, not after a
// fixed 250 ms. Later waits grow from the first by `backoff` as before.
// Only the retransmission times move: the deadline, and so the receiver's
// dedupe_hold bound below, do not. Callers (decided per caller):
//   Medley sync, echo, agent k-group client writes and group creation:
//     default policy (adaptive), deadlines of their own where they need one;
//   Camera: CameraOptions::retry, adaptive by default; camera_bench runs
//     the paper's fixed-T model (camera.md §4.3) with adaptive = false
//     beside the adaptive default;
//   k-group replicas: appends (within append_timeout), claims, Bully and
//     migration requests all adaptive (kgroup/replica_requests.h).
// adaptive = false is for models and tests that need a fixed schedule.
// A handler that holds its answer (a Camera OK deferred while the lock is
// held, a client write answered at commit) makes that round trip a sample
// too: the peer's SRTT and RTTVAR grow, so its RTO errs long (fewer
// retransmissions, slower recovery of a loss), never short.
struct RetryPolicy {
  // Wait before the first retransmission; with `adaptive`, only until the
  // destination's round trip has been measured.
  Duration first_timeout = std::chrono::milliseconds(250);
  bool adaptive = true;
  double backoff = 2.0;                                     // each wait is the previous one times this
  Duration max_interval = std::chrono::seconds(2);          // cap on one wait
  // Each wait drawn in [w(1-j), w(1+j)]; in [w, w(1+j)] when the first was
  // a measured RTO, which a shorter wait would undercut.
  double jitter = 0.2;
  Duration deadline = std::chrono::seconds(10);             // give up this long after the request
};

enum class RequestStatus {
  ok,        // response received
  timeout,   // no response before the deadline
  rejected,  // the receiver refused (no handler for the body type, or the handler rejected),
             // or the request is too large for one datagram (reason "too_large")
  cancelled, // never reported to a callback; cancel() drops the callback
};
std::string_view to_string(RequestStatus status);

struct RequestResult {
  RequestStatus status = RequestStatus::timeout;
  Message response;       // ok: the response; rejected: body holds the reason
  Duration elapsed{};     // from request() to the result
  // From the latest transmission to the answer (ok only). An answer cannot
  // tell which attempt it answers, so after retransmissions this may be
  // shorter than the true round trip (the ambiguity Karn's algorithm avoids).
  Duration last_rtt{};
  uint32_t attempts = 0;  // transmissions made
};

// Answers one request, once: respond() or reject(). Copies share the same
// request, so a handler may stash one and answer later; if no copy answers,
// the caller times out. Answering twice is ignored.
class Responder {
 public:
  // Where a detached Responder's answer goes: `rejected` says which call.
  using Sink = std::function<void(bool rejected, std::string body)>;
  // A Responder whose answer goes to `sink` instead of back over the
  // network, for a handler that serves several requests carried in one
  // (kgroup/heartbeat_coalescer.h). Deduplication stays with the carrier.
  static Responder detached(Message request, Sink sink);

  void respond(std::string body);
  void reject(std::string reason);
  const Message& request() const;

 private:
  friend class Messenger;
  struct Pending;
  explicit Responder(std::shared_ptr<Pending> pending) : pending_(std::move(pending)) {}
  std::shared_ptr<Pending> pending_;
};

// A node's single entry point for agent messages above the transport:
// fire-and-forget datagrams dispatched by body type, and reliable
// request/response with retransmission (exponential backoff with jitter,
// from a first wait adapted to each destination's measured round trip),
// receiver-side deduplication so a handler runs once per request (a
// duplicate of an answered request gets the cached answer again; one of a
// pending request is dropped), and a result for every caller: ok, timeout or
// rejected. Sans-IO: time, timers and randomness from Env.
class Messenger {
 public:
  using DatagramHandler = std::function<void(const Message& message)>;
  using RequestHandler = std::function<void(const Message& request, Responder responder)>;
  using ResultCallback = std::function<void(const RequestResult& result)>;

  struct Options {
    RetryPolicy retry;
    // Per-destination RTOs for adaptive first waits.
    RttEstimator::Options rtt;
    // How long an answered request is remembered for deduplication; must
    // exceed every sender's deadline, or a late retransmission runs the
    // handler twice.
    Duration dedupe_hold = std::chrono::seconds(60);
    size_t dedupe_capacity = 65536;  // oldest forgotten first beyond this
  };

  Messenger(Env& env, Transport& transport, Metrics& metrics, Options options);
  Messenger(const Messenger&) = delete;
  Messenger& operator=(const Messenger&) = delete;
  ~Messenger();

  NodeId self() const { return transport_.self(); }

  SendStatus send(NodeId dst, uint32_t body_type, std::string body);
  // A datagram to every other node (Transport::flood); each receiver's
  // on_datagram handler for body_type sees it once, with dst == kEveryNode.
  SendStatus flood(uint32_t body_type, std::string body);
  void on_datagram(uint32_t body_type, DatagramHandler handler);

  // Returns the request's msg_id, usable with cancel(). The callback runs
  // exactly once unless cancelled; the callback may call request() and
  // cancel(). A no_route from the transport is retried on the normal
  // schedule, since routes appear later.
  uint64_t request(NodeId dst, uint32_t body_type, std::string body, ResultCallback callback,
                   std::optional<RetryPolicy> retry = std::nullopt);
  // The callback will not be called.
  void cancel(uint64_t msg_id);
  void serve(uint32_t body_type, RequestHandler handler);

  size_t pending_requests() const { return outgoing_.size(); }
  const RttEstimator& rtt_estimator() const { return rtt_; }

 private:
  friend class Responder;
  struct Outgoing;
  struct Answered;
  void receive(const Message& message);
  void on_datagram_message(const Message& message);
  void on_request(const Message& message);
  void on_answer(const Message& message);
  // One transmission of a pending request; may finish it (too large).
  void transmit(uint64_t msg_id);
  void finish(uint64_t msg_id, RequestResult result);
  // Sends a Responder's answer and caches it for duplicates.
  void answer(const Message& request, const std::shared_ptr<Answered>& entry, MessageKind kind, std::string body);
  void remember(const Message& request, const std::shared_ptr<Answered>& entry);
  void forget_expired();
  void arm_sweep();
  // wait * [1 - jitter, 1 + jitter], or [1, 1 + jitter] if lengthen_only.
  Duration jittered(Duration wait, double jitter, bool lengthen_only);
  // The un-jittered wait before a request's first retransmission.
  void choose_first_wait(Outgoing& out);

  Env& env_;
  Transport& transport_;
  Options options_;
  uint64_t next_msg_id_;
  std::unordered_map<uint32_t, DatagramHandler> datagram_handlers_;
  std::unordered_map<uint32_t, RequestHandler> request_handlers_;
  std::unordered_map<uint64_t, std::unique_ptr<Outgoing>> outgoing_;
  // Receiver side: (src, msg_id) of requests seen, with the answer once given.
  struct SeenKey {
    NodeId src;
    uint64_t msg_id;
    bool operator<(const SeenKey& o) const { return src != o.src ? src < o.src : msg_id < o.msg_id; }
  };
  std::map<SeenKey, std::shared_ptr<Answered>> seen_;
  // Forget time -> key. Time only moves forward, so this is also first-seen
  // order, which is the eviction order when the table is full.
  std::multimap<TimePoint, SeenKey> seen_expiry_;
  ScopedTimer sweep_timer_;
  RttEstimator rtt_;
  // Shared with every Responder: false once the Messenger is gone.
  std::shared_ptr<bool> alive_;

  Counter& requests_total_;
  Counter& retransmits_total_;
  Counter& timeouts_total_;
  Counter& rejections_total_;
  Counter& duplicates_total_;
  Counter& dropped_no_handler_;
  Counter& dropped_unknown_answer_;
  Counter& dropped_bad_kind_;
  Histogram& rtt_ms_;
  // First waits chosen, by where they came from: a measured RTO, the
  // policy's first_timeout for lack of a sample, or a fixed policy.
  Histogram& first_wait_rto_ms_;
  Histogram& first_wait_initial_ms_;
  Histogram& first_wait_fixed_ms_;
};

}  // namespace mesh::core
