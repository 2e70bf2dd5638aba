#include "agent/runtime/netlink_socket.h"

#include <arpa/inet.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace mesh::agent::netlink {
namespace {

constexpr size_t kHeaderSize = sizeof(nlmsghdr);
constexpr size_t kAttributeHeaderSize = sizeof(rtattr);

constexpr size_t align4(size_t n) { return (n + 3) & ~size_t{3}; }

// Reads a trivially copyable value from possibly unaligned bytes.
template <typename T>
T read_at(core::ByteSpan bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

core::Expected<uint32_t, std::string> read_u32_attribute(const Attribute& attribute, const char* name) {
  if (attribute.value.size() != sizeof(uint32_t)) {
    return core::Unexpected(fmt::format("{} attribute has {} bytes, expected 4", name, attribute.value.size()));
  }
  return read_at<uint32_t>(attribute.value, 0);
}

core::Expected<core::Ipv4Address, std::string> read_ipv4_attribute(const Attribute& attribute, const char* name) {
  if (attribute.value.size() != 4) {
    return core::Unexpected(
        fmt::format("{} attribute has {} bytes, an IPv4 address has 4", name, attribute.value.size()));
  }
  return core::Ipv4Address(ntohl(read_at<uint32_t>(attribute.value, 0)));
}

std::string errno_text(int code) { return std::strerror(code); }

// Repeating a dump the kernel flagged inconsistent usually succeeds at once;
// a table changing this fast for this long is reported instead.
constexpr int kDumpAttempts = 3;

}  // namespace

std::string Error::to_string() const {
  if (code == 0) return message;
  if (message.empty()) return errno_text(code);
  return fmt::format("{} ({})", errno_text(code), message);
}

core::Expected<std::vector<Message>, std::string> split_messages(core::ByteSpan datagram) {
  std::vector<Message> messages;
  size_t offset = 0;
  while (offset < datagram.size()) {
    const size_t left = datagram.size() - offset;
    if (left < kHeaderSize) {
      return core::Unexpected(fmt::format("truncated netlink header at offset {}: {} bytes left", offset, left));
    }
    const auto header = read_at<nlmsghdr>(datagram, offset);
    if (header.nlmsg_len < kHeaderSize) {
      return core::Unexpected(
          fmt::format("netlink message at offset {} claims {} bytes, less than its header", offset, header.nlmsg_len));
    }
    if (header.nlmsg_len > left) {
      return core::Unexpected(
          fmt::format("netlink message at offset {} claims {} bytes, only {} left", offset, header.nlmsg_len, left));
    }
    messages.push_back(Message{header.nlmsg_type, header.nlmsg_flags, header.nlmsg_seq, header.nlmsg_pid,
                               datagram.subspan(offset + kHeaderSize, header.nlmsg_len - kHeaderSize)});
    // The last message of a datagram may omit its padding.
    offset = std::min(datagram.size(), offset + align4(header.nlmsg_len));
  }
  return messages;
}

core::Expected<std::vector<Attribute>, std::string> split_attributes(core::ByteSpan bytes) {
  std::vector<Attribute> attributes;
  size_t offset = 0;
  while (offset < bytes.size()) {
    const size_t left = bytes.size() - offset;
    if (left < kAttributeHeaderSize) {
      return core::Unexpected(fmt::format("truncated attribute header at offset {}: {} bytes left", offset, left));
    }
    const auto header = read_at<rtattr>(bytes, offset);
    if (header.rta_len < kAttributeHeaderSize) {
      return core::Unexpected(
          fmt::format("attribute at offset {} claims {} bytes, less than its header", offset, header.rta_len));
    }
    if (header.rta_len > left) {
      return core::Unexpected(
          fmt::format("attribute at offset {} claims {} bytes, only {} left", offset, header.rta_len, left));
    }
    attributes.push_back(
        Attribute{static_cast<uint16_t>(header.rta_type & NLA_TYPE_MASK),
                  bytes.subspan(offset + kAttributeHeaderSize, header.rta_len - kAttributeHeaderSize)});
    offset = std::min(bytes.size(), offset + align4(header.rta_len));
  }
  return attributes;
}

core::Expected<Ack, std::string> parse_ack(const Message& message) {
  const core::ByteSpan payload = message.payload;
  if (payload.size() < sizeof(int32_t)) {
    return core::Unexpected(fmt::format("netlink error message has {} bytes, expected at least 4", payload.size()));
  }
  const auto code = read_at<int32_t>(payload, 0);
  if (code > 0) return core::Unexpected(fmt::format("netlink error code {} is positive", code));
  Ack ack{-code, {}};
  if ((message.flags & NLM_F_ACK_TLVS) == 0) return ack;

  // Extended ack: the request's header (and its payload unless capped),
  // then attributes.
  size_t offset = sizeof(int32_t);
  if (payload.size() - offset < kHeaderSize) {
    return core::Unexpected(std::string("extended ack lacks the request header"));
  }
  const auto request = read_at<nlmsghdr>(payload, offset);
  size_t echoed = kHeaderSize;
  if ((message.flags & NLM_F_CAPPED) == 0) {
    if (request.nlmsg_len < kHeaderSize) {
      return core::Unexpected(std::string("extended ack echoes a request shorter than a header"));
    }
    echoed = align4(request.nlmsg_len);
  }
  if (payload.size() - offset < echoed) {
    return core::Unexpected(
        fmt::format("extended ack echoes a {}-byte request, only {} bytes left", echoed, payload.size() - offset));
  }
  offset += echoed;
  auto attributes = split_attributes(payload.subspan(offset));
  if (!attributes) return core::Unexpected("extended ack: " + attributes.error());
  for (const Attribute& attribute : *attributes) {
    if (attribute.type != NLMSGERR_ATTR_MSG) continue;
    std::string text(reinterpret_cast<const char*>(attribute.value.data()), attribute.value.size());
    if (const size_t end = text.find('\0'); end != std::string::npos) text.resize(end);
    ack.message = std::move(text);
  }
  return ack;
}

core::Expected<RouteMessage, std::string> decode_route(core::ByteSpan payload) {
  if (payload.size() < sizeof(rtmsg)) {
    return core::Unexpected(
        fmt::format("route message has {} bytes, its header needs {}", payload.size(), sizeof(rtmsg)));
  }
  const auto header = read_at<rtmsg>(payload, 0);
  RouteMessage route;
  route.family = header.rtm_family;
  route.dst_len = header.rtm_dst_len;
  route.tos = header.rtm_tos;
  route.table = header.rtm_table;
  route.protocol = header.rtm_protocol;
  route.scope = header.rtm_scope;
  route.type = header.rtm_type;
  auto attributes = split_attributes(payload.subspan(align4(sizeof(rtmsg))));
  if (!attributes) return core::Unexpected("route message: " + attributes.error());
  if (route.family == AF_INET && route.dst_len > 32) {
    return core::Unexpected(fmt::format("IPv4 route with prefix length {}", route.dst_len));
  }
  for (const Attribute& attribute : *attributes) {
    switch (attribute.type) {
      case RTA_TABLE: {
        auto value = read_u32_attribute(attribute, "RTA_TABLE");
        if (!value) return core::Unexpected(value.error());
        route.table = *value;
        break;
      }
      case RTA_OIF: {
        auto value = read_u32_attribute(attribute, "RTA_OIF");
        if (!value) return core::Unexpected(value.error());
        route.oif = *value;
        break;
      }
      case RTA_PRIORITY: {
        auto value = read_u32_attribute(attribute, "RTA_PRIORITY");
        if (!value) return core::Unexpected(value.error());
        route.priority = *value;
        break;
      }
      case RTA_MULTIPATH:
        route.multipath = true;
        break;
      case RTA_DST:
      case RTA_GATEWAY: {
        if (route.family != AF_INET) break;
        const bool is_dst = attribute.type == RTA_DST;
        auto value = read_ipv4_attribute(attribute, is_dst ? "RTA_DST" : "RTA_GATEWAY");
        if (!value) return core::Unexpected(value.error());
        (is_dst ? route.destination : route.gateway) = *value;
        break;
      }
      default:
        break;
    }
  }
  return route;
}

RequestBuilder::RequestBuilder(uint16_t type, uint16_t flags) : type_(type), flags_(flags) {}

void RequestBuilder::append_fixed(const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  body_.insert(body_.end(), bytes, bytes + size);
  body_.resize(align4(body_.size()), 0);
}

void RequestBuilder::add_attribute(uint16_t type, const void* data, size_t size) {
  rtattr header{};
  header.rta_len = static_cast<uint16_t>(kAttributeHeaderSize + size);
  header.rta_type = type;
  append_fixed(&header, sizeof header);
  append_fixed(data, size);
}

void RequestBuilder::add_u32(uint16_t type, uint32_t value) { add_attribute(type, &value, sizeof value); }

std::vector<uint8_t> RequestBuilder::finish(uint32_t sequence, uint16_t extra_flags) const {
  nlmsghdr header{};
  header.nlmsg_len = static_cast<uint32_t>(kHeaderSize + body_.size());
  header.nlmsg_type = type_;
  header.nlmsg_flags = static_cast<uint16_t>(flags_ | extra_flags);
  header.nlmsg_seq = sequence;
  std::vector<uint8_t> datagram(header.nlmsg_len);
  std::memcpy(datagram.data(), &header, sizeof header);
  std::copy(body_.begin(), body_.end(), datagram.begin() + kHeaderSize);
  return datagram;
}

RequestBuilder encode_route(uint16_t type, uint16_t flags, const RouteMessage& route) {
  RequestBuilder builder(type, flags);
  rtmsg header{};
  header.rtm_family = route.family;
  header.rtm_dst_len = route.dst_len;
  header.rtm_tos = route.tos;
  // rtm_table has 8 bits; RTA_TABLE carries the full id.
  header.rtm_table = static_cast<uint8_t>(route.table < 256 ? route.table : RT_TABLE_UNSPEC);
  header.rtm_protocol = route.protocol;
  header.rtm_scope = route.scope;
  header.rtm_type = route.type;
  builder.append_fixed(&header, sizeof header);
  if (route.table != RT_TABLE_UNSPEC) builder.add_u32(RTA_TABLE, route.table);
  if (route.destination) {
    const uint32_t network_order = htonl(route.destination->value());
    builder.add_attribute(RTA_DST, &network_order, sizeof network_order);
  }
  if (route.gateway) {
    const uint32_t network_order = htonl(route.gateway->value());
    builder.add_attribute(RTA_GATEWAY, &network_order, sizeof network_order);
  }
  if (route.oif != 0) builder.add_u32(RTA_OIF, route.oif);
  if (route.priority != 0) builder.add_u32(RTA_PRIORITY, route.priority);
  return builder;
}

ReplyCollector::State ReplyCollector::fail(Error error) {
  error_ = std::move(error);
  state_ = State::failed;
  return state_;
}

ReplyCollector::State ReplyCollector::feed(core::ByteSpan datagram) {
  if (state_ != State::waiting) return state_;
  auto messages = split_messages(datagram);
  if (!messages) return fail(Error{0, "malformed netlink reply: " + messages.error()});
  for (const Message& message : *messages) {
    if (message.sequence != sequence_) continue;
    if ((message.flags & NLM_F_DUMP_INTR) != 0) interrupted_ = true;
    switch (message.type) {
      case NLMSG_NOOP:
        break;
      case NLMSG_OVERRUN:
        return fail(Error{0, "netlink reply overrun"});
      case NLMSG_ERROR: {
        auto ack = parse_ack(message);
        if (!ack) return fail(Error{0, "malformed netlink error message: " + ack.error()});
        if (ack->error != 0) return fail(Error{ack->error, ack->message});
        state_ = State::done;
        return state_;
      }
      case NLMSG_DONE: {
        if (kind_ != Kind::dump) return fail(Error{0, "NLMSG_DONE in answer to a plain request"});
        if (message.payload.size() < sizeof(int32_t)) {
          return fail(Error{0, fmt::format("NLMSG_DONE has {} bytes, expected at least 4", message.payload.size())});
        }
        const auto code = read_at<int32_t>(message.payload, 0);
        if (code > 0) return fail(Error{0, fmt::format("NLMSG_DONE code {} is positive", code)});
        if (code < 0) return fail(Error{-code, "dump failed"});
        state_ = State::done;
        return state_;
      }
      default:
        // A plain request asks for no data; anything besides its ack is
        // not part of the answer.
        if (kind_ == Kind::dump) {
          messages_.push_back(
              OwnedMessage{message.type, message.flags, {message.payload.begin(), message.payload.end()}});
        }
        break;
    }
  }
  return state_;
}

core::Expected<std::unique_ptr<NetlinkSocket>, std::string> NetlinkSocket::open(SocketOptions options) {
  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return core::Unexpected(fmt::format("cannot open a NETLINK_ROUTE socket: {}", errno_text(errno)));
  // Error texts from the kernel, and acks without an echo of the request.
  // Older kernels lack these options; the errno alone still works there.
  const int one = 1;
  (void)::setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
  (void)::setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0) {
    const int code = errno;
    ::close(fd);
    return core::Unexpected(fmt::format("cannot bind a NETLINK_ROUTE socket: {}", errno_text(code)));
  }
  return std::unique_ptr<NetlinkSocket>(new NetlinkSocket(fd, options));
}

