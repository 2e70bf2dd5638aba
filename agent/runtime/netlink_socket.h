#pragma once

#include <linux/rtnetlink.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/expected.h"
#include "core/link.h"
#include "core/node_id.h"

namespace mesh::agent::netlink {

// The rtnetlink wire format (netlink(7), rtnetlink(7)) and one NETLINK_ROUTE
// socket. The decoders take kernel replies as plain bytes so they can be
// tested on hand-built buffers; they reject anything whose lengths disagree
// with the buffer instead of reading past it.

// One message of a datagram; `payload` views the datagram (header excluded).
struct Message {
  uint16_t type = 0;
  uint16_t flags = 0;
  uint32_t sequence = 0;
  uint32_t port = 0;
  core::ByteSpan payload;
};
core::Expected<std::vector<Message>, std::string> split_messages(core::ByteSpan datagram);

// One route attribute (struct rtattr); the type has the nested and
// byte-order flags stripped.
struct Attribute {
  uint16_t type = 0;
  core::ByteSpan value;
};
core::Expected<std::vector<Attribute>, std::string> split_attributes(core::ByteSpan bytes);

// What went wrong, as the kernel (errno and its extended-ack text) or our own
// decoding (code 0) tells it.
struct Error {
  int code = 0;  // a positive errno, or 0 when the failure is not the kernel's answer
  std::string message;
  std::string to_string() const;
};

// The body of an NLMSG_ERROR message: error 0 acknowledges a request,
// otherwise it is the positive errno of the failure; `message` holds the
// kernel's extended-ack text when it sent one.
struct Ack {
  int error = 0;
  std::string message;
};
core::Expected<Ack, std::string> parse_ack(const Message& message);

// An IPv4 or other-family route message (struct rtmsg and its attributes).
// Addresses are only decoded for AF_INET; other families keep their header.
struct RouteMessage {
  uint8_t family = 0;
  uint8_t dst_len = 0;
  uint8_t tos = 0;
  uint32_t table = 0;  // RTA_TABLE when present (tables above 255 need it), else rtm_table
  uint8_t protocol = 0;
  uint8_t scope = 0;
  uint8_t type = 0;
  std::optional<core::Ipv4Address> destination;  // absent: 0.0.0.0/dst_len
  std::optional<core::Ipv4Address> gateway;
  uint32_t oif = 0;
  uint32_t priority = 0;  // the route metric
  bool multipath = false;
};
core::Expected<RouteMessage, std::string> decode_route(core::ByteSpan payload);

// One request: header, a fixed part, then aligned attributes.
class RequestBuilder {
 public:
  RequestBuilder(uint16_t type, uint16_t flags);
  void append_fixed(const void* data, size_t size);
  void add_attribute(uint16_t type, const void* data, size_t size);
  void add_u32(uint16_t type, uint32_t value);
  // The finished datagram, with the header's length, sequence and flags
  // (the constructor's plus `extra_flags`) filled in.
  std::vector<uint8_t> finish(uint32_t sequence, uint16_t extra_flags = 0) const;
  uint16_t type() const { return type_; }

 private:
  uint16_t type_;
  uint16_t flags_;
  std::vector<uint8_t> body_;
};

// A route request (RTM_NEWROUTE, RTM_DELROUTE, RTM_GETROUTE) for `route`.
RequestBuilder encode_route(uint16_t type, uint16_t flags, const RouteMessage& route);

// A copy of one message of a dump, kept after its datagram is gone.
struct OwnedMessage {
  uint16_t type = 0;
  uint16_t flags = 0;
  std::vector<uint8_t> payload;
};

// Follows the answer to one request through the datagrams that carry it:
// an acknowledgement (or error) for a plain request, the messages up to
// NLMSG_DONE for a dump. Messages of other sequence numbers (answers to a
// request that timed out earlier) are skipped.
class ReplyCollector {
 public:
  enum class Kind { ack, dump };
  enum class State { waiting, done, failed };

  ReplyCollector(Kind kind, uint32_t sequence) : kind_(kind), sequence_(sequence) {}

  State feed(core::ByteSpan datagram);
  State state() const { return state_; }
  const Error& error() const { return error_; }
  // A dump the kernel marked inconsistent (the table changed under it).
  bool interrupted() const { return interrupted_; }
  std::vector<OwnedMessage> take_messages() { return std::move(messages_); }

 private:
  State fail(Error error);

  Kind kind_;
  uint32_t sequence_;
  State state_ = State::waiting;
  Error error_;
  bool interrupted_ = false;
  std::vector<OwnedMessage> messages_;
};

// Options of the socket.
struct SocketOptions {
  // How long to wait for the kernel's answer. The kernel answers rtnetlink
  // requests synchronously, so this only bounds a stuck kernel; the agent's
  // single thread blocks at most this long per request.
  std::chrono::milliseconds reply_timeout{1000};
};

struct Ok {};

// One blocking NETLINK_ROUTE socket. Not thread-safe; one request at a time.
class NetlinkSocket {
 public:
  static core::Expected<std::unique_ptr<NetlinkSocket>, std::string> open(SocketOptions options = {});
  NetlinkSocket(const NetlinkSocket&) = delete;
  NetlinkSocket& operator=(const NetlinkSocket&) = delete;
  ~NetlinkSocket();

  // Sends `request` with NLM_F_ACK and waits for the kernel's verdict.
  core::Expected<Ok, Error> request(const RequestBuilder& request);
  // Sends `request` with NLM_F_DUMP and returns every message of the answer;
  // an interrupted dump is repeated a few times before it is reported.
  core::Expected<std::vector<OwnedMessage>, Error> dump(const RequestBuilder& request);

 private:
  NetlinkSocket(int fd, SocketOptions options) : fd_(fd), options_(options) {}
  core::Expected<Ok, Error> send(const std::vector<uint8_t>& datagram);
  core::Expected<Ok, Error> receive(ReplyCollector& collector);

  int fd_;
  SocketOptions options_;
  uint32_t next_sequence_ = 1;
};

}  // namespace mesh::agent::netlink
