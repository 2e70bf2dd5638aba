#pragma once

#include <functional>
#include <string>

#include "core/env.h"
#include "core/messenger.h"

namespace mesh::agent {

// meshctl ping: an end-to-end echo over the Messenger's reliable requests.
// The reply reports how many hops the request travelled; RTT is measured on
// the Env clock from the attempt that was answered.
class EchoService {
 public:
  struct Result {
    core::RequestStatus status = core::RequestStatus::timeout;
    double rtt_ms = 0;
    uint32_t hops = 0;
    uint32_t attempts = 0;
    std::string error;  // set unless status is ok
  };
  using Callback = std::function<void(const Result& result)>;
  // Why `destination` cannot be reached right now, or empty if it can. Lets
  // a failed ping say "no route" instead of only "no reply" while the
  // service itself stays ignorant of the routing layer.
  using RouteCheck = std::function<std::string(core::NodeId destination)>;

  // Also serves echo requests from other nodes on `messenger`.
  EchoService(core::Env& env, core::Messenger& messenger, RouteCheck route_check = {});

  void ping(core::NodeId destination, core::Duration timeout, Callback callback);

 private:
  core::Env& env_;
  core::Messenger& messenger_;
  RouteCheck route_check_;
};

}  // namespace mesh::agent
