#include "core/messenger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/timer_queue.h"
#include "tests/support/manual_env.h"

namespace mesh::core {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using test_support::ManualEnv;

class NetTransport;

// An in-memory network: per-message delay drawn in [min_delay, max_delay]
// (so messages reorder when the range is wide), seeded random loss and
// duplication, plus deterministic drop and route predicates.
class Network {
 public:
  Network(Env& env, uint64_t seed) : env_(env), rng_(seed) {}

  Duration min_delay = milliseconds(10);
  Duration max_delay = milliseconds(10);
  double loss = 0.0;
  double duplicate = 0.0;
  size_t max_body = 1000;
  std::function<bool(const Message&)> drop_if;   // true: this message is lost
  std::function<bool(const Message&)> route_if;  // false: no_route
  std::vector<Message> sent;                     // everything handed to the network

  SendStatus send(const Message& message);
  // Every attached node but the sender, as mesh-wide flooding would.
  SendStatus flood(const Message& message);
  void attach(NodeId id, NetTransport* t) { nodes_[id] = t; }
  void detach(NodeId id) { nodes_.erase(id); }
  size_t count_sent(NodeId src, MessageKind kind) const {
    return static_cast<size_t>(std::count_if(sent.begin(), sent.end(), [&](const Message& m) {
      return m.src == src && m.kind == kind;
    }));
  }

 private:
  Env& env_;
  Rng rng_;
  std::map<NodeId, NetTransport*> nodes_;
};

class NetTransport final : public Transport {
 public:
  NetTransport(Network& net, NodeId self) : net_(net), self_(self) { net_.attach(self_, this); }
  ~NetTransport() override { net_.detach(self_); }
  NodeId self() const override { return self_; }
  SendStatus send(Message message) override {
    message.src = self_;
    return net_.send(message);
  }
  SendStatus flood(Message message) override {
    message.src = self_;
    message.dst = kEveryNode;
    return net_.flood(message);
  }
  void set_receiver(Receiver receiver) override { receiver_ = std::move(receiver); }
  void deliver(const Message& message) {
    if (receiver_) receiver_(message);
  }

 private:
  Network& net_;
  NodeId self_;
  Receiver receiver_;
};

SendStatus Network::send(const Message& message) {
  if (route_if && !route_if(message)) return SendStatus::no_route;
  if (message.body.size() > max_body) return SendStatus::too_large;
  sent.push_back(message);
  if (drop_if && drop_if(message)) return SendStatus::sent;
  if (rng_.chance(loss)) return SendStatus::sent;
  const int copies = rng_.chance(duplicate) ? 2 : 1;
  for (int i = 0; i < copies; ++i) {
    const Duration delay(rng_.between(min_delay.count(), max_delay.count()));
    env_.start_timer(delay, [this, message] {
      auto it = nodes_.find(message.dst);
      if (it != nodes_.end()) it->second->deliver(message);
    });
  }
  return SendStatus::sent;
}

SendStatus Network::flood(const Message& message) {
  sent.push_back(message);
  for (const auto& [id, transport] : nodes_) {
    if (id == message.src) continue;
    env_.start_timer(min_delay, [this, id, message] {
      auto it = nodes_.find(id);
      if (it != nodes_.end()) it->second->deliver(message);
    });
  }
  return SendStatus::sent;
}

const NodeId kA = NodeId::from_octets(10, 0, 0, 1);
const NodeId kB = NodeId::from_octets(10, 0, 0, 2);
const NodeId kRaw = NodeId::from_octets(10, 0, 0, 3);

constexpr uint32_t kEcho = 1;
constexpr uint32_t kDeferred = 2;
constexpr uint32_t kRefuse = 3;
constexpr uint32_t kUnserved = 4;

using RunKey = std::pair<NodeId, uint64_t>;

// Two nodes: A asks, B serves (and the other way round in the sweep).
struct Pair {
  explicit Pair(uint64_t seed = 1, Messenger::Options options = {})
      : env(seed), net(env, seed ^ 0x5eedULL), ta(net, kA), tb(net, kB) {
    a = std::make_unique<Messenger>(env, ta, metrics_a, options);
    b = std::make_unique<Messenger>(env, tb, metrics_b, options);
  }
  // Echo handler on `m` that counts its runs per (src, msg_id).
  void serve_echo(Messenger& m) {
    m.serve(kEcho, [this](const Message& request, Responder responder) {
      ++runs[{request.src, request.msg_id}];
      responder.respond("echo:" + request.body);
    });
  }

