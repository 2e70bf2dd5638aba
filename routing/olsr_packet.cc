#include "routing/olsr_packet.h"

namespace mesh::routing::olsr {
namespace {

class Reader {
 public:
  explicit Reader(core::ByteSpan bytes) : bytes_(bytes) {}
  size_t remaining() const { return bytes_.size() - pos_; }
  bool u8(uint8_t& v) {
    if (remaining() < 1) return false;
    v = bytes_[pos_++];
    return true;
  }
  bool u16(uint16_t& v) {
    if (remaining() < 2) return false;
    v = static_cast<uint16_t>((bytes_[pos_] << 8) | bytes_[pos_ + 1]);
    pos_ += 2;
    return true;
  }
  bool address(core::Ipv4Address& a) {
    if (remaining() < 4) return false;
    a = core::Ipv4Address((uint32_t{bytes_[pos_]} << 24) | (uint32_t{bytes_[pos_ + 1]} << 16) |
                          (uint32_t{bytes_[pos_ + 2]} << 8) | bytes_[pos_ + 3]);
    pos_ += 4;
    return true;
  }
  bool skip(size_t n) {
    if (remaining() < n) return false;
    pos_ += n;
    return true;
  }
  core::ByteSpan take(size_t n) {
    auto part = bytes_.subspan(pos_, n);
    pos_ += n;
    return part;
  }

 private:
  core::ByteSpan bytes_;
  size_t pos_ = 0;
};

void put_u16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}
void put_address(std::vector<uint8_t>& out, core::Ipv4Address a) {
  const uint32_t v = a.value();
  out.push_back(static_cast<uint8_t>(v >> 24));
  out.push_back(static_cast<uint8_t>(v >> 16));
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}
void patch_u16(std::vector<uint8_t>& out, size_t at, size_t v) {
  out[at] = static_cast<uint8_t>(v >> 8);
  out[at + 1] = static_cast<uint8_t>(v);
}

// The decoders below check a body and, given somewhere to put it, decode it:
// scan_packet() checks every body of a packet without allocating, and
// decode_message() decodes the ones it is asked for.

// A list of addresses filling the whole of `r`.
bool read_addresses(Reader& r, std::vector<core::Ipv4Address>* out) {
  if (r.remaining() % 4 != 0) return false;
  if (out == nullptr) return true;
  out->reserve(r.remaining() / 4);
  while (r.remaining() > 0) {
    core::Ipv4Address a;
    r.address(a);
    out->push_back(a);
  }
  return true;
}

bool decode_hello(Reader r, Hello* hello) {
  // Reserved(2) Htime(1) Willingness(1), then link blocks (§6.1).
  uint8_t htime = 0;
  uint8_t willingness = 0;
  if (!r.skip(2) || !r.u8(htime) || !r.u8(willingness)) return false;
  if (hello != nullptr) {
    hello->htime = htime;
    hello->willingness = willingness;
  }
  while (r.remaining() > 0) {
    uint8_t link_code = 0;
    uint16_t size = 0;
    if (!r.u8(link_code) || !r.skip(1) || !r.u16(size)) return false;
    // Link Message Size counts from the link code to the next link code.
    if (size < 4 || size - 4u > r.remaining()) return false;
    Reader addresses(r.take(size - 4u));
    if (hello == nullptr) {
      if (!read_addresses(addresses, nullptr)) return false;
      continue;
    }
    LinkGroup group;
    group.link_code = link_code;
    if (!read_addresses(addresses, &group.neighbours)) return false;
    hello->links.push_back(std::move(group));
  }
  return true;
}

bool decode_tc(Reader r, Tc* tc) {
  // ANSN(2) Reserved(2), then advertised neighbour main addresses (§9.1).
  uint16_t ansn = 0;
  if (!r.u16(ansn) || !r.skip(2)) return false;
  if (tc != nullptr) tc->ansn = ansn;
  return read_addresses(r, tc != nullptr ? &tc->advertised : nullptr);
}

bool decode_hna(Reader r, Hna* hna) {
  if (r.remaining() % 8 != 0) return false;
  if (hna == nullptr) return true;
  while (r.remaining() > 0) {
    HnaEntry entry;
    r.address(entry.network);
    r.address(entry.netmask);
    hna->networks.push_back(entry);
  }
  return true;
}

// Checks the body of a message of `type`, and decodes it into `message`
// unless that is null.
bool decode_body(uint8_t type, core::ByteSpan bytes, Message* message) {
  Reader body(bytes);
  switch (type) {
    case static_cast<uint8_t>(MessageType::hello):
      return decode_hello(body, message != nullptr ? &message->body.emplace<Hello>() : nullptr);
    case static_cast<uint8_t>(MessageType::tc):
      return decode_tc(body, message != nullptr ? &message->body.emplace<Tc>() : nullptr);
    case static_cast<uint8_t>(MessageType::mid):
      return read_addresses(body, message != nullptr ? &message->body.emplace<Mid>().interfaces : nullptr);
    case static_cast<uint8_t>(MessageType::hna):
      return decode_hna(body, message != nullptr ? &message->body.emplace<Hna>() : nullptr);
    default:
      if (message != nullptr) message->body.emplace<OpaqueBody>().bytes.assign(bytes.begin(), bytes.end());
      return true;
  }
}

size_t body_size(const Message& message) {
  struct Sizer {
    size_t operator()(const Hello& h) const {
      size_t n = 4;
      for (const auto& g : h.links) n += 4 + 4 * g.neighbours.size();
      return n;
    }
    size_t operator()(const Tc& t) const { return 4 + 4 * t.advertised.size(); }
    size_t operator()(const Mid& m) const { return 4 * m.interfaces.size(); }
    size_t operator()(const Hna& h) const { return 8 * h.networks.size(); }
    size_t operator()(const OpaqueBody& o) const { return o.bytes.size(); }
  };
  return std::visit(Sizer{}, message.body);
}

}  // namespace

