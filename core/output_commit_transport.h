#pragma once

#include <cstdint>
#include <memory>
#include <set>

#include "core/env.h"
#include "core/metrics.h"
#include "core/storage.h"
#include "core/transport.h"

namespace mesh::core {

// The node's outgoing messages, held until the storage changes made before
// them are durable (Storage::after_durable), so a power cut never loses a
// change another node has seen the effects of: a k-group member's
// acknowledgement of an entry, a Bully promise, a Camera grant carrying a
// fencing token, a catalog change. Protocol code keeps writing to storage and
// sending in the same step, as if put() were synchronous; this class is what
// makes that true for the outside world, wherever the disk is slow.
//
// Exempt body types (Medley's failure detection and gossip, echo) never wait:
// they read no stored state, and a node whose disk stalls for seconds must
// still answer its pings, or the mesh declares it dead and re-elects every
// group it leads (what the chaos runs saw when each put blocked the event
// loop). Messages forwarded for other nodes never pass here at all.
//
// Held messages leave in the order sent. send() and flood() of a held message
// report `sent`; a later failure (no route, too large) is counted
// (output_commit_dropped_total{reason}) and, like a lost datagram, left to
// the Messenger's retransmission or deadline.
class OutputCommitTransport final : public Transport {
 public:
  OutputCommitTransport(Env& env, Transport& inner, Storage& storage, Metrics& metrics,
                        std::set<uint32_t> exempt_body_types);
  ~OutputCommitTransport() override;
  OutputCommitTransport(const OutputCommitTransport&) = delete;
  OutputCommitTransport& operator=(const OutputCommitTransport&) = delete;

  NodeId self() const override { return inner_.self(); }
  SendStatus send(Message message) override;
  SendStatus flood(Message message) override;
  void set_receiver(Receiver receiver) override { inner_.set_receiver(std::move(receiver)); }

  // Messages waiting for the disk now.
  size_t held() const { return held_; }

 private:
  SendStatus pass(Message message, bool flood);

  Env& env_;
  Transport& inner_;
  Storage& storage_;
  std::set<uint32_t> exempt_;
  size_t held_ = 0;
  // Shared with the actions waiting in the storage: false once this is gone.
  std::shared_ptr<bool> alive_;
  Counter& held_total_;
  Counter& dropped_no_route_;
  Counter& dropped_too_large_;
  Histogram& held_ms_;
};

}  // namespace mesh::core