  ManualEnv env;
  Metrics metrics_a;
  Metrics metrics_b;
  Network net;
  NetTransport ta;
  NetTransport tb;
  std::unique_ptr<Messenger> a;
  std::unique_ptr<Messenger> b;
  std::map<RunKey, int> runs;
};

// Attempts a silent peer sees when every wait is the base wait times
// `factor`; the real schedule lies between factor 1+j (fewest) and 1-j (most).
uint32_t attempts_if_every_wait_scaled(const RetryPolicy& p, double factor) {
  Duration base = p.first_timeout;
  Duration t{0};
  uint32_t attempts = 1;
  for (;;) {
    t += Duration(std::llround(static_cast<double>(base.count()) * factor));
    if (t >= p.deadline) return attempts;
    ++attempts;
    base = Duration(std::llround(std::min(static_cast<double>(base.count()) * p.backoff,
                                          static_cast<double>(p.max_interval.count()))));
  }
}

TEST(Messenger, OkPathReportsRttAndElapsed) {
  Pair p;
  p.serve_echo(*p.b);
  std::vector<RequestResult> results;
  p.a->request(kB, kEcho, "hi", [&](const RequestResult& r) { results.push_back(r); });
  EXPECT_EQ(p.a->pending_requests(), 1u);
  p.env.advance(seconds(1));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, RequestStatus::ok);
  EXPECT_EQ(results[0].response.body, "echo:hi");
  EXPECT_EQ(results[0].response.kind, MessageKind::response);
  EXPECT_EQ(results[0].response.body_type, kEcho);
  EXPECT_EQ(results[0].attempts, 1u);
  EXPECT_EQ(results[0].last_rtt, milliseconds(20));
  EXPECT_EQ(results[0].elapsed, milliseconds(20));
  EXPECT_EQ(p.a->pending_requests(), 0u);
  EXPECT_EQ(p.metrics_a.total("requests_total"), 1u);
  EXPECT_EQ(p.metrics_a.total("request_retransmits_total"), 0u);
  EXPECT_EQ(p.metrics_a.histogram("request_rtt_ms").count(), 1u);
  EXPECT_DOUBLE_EQ(p.metrics_a.histogram("request_rtt_ms").max(), 20.0);
}

TEST(Messenger, FloodReachesEveryOtherNodeOnceAsDatagram) {
  Pair p;
  Metrics metrics_raw;
  NetTransport third(p.net, kRaw);
  Messenger c(p.env, third, metrics_raw, {});
  std::map<NodeId, std::vector<Message>> heard;
  for (auto* m : {p.a.get(), p.b.get(), &c}) {
    m->on_datagram(kEcho, [&heard, m](const Message& message) { heard[m->self()].push_back(message); });
  }
  EXPECT_EQ(p.a->flood(kEcho, "hello"), SendStatus::sent);
  p.env.advance(milliseconds(50));
  EXPECT_FALSE(heard.contains(kA));
  for (NodeId id : {kB, kRaw}) {
    ASSERT_EQ(heard[id].size(), 1u) << id.to_string();
    EXPECT_EQ(heard[id][0].dst, kEveryNode);
    EXPECT_EQ(heard[id][0].src, kA);
    EXPECT_EQ(heard[id][0].kind, MessageKind::datagram);
    EXPECT_EQ(heard[id][0].body, "hello");
  }
}