std::string_view to_string(DecodeError error) {
  switch (error) {
    case DecodeError::truncated:
      return "truncated";
    case DecodeError::length_mismatch:
      return "length_mismatch";
    case DecodeError::no_messages:
      return "no_messages";
    case DecodeError::bad_message_size:
      return "bad_message_size";
    case DecodeError::bad_block:
      return "bad_block";
  }
  return "unknown";
}

std::optional<DecodeError> scan_packet(core::ByteSpan datagram, uint16_t& seq, std::vector<ScannedMessage>& messages) {
  messages.clear();
  Reader r(datagram);
  uint16_t length = 0;
  if (!r.u16(length) || !r.u16(seq)) return DecodeError::truncated;
  if (length != datagram.size()) return DecodeError::length_mismatch;
  if (r.remaining() == 0) return DecodeError::no_messages;
  while (r.remaining() > 0) {
    if (r.remaining() < kMessageHeaderSize) return DecodeError::truncated;
    ScannedMessage m;
    uint16_t size = 0;
    r.u8(m.type);
    r.u8(m.vtime);
    r.u16(size);
    r.address(m.originator);
    r.u8(m.ttl);
    r.u8(m.hop_count);
    r.u16(m.seq);
    if (size < kMessageHeaderSize || size - kMessageHeaderSize > r.remaining()) return DecodeError::bad_message_size;
    m.body = r.take(size - kMessageHeaderSize);
    if (!decode_body(m.type, m.body, nullptr)) return DecodeError::bad_block;
    messages.push_back(m);
  }
  return std::nullopt;
}

Message decode_message(const ScannedMessage& scanned) {
  Message m;
  static_cast<MessageHeader&>(m) = scanned;
  decode_body(scanned.type, scanned.body, &m);
  return m;
}

core::Expected<Packet, DecodeError> decode_packet(core::ByteSpan datagram) {
  Packet packet;
  std::vector<ScannedMessage> scanned;
  if (auto error = scan_packet(datagram, packet.seq, scanned)) return core::Unexpected{*error};
  packet.messages.reserve(scanned.size());
  for (const ScannedMessage& m : scanned) packet.messages.push_back(decode_message(m));
  return packet;
}

size_t encoded_size(const Message& message) { return kMessageHeaderSize + body_size(message); }

void append_message(const Message& message, std::vector<uint8_t>& out) {
  out.push_back(message.type);
  out.push_back(message.vtime);
  put_u16(out, static_cast<uint16_t>(encoded_size(message)));
  put_address(out, message.originator);
  out.push_back(message.ttl);
  out.push_back(message.hop_count);
  put_u16(out, message.seq);
  struct Writer {
    std::vector<uint8_t>& out;
    void operator()(const Hello& h) const {
      put_u16(out, 0);
      out.push_back(h.htime);
      out.push_back(h.willingness);
      for (const auto& group : h.links) {
        out.push_back(group.link_code);
        out.push_back(0);
        put_u16(out, static_cast<uint16_t>(4 + 4 * group.neighbours.size()));
        for (auto a : group.neighbours) put_address(out, a);
      }
    }
    void operator()(const Tc& t) const {
      put_u16(out, t.ansn);
      put_u16(out, 0);
      for (auto a : t.advertised) put_address(out, a);
    }
    void operator()(const Mid& m) const {
      for (auto a : m.interfaces) put_address(out, a);
    }
    void operator()(const Hna& h) const {
      for (const auto& e : h.networks) {
        put_address(out, e.network);
        put_address(out, e.netmask);
      }
    }
    void operator()(const OpaqueBody& o) const { out.insert(out.end(), o.bytes.begin(), o.bytes.end()); }
  };
  std::visit(Writer{out}, message.body);
}

std::vector<uint8_t> encode_packet(const Packet& packet) {
  std::vector<uint8_t> out;
  put_u16(out, 0);
  put_u16(out, packet.seq);
  for (const auto& m : packet.messages) append_message(m, out);
  patch_u16(out, 0, out.size());
  return out;
}

}  // namespace mesh::routing::olsr
