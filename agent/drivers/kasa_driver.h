#pragma once

// A TP-Link Kasa device over its local TCP protocol (kasa_codec.h), as a
// pull driver: the device leader polls read().
//
// URI: kasa://HOST[:PORT][?child=ID&timeout_ms=MS&transition_ms=MS]
//   HOST           IPv4 or IPv6 address ([::1]) or a host name
//   PORT           default 9999
//   child          a power-strip outlet, by its id in the strip's sysinfo
//                  (plug and switch kinds only)
//   timeout_ms     one request from connect to the last reply byte; default 3000
//   transition_ms  bulbs: fade time of an actuation; default: the bulb's own
//
// Each request is one short TCP connection (connect, send the frame, read one
// length-prefixed reply, close), as the devices and their official app do.
// Requests of one driver run one at a time, in order, so a read() after an
// actuate() sees its effect; each has one deadline, counted from the call,
// that covers queueing, connecting, sending and the reply. Everything runs on
// the io_context's thread; a host name is resolved by asio's resolver, whose
// completion also runs there.
//
// Failures: connection refused/reset, unreachable host or a failed name
// lookup -> unreachable; no complete reply by the deadline -> timeout; a
// reply that is not a frame, longer than 64 KiB, cut short, not JSON or not
// the expected shape -> protocol; err_code != 0 -> refused. Each reason names
// the endpoint and the stage.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <asio/io_context.hpp>

#include "agent/drivers/driver_uri.h"
#include "agent/drivers/kasa_codec.h"
#include "core/expected.h"
#include "routine/device_driver.h"

namespace mesh::drivers {

class KasaDriver final : public routine::DeviceDriver {
 public:
  struct Options {
    std::chrono::milliseconds timeout{3000};
    size_t max_reply = kasa::kMaxReplySize;
    std::optional<int> transition_ms;
  };

  // `io` must outlive the driver.
  KasaDriver(asio::io_context& io, kasa::Target target, std::string host, uint16_t port, Options options);
  KasaDriver(const KasaDriver&) = delete;
  KasaDriver& operator=(const KasaDriver&) = delete;
  // Closes every connection; no callback runs afterwards.
  ~KasaDriver() override;

  // Opens `device` from its parsed kasa:// URI; the error names the URI and
  // what is wrong (unknown option, a child on a bulb, a bad number).
  static core::Expected<std::unique_ptr<KasaDriver>, std::string> open(asio::io_context& io,
                                                                       const routine::DeviceSpec& device,
                                                                       const DriverUri& uri);

  void read(Callback callback) override;
  void actuate(const routine::Attributes& values, const std::string& command_id, Callback callback) override;
  bool watch(Callback callback) override;

  // "HOST:PORT" (with "#child" for an outlet), as error reasons name it.
  const std::string& endpoint() const { return endpoint_; }
  // Requests queued or in flight.
  size_t pending() const { return queue_.size() + (active_ ? 1 : 0); }

 private:
  struct Request;
  using Parser = std::function<routine::DriverResult(std::string_view payload)>;

  void submit(const std::string& payload, Parser parser, Callback callback);
  void fail_soon(routine::DriverError error, Callback callback);
  void start_next();
  void connect(const std::shared_ptr<Request>& request);
  void send(const std::shared_ptr<Request>& request);
  void receive(const std::shared_ptr<Request>& request);
  // Completes `request` once: cleans up, starts the next request, then runs
  // the callback last (it may destroy the driver).
  void finish(const std::shared_ptr<Request>& request, const routine::DriverResult& result);

  asio::io_context& io_;
  kasa::Target target_;
  std::string host_;
  uint16_t port_;
  Options options_;
  std::string endpoint_;
  std::deque<std::shared_ptr<Request>> queue_;
  std::shared_ptr<Request> active_;
  // Handlers hold a weak reference and do nothing once the driver is gone.
  std::shared_ptr<KasaDriver*> alive_;
};

}  // namespace mesh::drivers