TEST(Messenger, MsgIdsStartRandomAndIncrement) {
  Pair p1(1);
  Pair p2(2);
  const uint64_t first1 = p1.a->request(kB, kEcho, "", [](const RequestResult&) {});
  const uint64_t second1 = p1.a->request(kB, kEcho, "", [](const RequestResult&) {});
  const uint64_t first2 = p2.a->request(kB, kEcho, "", [](const RequestResult&) {});
  EXPECT_NE(first1, 0u);
  EXPECT_EQ(second1, first1 + 1);
  EXPECT_NE(first1, first2);
  // A restarted node (new Messenger, same env) starts elsewhere.
  p1.a.reset();
  p1.a = std::make_unique<Messenger>(p1.env, p1.ta, p1.metrics_a, Messenger::Options{});
  const uint64_t restarted = p1.a->request(kB, kEcho, "", [](const RequestResult&) {});
  EXPECT_NE(restarted, second1 + 1);
}

TEST(Messenger, RetransmissionAfterLostRequestDeliversOnce) {
  Pair p;
  p.serve_echo(*p.b);
  int requests_dropped = 0;
  p.net.drop_if = [&](const Message& m) { return m.kind == MessageKind::request && requests_dropped++ == 0; };
  std::vector<RequestResult> results;
  const uint64_t id = p.a->request(kB, kEcho, "x", [&](const RequestResult& r) { results.push_back(r); });
  p.env.advance(seconds(5));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, RequestStatus::ok);
  EXPECT_EQ(results[0].attempts, 2u);
  EXPECT_EQ(results[0].last_rtt, milliseconds(20));
  // First wait is 250 ms +- 20 %.
  EXPECT_GE(results[0].elapsed, milliseconds(200 + 20));
  EXPECT_LE(results[0].elapsed, milliseconds(300 + 20));
  EXPECT_EQ((p.runs[{kA, id}]), 1);
  EXPECT_EQ(p.metrics_a.total("request_retransmits_total"), 1u);
  // Both transmissions carry the same msg_id.
  for (const Message& m : p.net.sent) EXPECT_EQ(m.msg_id, id);
}

// Answers `n` requests from A to B on the 20 ms round trip of Pair's network.
void measure_round_trips(Pair& p, int n) {
  for (int i = 0; i < n; ++i) {
    p.a->request(kB, kEcho, "warm", [](const RequestResult& r) { EXPECT_EQ(r.status, RequestStatus::ok); });
    p.env.advance(milliseconds(100));
  }
}

TEST(Messenger, MeasuredPeerIsRetransmittedAtItsRtoNotTheInitialTimeout) {
  Pair p;
  p.serve_echo(*p.b);
  measure_round_trips(p, 8);
  const auto state = p.a->rtt_estimator().state(kB);
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->srtt, milliseconds(20));
  // RTTVAR = 10 ms * (3/4)^7: RTO = 20 + 4 RTTVAR, about 25 ms.
  EXPECT_GT(state->rto, milliseconds(20));
  EXPECT_LT(state->rto, milliseconds(30));

  bool dropped = false;
  p.net.drop_if = [&](const Message& m) { return m.kind == MessageKind::request && !std::exchange(dropped, true); };
  std::vector<RequestResult> results;
  p.a->request(kB, kEcho, "x", [&](const RequestResult& r) { results.push_back(r); });
  p.env.advance(seconds(1));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, RequestStatus::ok);
  EXPECT_EQ(results[0].attempts, 2u);
  // Retransmitted after RTO + [0, 20 %] jitter (never before the RTO),
  // answered a round trip later.
  const double rto_ms = to_millis(state->rto);
  EXPECT_GE(to_millis(results[0].elapsed), rto_ms + 20.0 - 0.001);
  EXPECT_LE(to_millis(results[0].elapsed), 1.2 * rto_ms + 20.0 + 0.001);
  EXPECT_EQ(p.metrics_a.histogram("request_first_wait_ms", {{"source", "initial"}}).count(), 1u);
  EXPECT_EQ(p.metrics_a.histogram("request_first_wait_ms", {{"source", "rto"}}).count(), 8u);
}

TEST(Messenger, FixedPolicyIgnoresTheMeasuredRto) {
  Pair p;
  p.serve_echo(*p.b);
  measure_round_trips(p, 8);
  bool dropped = false;
  p.net.drop_if = [&](const Message& m) { return m.kind == MessageKind::request && !std::exchange(dropped, true); };
  RetryPolicy fixed;
  fixed.adaptive = false;
  std::vector<RequestResult> results;
  p.a->request(kB, kEcho, "x", [&](const RequestResult& r) { results.push_back(r); }, fixed);
  p.env.advance(seconds(1));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].attempts, 2u);
  EXPECT_GE(results[0].elapsed, milliseconds(200 + 20));
  EXPECT_LE(results[0].elapsed, milliseconds(300 + 20));
  EXPECT_EQ(p.metrics_a.histogram("request_first_wait_ms", {{"source", "fixed"}}).count(), 1u);
}

