#include "agent/drivers/kasa_driver.h"

#include <array>
#include <utility>

#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>
#include <fmt/format.h>

namespace mesh::drivers {

using routine::DriverError;
using routine::DriverFailure;
using routine::DriverResult;

struct KasaDriver::Request {
  Request(asio::io_context& io, const std::string& payload, Parser parse, Callback done, size_t max_reply)
      : frame(kasa::encode_frame(payload)),
        parser(std::move(parse)),
        callback(std::move(done)),
        deadline(io),
        socket(io),
        resolver(io),
        reader(max_reply) {}

  std::string frame;
  Parser parser;
  Callback callback;
  asio::steady_timer deadline;
  asio::ip::tcp::socket socket;
  asio::ip::tcp::resolver resolver;
  kasa::FrameReader reader;
  std::array<char, 4096> buffer{};
  const char* stage = "queued";
  bool finished = false;
};

namespace {

DriverResult failure(DriverFailure kind, std::string reason) {
  return core::Unexpected(DriverError{kind, std::move(reason)});
}

bool is_unreachable(const asio::error_code& error) {
  return error == asio::error::connection_refused || error == asio::error::connection_reset ||
         error == asio::error::connection_aborted || error == asio::error::host_unreachable ||
         error == asio::error::network_unreachable || error == asio::error::network_down ||
         error == asio::error::broken_pipe || error == asio::error::timed_out || error == asio::error::not_connected;
}


}  // namespace

KasaDriver::KasaDriver(asio::io_context& io, kasa::Target target, std::string host, uint16_t port, Options options)
    : io_(io),
      target_(std::move(target)),
      host_(std::move(host)),
      port_(port),
      options_(options),
      alive_(std::make_shared<KasaDriver*>(this)) {
  const bool v6 = host_.find(':') != std::string::npos;
  endpoint_ = fmt::format("{}{}{}:{}{}{}", v6 ? "[" : "", host_, v6 ? "]" : "", port_,
                          target_.child_id.empty() ? "" : "#", target_.child_id);
}

KasaDriver::~KasaDriver() {
  alive_.reset();
  auto stop = [](Request& request) noexcept {
    request.finished = true;
    asio::error_code ignored;
    request.socket.close(ignored);
    // asio's timer and resolver report a failed cancel() only by exception;
    // a destructor must not throw, and their handlers do nothing now anyway.
    try {
      request.deadline.cancel();
      request.resolver.cancel();
    } catch (...) {  // NOLINT(bugprone-empty-catch)
    }
  };
  if (active_) stop(*active_);
  for (auto& request : queue_) stop(*request);
}

core::Expected<std::unique_ptr<KasaDriver>, std::string> KasaDriver::open(asio::io_context& io,
                                                                          const routine::DeviceSpec& device,
                                                                          const DriverUri& uri) {
  auto error = [&](std::string_view what) {
    return core::Unexpected(fmt::format("device {}: driver URI '{}': {}", device.id, device.driver, what));
  };
  if (!uri.path.empty()) return error("a kasa:// URI has no path: kasa://HOST[:PORT][?child=ID]");
  kasa::Target target{device.kind, ""};
  Options options;
  for (const auto& [key, value] : uri.query) {
    if (key == "child") {
      if (value.empty()) return error("child= needs the outlet's id");
      if (device.kind != routine::DeviceKind::plug && device.kind != routine::DeviceKind::switch_) {
        return error(fmt::format("child= is for power-strip outlets (plug or switch), not a {}",
                                 routine::to_string(device.kind)));
      }
      target.child_id = value;
    } else if (key == "timeout_ms") {
      auto ms = parse_query_int(value, 1, 600000);
      if (!ms) return error("timeout_ms must be an integer 1..600000");
      options.timeout = std::chrono::milliseconds(*ms);
    } else if (key == "transition_ms") {
      auto ms = parse_query_int(value, 0, 3600000);
      if (!ms) return error("transition_ms must be an integer 0..3600000");
      if (device.kind != routine::DeviceKind::bulb) return error("transition_ms is for bulbs");
      options.transition_ms = *ms;
    } else {
      return error(fmt::format("unknown option '{}' (known: child, timeout_ms, transition_ms)", key));
    }
  }
  return std::make_unique<KasaDriver>(io, std::move(target), uri.host, uri.port_or(kasa::kDefaultPort), options);
}

void KasaDriver::read(Callback callback) {
  const kasa::Target target = target_;
  submit(
      kasa::sysinfo_request(),
      [target](std::string_view payload) { return kasa::parse_sysinfo_reply(target, payload); }, std::move(callback));
}

void KasaDriver::actuate(const routine::Attributes& values, const std::string& command_id, Callback callback) {
  kasa::ActuateOptions options{command_id, options_.transition_ms};
  auto request = kasa::actuate_request(target_, values, options);
  if (!request) {
    fail_soon(DriverError{DriverFailure::refused, fmt::format("{}: {}", endpoint_, request.error())},
              std::move(callback));
    return;
  }
  const kasa::Target target = target_;
  submit(
      *request,
      [target, values](std::string_view payload) { return kasa::parse_actuate_reply(target, values, payload); },
      std::move(callback));
}

bool KasaDriver::watch(Callback /*callback*/) { return false; }

void KasaDriver::fail_soon(DriverError error, Callback callback) {
  std::weak_ptr<KasaDriver*> alive = alive_;
  asio::post(io_, [alive, error = std::move(error), callback = std::move(callback)] {
    if (alive.expired()) return;
    callback(core::Unexpected(error));
  });
}

void KasaDriver::submit(const std::string& payload, Parser parser, Callback callback) {
  auto request = std::make_shared<Request>(io_, payload, std::move(parser), std::move(callback), options_.max_reply);
  std::weak_ptr<KasaDriver*> alive = alive_;
  request->deadline.expires_after(options_.timeout);
  request->deadline.async_wait([this, alive, request](const asio::error_code& error) {
    if (alive.expired() || request->finished || error == asio::error::operation_aborted) return;
    finish(request, failure(DriverFailure::timeout,
                            fmt::format("{}: no complete reply within {} ms ({}, {} bytes received)", endpoint_,
                                        options_.timeout.count(), request->stage, request->reader.consumed())));
  });
  queue_.push_back(std::move(request));
  // Start from a handler, not from inside this call: completions must never
  // run inside read()/actuate().
  asio::post(io_, [this, alive] {
    if (!alive.expired()) start_next();
  });
}

void KasaDriver::start_next() {
  if (active_ || queue_.empty()) return;
  active_ = std::move(queue_.front());
  queue_.pop_front();
  auto request = active_;
  asio::error_code error;
  const auto address = asio::ip::make_address(host_, error);
  if (!error) {
    request->stage = "connecting";
    std::weak_ptr<KasaDriver*> alive = alive_;
    request->socket.async_connect(
        asio::ip::tcp::endpoint(address, port_), [this, alive, request](const asio::error_code& connect_error) {
          if (alive.expired() || request->finished) return;
          if (connect_error) {
            finish(request, failure(DriverFailure::unreachable,
                                    fmt::format("connect {}: {}", endpoint_, connect_error.message())));
            return;
          }
          send(request);
        });
    return;
  }
  request->stage = "resolving";
  std::weak_ptr<KasaDriver*> alive = alive_;
  request->resolver.async_resolve(
      host_, std::to_string(port_),
      [this, alive, request](const asio::error_code& resolve_error,
                             const asio::ip::tcp::resolver::results_type& results) {
        if (alive.expired() || request->finished) return;
        if (resolve_error) {
          finish(request, failure(DriverFailure::unreachable,
                                  fmt::format("resolve {}: {}", endpoint_, resolve_error.message())));
          return;
        }
        request->stage = "connecting";
        asio::async_connect(request->socket, results,
                            [this, alive, request](const asio::error_code& connect_error, const auto& /*endpoint*/) {
                              if (alive.expired() || request->finished) return;
                              if (connect_error) {
                                finish(request,
                                       failure(DriverFailure::unreachable,
                                               fmt::format("connect {}: {}", endpoint_, connect_error.message())));
                                return;
                              }
                              send(request);
                            });
      });
}

void KasaDriver::send(const std::shared_ptr<Request>& request) {
  request->stage = "sending";
  std::weak_ptr<KasaDriver*> alive = alive_;
  asio::async_write(request->socket, asio::buffer(request->frame),
                    [this, alive, request](const asio::error_code& error, size_t /*bytes*/) {
                      if (alive.expired() || request->finished) return;
                      if (error) {
                        finish(request, failure(DriverFailure::unreachable,
                                                fmt::format("send to {}: {}", endpoint_, error.message())));
                        return;
                      }
                      request->stage = "waiting for the reply";
                      receive(request);
                    });
}

void KasaDriver::receive(const std::shared_ptr<Request>& request) {
  std::weak_ptr<KasaDriver*> alive = alive_;
  request->socket.async_read_some(
      asio::buffer(request->buffer), [this, alive, request](const asio::error_code& error, size_t bytes) {
        if (alive.expired() || request->finished) return;
        auto& reader = request->reader;
        if (bytes > 0) reader.feed(std::string_view(request->buffer.data(), bytes));
        switch (reader.status()) {
          case kasa::FrameReader::Status::complete: {
            const std::string payload = reader.take();
            DriverResult result = request->parser(payload);
            if (!result) {
              DriverError detailed = result.error();
              detailed.reason = fmt::format("{}: {}", endpoint_, detailed.reason);
              result = core::Unexpected(std::move(detailed));
            }
            finish(request, result);
            return;
          }
          case kasa::FrameReader::Status::oversized:
            finish(request, failure(DriverFailure::protocol,
                                    fmt::format("{}: reply declares {} bytes, more than the {} allowed", endpoint_,
                                                reader.declared_length(), options_.max_reply)));
            return;
          case kasa::FrameReader::Status::need_more:
            break;
        }
        if (error == asio::error::eof) {
          const std::string what = reader.consumed() == 0 ? std::string("closed the connection without a reply")
                                   : reader.header_complete()
                                       ? fmt::format("closed the connection after {} of {} reply bytes",
                                                     reader.consumed() - kasa::kHeaderSize, reader.declared_length())
                                       : fmt::format("closed the connection after {} header bytes", reader.consumed());
          finish(request, failure(DriverFailure::protocol, fmt::format("{}: {}", endpoint_, what)));
          return;
        }
        if (error) {
          finish(request, failure(is_unreachable(error) ? DriverFailure::unreachable : DriverFailure::protocol,
                                  fmt::format("receive from {}: {}", endpoint_, error.message())));
          return;
        }
        receive(request);
      });
}

void KasaDriver::finish(const std::shared_ptr<Request>& request, const DriverResult& result) {
  if (request->finished) return;
  request->finished = true;
  asio::error_code ignored;
  request->deadline.cancel();
  request->resolver.cancel();
  request->socket.close(ignored);
  if (active_ == request) {
    active_.reset();
  } else {
    std::erase(queue_, request);
  }
  Callback callback = std::move(request->callback);
  start_next();
  // Last: the callback may destroy this driver.
  callback(result);
}

}  // namespace mesh::drivers
