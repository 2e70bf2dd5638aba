#include "routine/routine_messages.h"

#include "routine/device_codec.h"

namespace mesh::routine {

RoutineMessages::RoutineMessages(core::Messenger& messenger, core::Metrics& metrics)
    : messenger_(messenger), dropped_malformed_(metrics.counter("routine_dropped_total", {{"reason", "malformed"}})) {
  messenger_.on_datagram(kRoutineBodyType, [this](const core::Message& message) {
    const auto body = parse_message<proto::RoutineBody>(message.body);
    const auto handler = body ? handlers_.find(body->kind_case()) : handlers_.end();
    if (handler == handlers_.end()) {
      dropped_malformed_.add();
      return;
    }
    handler->second(message, *body);
  });
}

RoutineMessages::~RoutineMessages() {
  messenger_.on_datagram(kRoutineBodyType, [](const core::Message&) {});
}

void RoutineMessages::on(proto::RoutineBody::KindCase kind, Handler handler) { handlers_[kind] = std::move(handler); }

core::SendStatus RoutineMessages::send(core::NodeId destination, const proto::RoutineBody& body) {
  return messenger_.send(destination, kRoutineBodyType, body.SerializeAsString());
}

}  // namespace mesh::routine