TEST(Messenger, AnswerAfterRetransmissionIsNoRttSampleAndBacksOff) {
  Pair p;
  p.serve_echo(*p.b);
  measure_round_trips(p, 1);
  const auto before = p.a->rtt_estimator().state(kB);
  ASSERT_TRUE(before.has_value());
  EXPECT_EQ(before->rto, milliseconds(60));  // 20 + 4 * 10
  // The answer to the first transmission is lost: the one that arrives
  // answers the retransmission, yet could be mistaken for the first's.
  bool dropped = false;
  p.net.drop_if = [&](const Message& m) { return m.kind == MessageKind::response && !std::exchange(dropped, true); };
  std::vector<RequestResult> results;
  p.a->request(kB, kEcho, "x", [&](const RequestResult& r) { results.push_back(r); });
  p.env.advance(seconds(1));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].attempts, 2u);
  const auto after = p.a->rtt_estimator().state(kB);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->srtt, before->srtt);
  EXPECT_EQ(after->rttvar, before->rttvar);
  // The expired wait (60 ms + [0, 20 %]) is doubled for the next request.
  EXPECT_GE(after->rto, milliseconds(120));
  EXPECT_LE(after->rto, milliseconds(144));
  // A request answered at its first transmission ends the backoff.
  measure_round_trips(p, 1);
  EXPECT_EQ(p.a->rtt_estimator().state(kB)->backoff, Duration::zero());
  EXPECT_LT(p.a->rtt_estimator().state(kB)->rto, milliseconds(60));
}

TEST(Messenger, DuplicateAfterAnswerGetsCachedAnswer) {
  Pair p;
  p.serve_echo(*p.b);
  int responses_dropped = 0;
  p.net.drop_if = [&](const Message& m) { return m.kind == MessageKind::response && responses_dropped++ == 0; };
  std::vector<RequestResult> results;
  const uint64_t id = p.a->request(kB, kEcho, "y", [&](const RequestResult& r) { results.push_back(r); });
  p.env.advance(seconds(5));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, RequestStatus::ok);
  EXPECT_EQ(results[0].response.body, "echo:y");
  EXPECT_EQ(results[0].attempts, 2u);
  EXPECT_EQ((p.runs[{kA, id}]), 1);
  EXPECT_EQ(p.metrics_b.total("request_duplicates_total"), 1u);
  EXPECT_EQ(p.net.count_sent(kB, MessageKind::response), 2u);
}

TEST(Messenger, HandlerRunsOncePerRequestUnderHeavyLossAndDuplicates) {
  Pair p(7);
  p.net.loss = 0.5;
  p.net.duplicate = 0.5;
  p.net.min_delay = milliseconds(1);
  p.net.max_delay = milliseconds(300);
  p.serve_echo(*p.b);
  std::map<int, std::vector<RequestResult>> results;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 50; ++i) {
    RetryPolicy retry;
    retry.deadline = seconds(30);
    const uint64_t id = p.a->request(
        kB, kEcho, std::to_string(i), [&results, i](const RequestResult& r) { results[i].push_back(r); },
        retry);
    ids.push_back(id);
  }
  p.env.advance(seconds(60));
  size_t ok = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_LE((p.runs[{kA, ids[i]}]), 1);
    auto it = results.find(static_cast<int>(i));
    if (it == results.end()) continue;
    ASSERT_EQ(it->second.size(), 1u);
    if (it->second[0].status == RequestStatus::ok) {
      ++ok;
      EXPECT_EQ(it->second[0].response.body, "echo:" + std::to_string(i));
      EXPECT_EQ((p.runs[{kA, ids[i]}]), 1);
    }
  }
  EXPECT_GT(ok, 40u);  // 0.75^n of loss per round trip over ~9 attempts: nearly all arrive
  EXPECT_GT(p.metrics_b.total("request_duplicates_total"), 0u);
}

