#include "core/messenger.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/log.h"

namespace mesh::core {

std::string_view to_string(RequestStatus status) {
  switch (status) {
    case RequestStatus::ok:
      return "ok";
    case RequestStatus::timeout:
      return "timeout";
    case RequestStatus::rejected:
      return "rejected";
    case RequestStatus::cancelled:
      return "cancelled";
  }
  return "unknown";
}

// Receiver side: one request seen, and its answer once given.
struct Messenger::Answered {
  bool answered = false;
  Message answer;
};

// Shared by every copy of one Responder. `alive` is the Messenger's flag, so
// a Responder kept past the Messenger's life answers into nothing.
struct Responder::Pending {
  std::shared_ptr<bool> alive;
  Messenger* messenger = nullptr;
  Message request;
  std::shared_ptr<Messenger::Answered> entry;
  Sink sink;  // set for a detached Responder, which has no messenger
  bool done = false;
};

Responder Responder::detached(Message request, Sink sink) {
  auto pending = std::make_shared<Pending>();
  pending->alive = std::make_shared<bool>(true);
  pending->request = std::move(request);
  pending->sink = std::move(sink);
  return Responder(std::move(pending));
}

void Responder::respond(std::string body) {
  if (pending_->done) return;
  pending_->done = true;
  if (!*pending_->alive) return;
  if (pending_->sink) {
    pending_->sink(false, std::move(body));
    return;
  }
  pending_->messenger->answer(pending_->request, pending_->entry, MessageKind::response, std::move(body));
}

void Responder::reject(std::string reason) {
  if (pending_->done) return;
  pending_->done = true;
  if (!*pending_->alive) return;
  if (pending_->sink) {
    pending_->sink(true, std::move(reason));
    return;
  }
  pending_->messenger->answer(pending_->request, pending_->entry, MessageKind::rejection, std::move(reason));
}

const Message& Responder::request() const { return pending_->request; }

// Sender side: one request awaiting its answer.
struct Messenger::Outgoing {
  Outgoing(Env& env, Message m, ResultCallback cb, RetryPolicy p)
      : message(std::move(m)), callback(std::move(cb)), policy(p), retransmit_timer(env), deadline_timer(env) {}
  Message message;
  ResultCallback callback;
  RetryPolicy policy;
  TimePoint started{};
  TimePoint last_sent{};
  uint32_t attempts = 0;
  Duration next_wait{};  // un-jittered wait before the next retransmission
  Duration last_wait{};  // jittered wait armed after the latest transmission
  // The first wait is the destination's RTO: jitter only lengthens waits,
  // since one below the RTO would retransmit before a timely answer.
  bool measured = false;
  ScopedTimer retransmit_timer;
  ScopedTimer deadline_timer;
};

Messenger::Messenger(Env& env, Transport& transport, Metrics& metrics, Options options)
    : env_(env),
      transport_(transport),
      options_(options),
      // Random start: a restarted node must not reuse ids that a receiver
      // still holds in its dedupe table, or it would get stale answers.
      next_msg_id_(env.rng().next_u64()),
      sweep_timer_(env),
      rtt_(options.rtt),
      alive_(std::make_shared<bool>(true)),
      requests_total_(metrics.counter("requests_total")),
      retransmits_total_(metrics.counter("request_retransmits_total")),
      timeouts_total_(metrics.counter("request_timeouts_total")),
      rejections_total_(metrics.counter("request_rejections_total")),
      duplicates_total_(metrics.counter("request_duplicates_total")),
      dropped_no_handler_(metrics.counter("messenger_dropped_total", {{"reason", "no_handler"}})),
      dropped_unknown_answer_(metrics.counter("messenger_dropped_total", {{"reason", "unknown_answer"}})),
      dropped_bad_kind_(metrics.counter("messenger_dropped_total", {{"reason", "bad_kind"}})),
      rtt_ms_(metrics.histogram("request_rtt_ms")),
      first_wait_rto_ms_(metrics.histogram("request_first_wait_ms", {{"source", "rto"}})),
      first_wait_initial_ms_(metrics.histogram("request_first_wait_ms", {{"source", "initial"}})),
      first_wait_fixed_ms_(metrics.histogram("request_first_wait_ms", {{"source", "fixed"}})) {
  transport_.set_receiver([this](const Message& message) { receive(message); });
}

Messenger::~Messenger() {
  *alive_ = false;
  // The transport may outlive us; leave it a receiver that does nothing.
  transport_.set_receiver([](const Message&) {});
  // Pending requests are dropped without callbacks; their timers are
  // cancelled by their ScopedTimers.
  outgoing_.clear();
}

SendStatus Messenger::send(NodeId dst, uint32_t body_type, std::string body) {
  Message message;
  message.dst = dst;
  message.kind = MessageKind::datagram;
  message.body_type = body_type;
  message.body = std::move(body);
  return transport_.send(std::move(message));
}

SendStatus Messenger::flood(uint32_t body_type, std::string body) {
  Message message;
  message.dst = kEveryNode;
  message.kind = MessageKind::datagram;
  message.body_type = body_type;
  message.body = std::move(body);
  return transport_.flood(std::move(message));
}

void Messenger::on_datagram(uint32_t body_type, DatagramHandler handler) {
  datagram_handlers_[body_type] = std::move(handler);
}

void Messenger::serve(uint32_t body_type, RequestHandler handler) {
  request_handlers_[body_type] = std::move(handler);
}

uint64_t Messenger::request(NodeId dst, uint32_t body_type, std::string body, ResultCallback callback,
                            std::optional<RetryPolicy> retry) {
  uint64_t msg_id = next_msg_id_++;
  // 0 means "no id" on the wire; skip it, and any id still in flight after a wrap.
  while (msg_id == 0 || outgoing_.count(msg_id) != 0) msg_id = next_msg_id_++;

  Message message;
  message.dst = dst;
  message.kind = MessageKind::request;
  message.msg_id = msg_id;
  message.body_type = body_type;
  message.body = std::move(body);

  auto outgoing = std::make_unique<Outgoing>(env_, std::move(message), std::move(callback),
                                             retry.value_or(options_.retry));
  Outgoing& out = *outgoing;
  out.started = env_.now();
  choose_first_wait(out);
  outgoing_.emplace(msg_id, std::move(outgoing));
  requests_total_.add();

  // Armed before the first transmission so that, at the same instant, the
  // deadline fires before a retransmission would.
  out.deadline_timer.start(out.policy.deadline, [this, msg_id] {
    auto it = outgoing_.find(msg_id);
    if (it == outgoing_.end()) return;
    RequestResult result;
    result.status = RequestStatus::timeout;
    result.elapsed = env_.now() - it->second->started;
    result.attempts = it->second->attempts;
    timeouts_total_.add();
    log("core").debug("request timeout dst={} msg_id={} body_type={} attempts={}",
                      it->second->message.dst.to_string(), msg_id, it->second->message.body_type,
                      result.attempts);
    finish(msg_id, std::move(result));
  });
  transmit(msg_id);
  return msg_id;
}

void Messenger::choose_first_wait(Outgoing& out) {
  const RetryPolicy& policy = out.policy;
  out.next_wait = policy.first_timeout;
  if (!policy.adaptive) {
    first_wait_fixed_ms_.record(to_millis(out.next_wait));
    return;
  }
  if (const auto rto = rtt_.rto(out.message.dst, env_.now())) {
    out.next_wait = std::min(*rto, policy.max_interval);
    out.measured = true;
    first_wait_rto_ms_.record(to_millis(out.next_wait));
    return;
  }
  first_wait_initial_ms_.record(to_millis(out.next_wait));
}

Duration Messenger::jittered(Duration wait, double jitter, bool lengthen_only) {
  const double j = std::clamp(jitter, 0.0, 1.0);
  const double spread = lengthen_only ? env_.rng().unit() : 2.0 * env_.rng().unit() - 1.0;
  const double factor = 1.0 + j * spread;
  const auto micros = static_cast<Duration::rep>(std::llround(static_cast<double>(wait.count()) * factor));
  // Never zero: a zero wait would retransmit in a loop at one instant.
  return std::max(Duration(micros), Duration(1));
}

void Messenger::transmit(uint64_t msg_id) {
  auto it = outgoing_.find(msg_id);
  if (it == outgoing_.end()) return;
  Outgoing& out = *it->second;
  ++out.attempts;
  out.last_sent = env_.now();
  if (out.attempts > 1) {
    retransmits_total_.add();
    // Whatever the policy, an expired wait is evidence about the path.
    rtt_.on_timeout(out.message.dst, out.last_wait);
  }

  // Schedule the next attempt before sending: a transport that delivers
  // synchronously may finish (and destroy) this request inside send().
  const Duration wait = jittered(out.next_wait, out.policy.jitter, out.measured);
  out.last_wait = wait;
  const auto grown = static_cast<double>(out.next_wait.count()) * out.policy.backoff;
  const auto cap = static_cast<double>(out.policy.max_interval.count());
  out.next_wait = Duration(static_cast<Duration::rep>(std::llround(std::min(grown, cap))));
  if (out.last_sent + wait < out.started + out.policy.deadline) {
    out.retransmit_timer.start(wait, [this, msg_id] { transmit(msg_id); });
  } else {
    out.retransmit_timer.cancel();
  }

  const SendStatus status = transport_.send(out.message);
  if (status == SendStatus::too_large) {
    // Retrying cannot help; report it from a timer so the caller never gets
    // its callback inside request().
    auto again = outgoing_.find(msg_id);
    if (again == outgoing_.end()) return;
    again->second->retransmit_timer.start(Duration::zero(), [this, msg_id] {
      auto found = outgoing_.find(msg_id);
      if (found == outgoing_.end()) return;
      RequestResult result;
      result.status = RequestStatus::rejected;
      result.response.src = self();
      result.response.dst = self();
      result.response.kind = MessageKind::rejection;
      result.response.msg_id = msg_id;
      result.response.body_type = found->second->message.body_type;
      result.response.body = std::string(to_string(SendStatus::too_large));
      result.elapsed = env_.now() - found->second->started;
      result.attempts = found->second->attempts;
      rejections_total_.add();
      finish(msg_id, std::move(result));
    });
  }
}

void Messenger::cancel(uint64_t msg_id) { outgoing_.erase(msg_id); }

void Messenger::finish(uint64_t msg_id, RequestResult result) {
  auto it = outgoing_.find(msg_id);
  if (it == outgoing_.end()) return;
  // Out of the table before the callback, so the callback may issue new
  // requests or cancel anything without seeing this one.
  std::unique_ptr<Outgoing> out = std::move(it->second);
  outgoing_.erase(it);
  ResultCallback callback = std::move(out->callback);
  out.reset();
  if (callback) callback(result);
}

void Messenger::receive(const Message& message) {
  switch (message.kind) {
    case MessageKind::datagram:
      on_datagram_message(message);
      return;
    case MessageKind::request:
      on_request(message);
      return;
    case MessageKind::response:
    case MessageKind::rejection:
      on_answer(message);
      return;
  }
  dropped_bad_kind_.add();
  log("core").debug("drop reason=bad_kind src={} kind={}", message.src.to_string(),
                    static_cast<int>(message.kind));
}

void Messenger::on_datagram_message(const Message& message) {
  auto it = datagram_handlers_.find(message.body_type);
  if (it == datagram_handlers_.end() || !it->second) {
    dropped_no_handler_.add();
    log("core").debug("drop reason=no_handler src={} body_type={}", message.src.to_string(), message.body_type);
    return;
  }
  // A copy: the handler may replace itself through on_datagram().
  DatagramHandler handler = it->second;
  handler(message);
}

void Messenger::on_request(const Message& message) {
  const SeenKey key{message.src, message.msg_id};
  if (auto seen = seen_.find(key); seen != seen_.end()) {
    duplicates_total_.add();
    // Answered: the answer was lost, send it again. Pending: the handler is
    // still on it; the requester will retransmit if this answer is lost too.
    if (seen->second->answered) transport_.send(seen->second->answer);
    return;
  }

  auto handler_it = request_handlers_.find(message.body_type);
  if (handler_it == request_handlers_.end() || !handler_it->second) {
    // Stateless: a duplicate gets the same rejection again.
    Message rejection;
    rejection.dst = message.src;
    rejection.kind = MessageKind::rejection;
    rejection.msg_id = message.msg_id;
    rejection.body_type = message.body_type;
    rejection.body = "no handler for body type " + std::to_string(message.body_type);
    log("core").debug("reject reason=no_handler src={} msg_id={} body_type={}", message.src.to_string(),
                      message.msg_id, message.body_type);
    transport_.send(std::move(rejection));
    return;
  }

  auto entry = std::make_shared<Answered>();
  remember(message, entry);
  auto pending = std::make_shared<Responder::Pending>();
  pending->alive = alive_;
  pending->messenger = this;
  pending->request = message;
  pending->entry = entry;
  // A copy: the handler may replace itself through serve().
  RequestHandler handler = handler_it->second;
  // The Responder shares ownership of the request it hands out by reference.
  Responder responder(pending);
  handler(pending->request, std::move(responder));
}

void Messenger::answer(const Message& request, const std::shared_ptr<Answered>& entry, MessageKind kind,
                       std::string body) {
  Message reply;
  reply.src = self();
  reply.dst = request.src;
  reply.kind = kind;
  reply.msg_id = request.msg_id;
  reply.body_type = request.body_type;
  reply.body = std::move(body);
  // Cached even if the entry has been forgotten meanwhile; then nobody reads it.
  entry->answered = true;
  entry->answer = reply;
  transport_.send(std::move(reply));
}

void Messenger::remember(const Message& request, const std::shared_ptr<Answered>& entry) {
  const SeenKey key{request.src, request.msg_id};
  seen_.emplace(key, entry);
  seen_expiry_.emplace(env_.now() + options_.dedupe_hold, key);
  while (seen_.size() > std::max<size_t>(options_.dedupe_capacity, 1) && !seen_expiry_.empty()) {
    auto oldest = seen_expiry_.begin();
    seen_.erase(oldest->second);
    seen_expiry_.erase(oldest);
  }
  arm_sweep();
}

void Messenger::forget_expired() {
  const TimePoint now = env_.now();
  while (!seen_expiry_.empty() && seen_expiry_.begin()->first <= now) {
    seen_.erase(seen_expiry_.begin()->second);
    seen_expiry_.erase(seen_expiry_.begin());
  }
  arm_sweep();
}

void Messenger::arm_sweep() {
  // One timer at the earliest forget time, armed only while entries exist.
  if (sweep_timer_.active() || seen_expiry_.empty()) return;
  sweep_timer_.start(seen_expiry_.begin()->first - env_.now(), [this] { forget_expired(); });
}

void Messenger::on_answer(const Message& message) {
  auto it = outgoing_.find(message.msg_id);
  if (it == outgoing_.end() || it->second->message.dst != message.src) {
    // Late (after a timeout or cancel), duplicated, or not ours.
    dropped_unknown_answer_.add();
    log("core").debug("drop reason=unknown_answer src={} msg_id={}", message.src.to_string(), message.msg_id);
    return;
  }
  const Outgoing& out = *it->second;
  // A rejection is an answer too: its round trip measures the path alike.
  rtt_.on_answer(message.src, env_.now() - out.last_sent, out.attempts, env_.now());
  RequestResult result;
  result.response = message;
  result.elapsed = env_.now() - out.started;
  result.attempts = out.attempts;
  if (message.kind == MessageKind::response) {
    result.status = RequestStatus::ok;
    result.last_rtt = env_.now() - out.last_sent;
    rtt_ms_.record(to_millis(result.last_rtt));
  } else {
    result.status = RequestStatus::rejected;
    rejections_total_.add();
    log("core").debug("request rejected dst={} msg_id={} reason={}", message.src.to_string(), message.msg_id,
                      message.body);
  }
  finish(message.msg_id, std::move(result));
}

}  // namespace mesh::core
