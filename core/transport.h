#pragma once

#include <functional>
#include <string_view>

#include "core/message.h"

namespace mesh::core {

enum class SendStatus {
  sent,        // handed to the next hop (not a delivery guarantee)
  no_route,    // destination not reachable now
  too_large,   // encoded message exceeds one datagram
};

std::string_view to_string(SendStatus status);

// dst of a message flooded to every node of the mesh (Transport::flood).
inline constexpr NodeId kEveryNode{0xffffffffu};

// End to end, best effort: a Message to any node, hop by hop along the OLSR
// table (routing provides it). Reliability is core's Messenger on top,
// never hand-rolled by a protocol.
class Transport {
 public:
  using Receiver = std::function<void(const Message& message)>;

  virtual ~Transport() = default;

  virtual NodeId self() const = 0;
  // `message.src` is overwritten with self(); msg_id, kind and body are the
  // caller's.
  virtual SendStatus send(Message message) = 0;
  // Best effort to every other node of the mesh, each receiving it once
  // (routing's MPR flooding); receivers see dst == kEveryNode. `message.dst`
  // is overwritten; src as in send().
  virtual SendStatus flood(Message message) = 0;
  // Every message addressed to this node; one receiver, replaced on each call.
  virtual void set_receiver(Receiver receiver) = 0;
};

}  // namespace mesh::core