TEST(Messenger, NoHandlerIsRejected) {
  Pair p;
  std::vector<RequestResult> results;
  p.a->request(kB, kUnserved, "q", [&](const RequestResult& r) { results.push_back(r); });
  p.env.advance(seconds(1));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, RequestStatus::rejected);
  EXPECT_EQ(results[0].response.body, "no handler for body type 4");
  EXPECT_EQ(results[0].response.kind, MessageKind::rejection);
  EXPECT_EQ(p.metrics_a.total("request_rejections_total"), 1u);
}

TEST(Messenger, HandlerRejects) {
  Pair p;
  int runs = 0;
  p.b->serve(kRefuse, [&](const Message&, Responder responder) {
    ++runs;
    responder.reject("busy");
    responder.respond("ignored: answering twice does nothing");
  });
  std::vector<RequestResult> results;
  p.a->request(kB, kRefuse, "", [&](const RequestResult& r) { results.push_back(r); });
  p.env.advance(seconds(1));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, RequestStatus::rejected);
  EXPECT_EQ(results[0].response.body, "busy");
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(p.net.count_sent(kB, MessageKind::rejection), 1u);
  EXPECT_EQ(p.net.count_sent(kB, MessageKind::response), 0u);
}

TEST(Messenger, SilentPeerTimesOutAfterBackoffSchedule) {
  RetryPolicy policy;
  policy.first_timeout = milliseconds(100);
  policy.backoff = 2.0;
  policy.max_interval = milliseconds(400);
  policy.jitter = 0.2;
  policy.deadline = seconds(2);
  const uint32_t fewest = attempts_if_every_wait_scaled(policy, 1.0 + policy.jitter);
  const uint32_t most = attempts_if_every_wait_scaled(policy, 1.0 - policy.jitter);
  ASSERT_LT(fewest, most);  // the bounds are not vacuous
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    Pair p(seed);
    p.net.drop_if = [](const Message&) { return true; };
    std::vector<RequestResult> results;
    p.a->request(kB, kEcho, "", [&](const RequestResult& r) { results.push_back(r); }, policy);
    p.env.advance(milliseconds(1999));
    EXPECT_TRUE(results.empty());
    p.env.advance(seconds(10));
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].status, RequestStatus::timeout);
    EXPECT_EQ(results[0].elapsed, seconds(2));
    EXPECT_GE(results[0].attempts, fewest);
    EXPECT_LE(results[0].attempts, most);
    EXPECT_EQ(p.net.sent.size(), results[0].attempts);
    EXPECT_EQ(p.metrics_a.total("request_timeouts_total"), 1u);
    EXPECT_EQ(p.metrics_a.total("request_retransmits_total"), results[0].attempts - 1);
  }
}

TEST(Messenger, WaitsFollowBackoffWithinJitter) {
  RetryPolicy policy;
  policy.first_timeout = milliseconds(100);
  policy.backoff = 3.0;
  policy.max_interval = milliseconds(1000);
  policy.jitter = 0.1;
  policy.deadline = seconds(20);
  Pair p(3);
  std::vector<TimePoint> sent_at;
  p.net.drop_if = [&](const Message&) {
    sent_at.push_back(p.env.now());
    return true;
  };
  p.a->request(kB, kEcho, "", [](const RequestResult&) {}, policy);
  p.env.advance(seconds(30));
  ASSERT_GE(sent_at.size(), 5u);
  Duration base = policy.first_timeout;
  for (size_t i = 1; i < sent_at.size(); ++i) {
    SCOPED_TRACE("wait " + std::to_string(i));
    const Duration wait = sent_at[i] - sent_at[i - 1];
    EXPECT_GE(wait.count(), std::llround(static_cast<double>(base.count()) * 0.9) - 1);
    EXPECT_LE(wait.count(), std::llround(static_cast<double>(base.count()) * 1.1) + 1);
    base = std::min(base * 3, policy.max_interval);
  }
}

