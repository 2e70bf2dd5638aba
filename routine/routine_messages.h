#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include "core/message.h"
#include "core/messenger.h"
#include "proto/routine.pb.h"
#include "proto/wire.pb.h"

namespace mesh::routine {

// Body type of the routine layer's agent-to-agent datagrams: Envelope.routine.
inline constexpr uint32_t kRoutineBodyType = proto::Envelope::kRoutineFieldNumber;

// Owns the routine body type on a Messenger and hands each decoded datagram
// to the component its kind belongs to (catalog sync, device subscriptions).
// Malformed bodies are dropped and counted.
class RoutineMessages {
 public:
  using Handler = std::function<void(const core::Message& message, const proto::RoutineBody& body)>;

  RoutineMessages(core::Messenger& messenger, core::Metrics& metrics);
  RoutineMessages(const RoutineMessages&) = delete;
  RoutineMessages& operator=(const RoutineMessages&) = delete;
  ~RoutineMessages();

  void on(proto::RoutineBody::KindCase kind, Handler handler);
  core::SendStatus send(core::NodeId destination, const proto::RoutineBody& body);
  core::NodeId self() const { return messenger_.self(); }

 private:
  core::Messenger& messenger_;
  std::map<proto::RoutineBody::KindCase, Handler> handlers_;
  core::Counter& dropped_malformed_;
};

}  // namespace mesh::routine
