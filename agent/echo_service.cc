#include "agent/echo_service.h"

#include <fmt/format.h>

#include <utility>

#include "core/log.h"
#include "proto/wire.pb.h"

namespace mesh::agent {
namespace {

constexpr uint32_t kEchoBodyType = proto::Envelope::kEchoFieldNumber;

std::string attempts_text(uint32_t attempts) {
  return fmt::format("{} attempt{}", attempts, attempts == 1 ? "" : "s");
}

}  // namespace

EchoService::EchoService(core::Env& env, core::Messenger& messenger, RouteCheck route_check)
    : env_(env), messenger_(messenger), route_check_(std::move(route_check)) {
  messenger_.serve(kEchoBodyType, [](const core::Message& request, core::Responder responder) {
    proto::EchoBody body;
    if (!body.ParseFromString(request.body) || !body.has_request()) {
      responder.reject("not an echo request");
      return;
    }
    proto::EchoBody reply;
    reply.mutable_reply()->set_request_hops(request.hops);
    reply.mutable_reply()->set_payload(body.request().payload());
    responder.respond(reply.SerializeAsString());
  });
}

void EchoService::ping(core::NodeId destination, core::Duration timeout, Callback callback) {
  // The payload is the send time: it makes each echo distinct and lets a
  // reply be checked against its request.
  const std::string payload = std::to_string(env_.now().time_since_epoch().count());
  proto::EchoBody body;
  body.mutable_request()->set_payload(payload);

  core::RetryPolicy retry;
  retry.deadline = timeout;
  messenger_.request(
      destination, kEchoBodyType, body.SerializeAsString(),
      [route_check = route_check_, destination, timeout, payload, callback = std::move(callback)](const core::RequestResult& r) {
        Result result;
        result.status = r.status;
        result.attempts = r.attempts;
        const std::string who = destination.to_string();
        switch (r.status) {
          case core::RequestStatus::ok: {
            proto::EchoBody reply;
            if (!reply.ParseFromString(r.response.body) || !reply.has_reply() ||
                reply.reply().payload() != payload) {
              result.status = core::RequestStatus::rejected;
              result.error = fmt::format("{} answered the echo with something that is not its reply", who);
              break;
            }
            result.rtt_ms = core::to_millis(r.last_rtt);
            result.hops = reply.reply().request_hops();
            break;
          }
          case core::RequestStatus::rejected:
            result.error = fmt::format("{} refused the echo: {}", who, r.response.body);
            break;
          case core::RequestStatus::timeout:
          case core::RequestStatus::cancelled: {
            result.error = fmt::format("no reply from {} within {:.1f} s ({})", who, core::to_seconds(timeout),
                                       attempts_text(r.attempts));
            if (route_check) {
              const std::string why = route_check(destination);
              if (!why.empty()) result.error += ": " + why;
            }
            break;
          }
        }
        core::log("agent").debug("echo dst={} status={} rtt_ms={:.3f} hops={} attempts={}", who,
                                 core::to_string(result.status), result.rtt_ms, result.hops, result.attempts);
        callback(result);
      },
      retry);
}

}  // namespace mesh::agent