TEST(Messenger, NoRouteKeepsRetryingUntilRouteAppears) {
  Pair p;
  p.serve_echo(*p.b);
  p.net.route_if = [&](const Message&) { return p.env.now() >= TimePoint(milliseconds(500)); };
  std::vector<RequestResult> results;
  p.a->request(kB, kEcho, "r", [&](const RequestResult& r) { results.push_back(r); });
  p.env.advance(seconds(10));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, RequestStatus::ok);
  EXPECT_GE(results[0].attempts, 3u);  // 0 and ~250 ms had no route
}

TEST(Messenger, TooLargeIsRejectedOutsideTheRequestCall) {
  Pair p;
  p.serve_echo(*p.b);
  std::vector<RequestResult> results;
  p.a->request(kB, kEcho, std::string(5000, 'z'), [&](const RequestResult& r) { results.push_back(r); });
  EXPECT_TRUE(results.empty());
  p.env.advance(milliseconds(1));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, RequestStatus::rejected);
  EXPECT_EQ(results[0].response.body, "too_large");
  EXPECT_EQ(p.a->pending_requests(), 0u);
}

TEST(Messenger, CancelSuppressesCallbackAndLateAnswerIsDropped) {
  Pair p;
  p.serve_echo(*p.b);
  int calls = 0;
  const uint64_t id = p.a->request(kB, kEcho, "", [&](const RequestResult&) { ++calls; });
  p.a->cancel(id);
  p.a->cancel(id);  // harmless
  EXPECT_EQ(p.a->pending_requests(), 0u);
  p.env.advance(seconds(20));
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(p.metrics_a.counter("messenger_dropped_total", {{"reason", "unknown_answer"}}).value(), 1u);
  EXPECT_EQ(p.net.count_sent(kA, MessageKind::request), 1u);  // no retransmission after cancel
}

TEST(Messenger, LateResponseAfterTimeoutIsIgnored) {
  Pair p;
  std::vector<Responder> stash;
  p.b->serve(kDeferred, [&](const Message&, Responder responder) { stash.push_back(responder); });
  RetryPolicy policy;
  policy.deadline = seconds(1);
  std::vector<RequestResult> results;
  p.a->request(kB, kDeferred, "", [&](const RequestResult& r) { results.push_back(r); }, policy);
  p.env.advance(milliseconds(1500));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, RequestStatus::timeout);
  ASSERT_EQ(stash.size(), 1u);  // retransmissions of a pending request do not rerun the handler
  EXPECT_GT(p.metrics_b.total("request_duplicates_total"), 0u);
  stash[0].respond("too late");
  p.env.advance(seconds(1));
  EXPECT_EQ(results.size(), 1u);
  EXPECT_EQ(p.metrics_a.counter("messenger_dropped_total", {{"reason", "unknown_answer"}}).value(), 1u);
}

TEST(Messenger, DeferredResponderAnswersLater) {
  Pair p;
  std::optional<Responder> held;
  int runs = 0;
  p.b->serve(kDeferred, [&](const Message& request, Responder responder) {
    ++runs;
    EXPECT_EQ(responder.request().body, request.body);
    held = responder;
  });
  std::vector<RequestResult> results;
  p.a->request(kB, kDeferred, "later", [&](const RequestResult& r) { results.push_back(r); });
  p.env.advance(milliseconds(900));  // a few retransmissions meanwhile
  EXPECT_TRUE(results.empty());
  ASSERT_TRUE(held.has_value());
  Responder copy = *held;
  copy.respond("done:" + held->request().body);
  held->respond("second answer is ignored");
  p.env.advance(seconds(1));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, RequestStatus::ok);
  EXPECT_EQ(results[0].response.body, "done:later");
  EXPECT_GT(results[0].attempts, 1u);
  EXPECT_EQ(results[0].elapsed, milliseconds(910));  // answered at 900 ms, 10 ms on the way back
  // Measured from the latest retransmission, which came after the first one.
  EXPECT_LT(results[0].last_rtt, results[0].elapsed - milliseconds(10));
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(p.net.count_sent(kB, MessageKind::response), 1u);
}

