#include "core/output_commit_transport.h"

#include <utility>

namespace mesh::core {

OutputCommitTransport::OutputCommitTransport(Env& env, Transport& inner, Storage& storage, Metrics& metrics,
                                             std::set<uint32_t> exempt_body_types)
    : env_(env),
      inner_(inner),
      storage_(storage),
      exempt_(std::move(exempt_body_types)),
      alive_(std::make_shared<bool>(true)),
      held_total_(metrics.counter("output_commit_held_total")),
      dropped_no_route_(metrics.counter("output_commit_dropped_total", {{"reason", "no_route"}})),
      dropped_too_large_(metrics.counter("output_commit_dropped_total", {{"reason", "too_large"}})),
      held_ms_(metrics.histogram("output_commit_held_ms")) {}

OutputCommitTransport::~OutputCommitTransport() { *alive_ = false; }

SendStatus OutputCommitTransport::send(Message message) { return pass(std::move(message), false); }

SendStatus OutputCommitTransport::flood(Message message) { return pass(std::move(message), true); }

SendStatus OutputCommitTransport::pass(Message message, bool flood) {
  if (exempt_.contains(message.body_type)) {
    return flood ? inner_.flood(std::move(message)) : inner_.send(std::move(message));
  }
  // The storage runs the action at once when nothing is pending: then the
  // caller gets the real status, as without this class.
  struct Call {
    bool returned = false;
    SendStatus status = SendStatus::sent;
  };
  auto call = std::make_shared<Call>();
  ++held_;
  storage_.after_durable([this, alive = alive_, call, flood, since = env_.now(), message = std::move(message)]() mutable {
    if (!*alive) return;
    --held_;
    const SendStatus status = flood ? inner_.flood(std::move(message)) : inner_.send(std::move(message));
    if (!call->returned) {
      call->status = status;
      return;
    }
    held_total_.add();
    held_ms_.record(to_millis(env_.now() - since));
    if (status == SendStatus::no_route) dropped_no_route_.add();
    if (status == SendStatus::too_large) dropped_too_large_.add();
  });
  call->returned = true;
  return call->status;
}

}  // namespace mesh::core