NetlinkSocket::~NetlinkSocket() { ::close(fd_); }

core::Expected<Ok, Error> NetlinkSocket::send(const std::vector<uint8_t>& datagram) {
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  for (;;) {
    const ssize_t sent =
        ::sendto(fd_, datagram.data(), datagram.size(), 0, reinterpret_cast<const sockaddr*>(&kernel), sizeof kernel);
    if (sent >= 0) return Ok{};
    if (errno != EINTR) return core::Unexpected(Error{errno, "sending a netlink request"});
  }
}

core::Expected<Ok, Error> NetlinkSocket::receive(ReplyCollector& collector) {
  const auto deadline = std::chrono::steady_clock::now() + options_.reply_timeout;
  std::vector<uint8_t> buffer;
  while (collector.state() == ReplyCollector::State::waiting) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return core::Unexpected(
          Error{ETIMEDOUT, fmt::format("no netlink answer within {} ms", options_.reply_timeout.count())});
    }
    pollfd waiting{fd_, POLLIN, 0};
    const int ready = ::poll(&waiting, 1, static_cast<int>(left.count()));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return core::Unexpected(Error{errno, "waiting for a netlink answer"});
    }
    if (ready == 0) continue;
    // Peek at the size first: a dump datagram may exceed any fixed buffer.
    const ssize_t size = ::recv(fd_, nullptr, 0, MSG_PEEK | MSG_TRUNC);
    if (size < 0) {
      if (errno == EINTR) continue;
      return core::Unexpected(Error{errno, "reading a netlink answer"});
    }
    buffer.resize(static_cast<size_t>(size));
    sockaddr_nl from{};
    socklen_t from_size = sizeof from;
    const ssize_t got =
        ::recvfrom(fd_, buffer.data(), buffer.size(), 0, reinterpret_cast<sockaddr*>(&from), &from_size);
    if (got < 0) {
      if (errno == EINTR) continue;
      return core::Unexpected(Error{errno, "reading a netlink answer"});
    }
    // Only the kernel (port 0) answers our requests.
    if (from.nl_pid != 0) continue;
    collector.feed(core::ByteSpan(buffer.data(), static_cast<size_t>(got)));
  }
  if (collector.state() == ReplyCollector::State::failed) return core::Unexpected(collector.error());
  return Ok{};
}

core::Expected<Ok, Error> NetlinkSocket::request(const RequestBuilder& request) {
  const uint32_t sequence = next_sequence_++;
  if (auto sent = send(request.finish(sequence, NLM_F_REQUEST | NLM_F_ACK)); !sent) {
    return core::Unexpected(sent.error());
  }
  ReplyCollector collector(ReplyCollector::Kind::ack, sequence);
  return receive(collector);
}

core::Expected<std::vector<OwnedMessage>, Error> NetlinkSocket::dump(const RequestBuilder& request) {
  for (int attempt = 1;; ++attempt) {
    const uint32_t sequence = next_sequence_++;
    if (auto sent = send(request.finish(sequence, NLM_F_REQUEST | NLM_F_DUMP)); !sent) {
      return core::Unexpected(sent.error());
    }
    ReplyCollector collector(ReplyCollector::Kind::dump, sequence);
    if (auto received = receive(collector); !received) return core::Unexpected(received.error());
    if (!collector.interrupted()) return collector.take_messages();
    if (attempt == kDumpAttempts) {
      return core::Unexpected(Error{EINTR, fmt::format("dump inconsistent {} times in a row", kDumpAttempts)});
    }
  }
}

}  // namespace mesh::agent::netlink