TEST(Messenger, DestructionWithPendingRequestsAndHeldResponders) {
  Pair p;
  std::vector<Responder> stash;
  p.b->serve(kDeferred, [&](const Message&, Responder responder) { stash.push_back(responder); });
  int calls = 0;
  p.a->request(kB, kDeferred, "", [&](const RequestResult&) { ++calls; });
  p.env.advance(milliseconds(100));
  ASSERT_EQ(stash.size(), 1u);
  p.b.reset();
  const size_t sent_before = p.net.sent.size();
  stash[0].respond("after the messenger is gone");
  stash[0].reject("still nothing");
  EXPECT_EQ(p.net.sent.size(), sent_before);
  p.a.reset();  // request still pending: no callback
  p.env.advance(seconds(20));
  EXPECT_EQ(calls, 0);
}

TEST(Messenger, CallbacksMayIssueAndCancelRequests) {
  Pair p;
  p.serve_echo(*p.b);
  std::vector<std::string> order;
  uint64_t victim = 0;
  p.a->request(kB, kEcho, "first", [&](const RequestResult& r) {
    order.push_back(r.response.body);
    p.a->cancel(victim);
    p.a->request(kB, kEcho, "chained", [&](const RequestResult& r2) { order.push_back(r2.response.body); });
  });
  p.env.advance(milliseconds(1));
  victim = p.a->request(kB, kEcho, "victim", [&](const RequestResult& r) { order.push_back(r.response.body); });
  p.env.advance(seconds(5));
  EXPECT_EQ(order, (std::vector<std::string>{"echo:first", "echo:chained"}));
  EXPECT_EQ(p.a->pending_requests(), 0u);
}

TEST(Messenger, DatagramsDispatchByBodyType) {
  Pair p;
  std::vector<std::string> got;
  p.b->on_datagram(9, [&](const Message& m) {
    EXPECT_EQ(m.src, kA);
    EXPECT_EQ(m.kind, MessageKind::datagram);
    got.push_back(m.body);
  });
  EXPECT_EQ(p.a->send(kB, 9, "d1"), SendStatus::sent);
  EXPECT_EQ(p.a->send(kB, 10, "unknown"), SendStatus::sent);
  p.env.advance(seconds(1));
  EXPECT_EQ(got, std::vector<std::string>{"d1"});
  EXPECT_EQ(p.metrics_b.counter("messenger_dropped_total", {{"reason", "no_handler"}}).value(), 1u);
}

// Requests injected by hand from a raw endpoint, to drive the dedupe table.
struct RawPeer {
  explicit RawPeer(Pair& p) : pair(p), t(p.net, kRaw) {
    t.set_receiver([this](const Message& m) { received.push_back(m); });
  }
  void request(uint64_t msg_id) {
    Message m;
    m.dst = kB;
    m.kind = MessageKind::request;
    m.msg_id = msg_id;
    m.body_type = kEcho;
    m.body = std::to_string(msg_id);
    t.send(m);
    pair.env.advance(milliseconds(50));
  }
  Pair& pair;
  NetTransport t;
  std::vector<Message> received;
};

TEST(Messenger, DedupeEntriesExpireAfterHold) {
  Messenger::Options options;
  options.dedupe_hold = seconds(1);
  Pair p(1, options);
  p.serve_echo(*p.b);
  RawPeer raw(p);
  raw.request(42);
  raw.request(42);  // cached
  EXPECT_EQ((p.runs[{kRaw, 42}]), 1);
  ASSERT_EQ(raw.received.size(), 2u);
  EXPECT_EQ(raw.received[1].body, "echo:42");
  p.env.advance(seconds(2));
  raw.request(42);  // forgotten: a new request
  EXPECT_EQ((p.runs[{kRaw, 42}]), 2);
  p.env.advance(seconds(2));
  p.env.advance(seconds(100));  // sweeping stops once the table is empty; nothing is left to run
}

TEST(Messenger, DedupeTableIsCappedOldestFirst) {
  Messenger::Options options;
  options.dedupe_capacity = 2;
  Pair p(1, options);
  p.serve_echo(*p.b);
  RawPeer raw(p);
  raw.request(1);
  raw.request(2);
  raw.request(3);  // evicts 1
  raw.request(3);  // cached
  raw.request(1);  // forgotten: runs again, evicts 2
  raw.request(3);  // still cached
  EXPECT_EQ((p.runs[{kRaw, 1}]), 2);
  EXPECT_EQ((p.runs[{kRaw, 2}]), 1);
  EXPECT_EQ((p.runs[{kRaw, 3}]), 1);
  EXPECT_EQ(p.metrics_b.total("request_duplicates_total"), 2u);
}

// Both nodes ask and serve at once over a lossy, reordering, duplicating
// network: every request gets exactly one result, a handler runs at most once
// per request, and exactly once behind every ok.
TEST(Messenger, SeedSweepExactlyOneResultAndAtMostOnceHandling) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    Pair p(seed);
    p.net.loss = 0.3;
    p.net.duplicate = 0.1;
    p.net.min_delay = milliseconds(1);
    p.net.max_delay = milliseconds(120);
    Rng rng(seed * 7919);

    for (Messenger* m : {p.a.get(), p.b.get()}) {
      p.serve_echo(*m);
      m->serve(kDeferred, [&p, &rng](const Message& request, Responder responder) {
        ++p.runs[{request.src, request.msg_id}];
        const Duration delay(rng.between(0, 3'000'000));
        p.env.start_timer(delay, [responder, body = request.body]() mutable { responder.respond("late:" + body); });
      });
      m->serve(kRefuse, [&p](const Message& request, Responder responder) {
        ++p.runs[{request.src, request.msg_id}];
        responder.reject("no");
      });
    }

    struct Issued {
      NodeId from;
      uint64_t msg_id;
      uint32_t body_type;
      std::string body;
      std::vector<RequestResult> results;
    };
    std::vector<std::unique_ptr<Issued>> issued;
    for (int i = 0; i < 30; ++i) {
      const bool from_a = rng.chance(0.5);
      const auto body_type = static_cast<uint32_t>(rng.between(kEcho, kUnserved));
      const Duration at(rng.between(0, 5'000'000));
      p.env.start_timer(at, [&p, &issued, from_a, body_type, i] {
        auto item = std::make_unique<Issued>();
        Issued* raw = item.get();
        raw->from = from_a ? kA : kB;
        raw->body_type = body_type;
        raw->body = std::to_string(i);
        Messenger& m = from_a ? *p.a : *p.b;
        raw->msg_id = m.request(from_a ? kB : kA, body_type, raw->body,
                                [raw](const RequestResult& r) { raw->results.push_back(r); });
        issued.push_back(std::move(item));
      });
    }
    p.env.advance(seconds(120));

    ASSERT_EQ(issued.size(), 30u);
    EXPECT_EQ(p.a->pending_requests(), 0u);
    EXPECT_EQ(p.b->pending_requests(), 0u);
    for (const auto& it : issued) {
      SCOPED_TRACE("msg_id=" + std::to_string(it->msg_id) + " body_type=" + std::to_string(it->body_type));
      ASSERT_EQ(it->results.size(), 1u);
      const RequestResult& r = it->results[0];
      const int runs = p.runs[{it->from, it->msg_id}];
      EXPECT_LE(runs, 1);
      EXPECT_GE(r.attempts, 1u);
      switch (r.status) {
        case RequestStatus::ok:
          EXPECT_EQ(runs, 1);
          ASSERT_TRUE(it->body_type == kEcho || it->body_type == kDeferred);
          EXPECT_EQ(r.response.body, (it->body_type == kEcho ? "echo:" : "late:") + it->body);
          EXPECT_EQ(r.response.msg_id, it->msg_id);
          EXPECT_LE(r.last_rtt, r.elapsed);
          break;
        case RequestStatus::rejected:
          EXPECT_TRUE(it->body_type == kRefuse || it->body_type == kUnserved);
          EXPECT_EQ(runs, it->body_type == kRefuse ? 1 : 0);
          break;
        case RequestStatus::timeout:
          EXPECT_EQ(r.elapsed, RetryPolicy{}.deadline);
          break;
        case RequestStatus::cancelled:
          ADD_FAILURE() << "cancelled is never reported";
          break;
      }
    }
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace mesh::core
