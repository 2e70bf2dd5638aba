#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "routing/olsr_packet.h"
#include "routing/olsr_vtime.h"

namespace mesh::routing::olsr {
namespace {

using core::Ipv4Address;

Ipv4Address ip(const char* text) { return *Ipv4Address::parse(text); }

// One record of the olsrd capture: the UDP payload and the lines tcpdump
// printed for it (without the address line).
struct CapturedPacket {
  int number = -1;
  std::vector<uint8_t> payload;
  std::vector<std::string> tcpdump;
};

std::vector<CapturedPacket> load_capture() {
  std::ifstream in(OLSR_VECTORS_FILE);
  std::vector<CapturedPacket> packets;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("packet ", 0) == 0) {
      packets.emplace_back();
      packets.back().number = std::stoi(line.substr(7));
    } else if (line.rfind("  hex ", 0) == 0) {
      const std::string hex = line.substr(6);
      for (size_t i = 0; i + 1 < hex.size(); i += 2) {
        packets.back().payload.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
      }
    } else if (line.rfind("  | ", 0) == 0 && line.find(".698 > ") == std::string::npos) {
      packets.back().tcpdump.push_back(line.substr(4));
    }
  }
  return packets;
}

std::string addresses_line(const std::vector<Ipv4Address>& addresses) {
  std::string out;
  for (auto a : addresses) out += (out.empty() ? "" : " ") + a.to_string();
  return out;
}

std::string seconds_text(uint8_t vtime) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3fs", core::to_seconds(decode_vtime(vtime)));
  return buf;
}

// Our decoding, printed the way tcpdump prints OLSR, so the capture's own
// decoding is the oracle.
std::vector<std::string> describe(const Packet& packet) {
  static const char* const kLinkTypes[] = {"Unspecified", "Asymmetric", "Symmetric", "Lost"};
  static const char* const kNeighbourTypes[] = {"Not-Neighbor", "Symmetric", "Symmetric-MPR", "Unknown"};
  std::vector<std::string> lines;
  char buf[160];
  for (const auto& m : packet.messages) {
    const char* name = m.type == 1 ? "Hello" : m.type == 2 ? "TC" : m.type == 3 ? "MID" : "HNA";
    std::snprintf(buf, sizeof buf, "%s Message (0x%02x), originator %s, ttl %d, hop %d", name, m.type,
                  m.originator.to_string().c_str(), m.ttl, m.hop_count);
    lines.push_back(buf);
    std::snprintf(buf, sizeof buf, "vtime %s, msg-seq 0x%04x, length %zu", seconds_text(m.vtime).c_str(), m.seq,
                  encoded_size(m));
    lines.push_back(buf);
    if (const auto* hello = std::get_if<Hello>(&m.body)) {
      std::snprintf(buf, sizeof buf, "hello-time %s, MPR willingness %d", seconds_text(hello->htime).c_str(),
                    hello->willingness);
      lines.push_back(buf);
      for (const auto& group : hello->links) {
        std::snprintf(buf, sizeof buf, "link-type %s, neighbor-type %s, len %zu",
                      kLinkTypes[static_cast<int>(link_type_of(group.link_code))],
                      kNeighbourTypes[neighbour_type_of(group.link_code)], 4 + 4 * group.neighbours.size());
        lines.push_back(buf);
        lines.push_back("neighbor");
        lines.push_back(addresses_line(group.neighbours));
      }
    } else if (const auto* tc = std::get_if<Tc>(&m.body)) {
      std::snprintf(buf, sizeof buf, "advertised neighbor seq 0x%04x", tc->ansn);
      lines.push_back(buf);
      lines.push_back("neighbor");
      lines.push_back(addresses_line(tc->advertised));
    } else if (const auto* mid = std::get_if<Mid>(&m.body)) {
      for (auto a : mid->interfaces) lines.push_back("interface address " + a.to_string());
    }
  }
  return lines;
}

TEST(OlsrCapture, EveryCapturedPacketDecodesAsTcpdumpDid) {
  const auto packets = load_capture();
  ASSERT_EQ(packets.size(), 12u) << "vector file " << OLSR_VECTORS_FILE;
  for (const auto& captured : packets) {
    SCOPED_TRACE("packet " + std::to_string(captured.number));
    auto decoded = decode_packet(captured.payload);
    ASSERT_TRUE(decoded) << to_string(decoded.error());
    EXPECT_EQ(describe(*decoded), captured.tcpdump);
  }
}

TEST(OlsrCapture, ReencodingGivesTheCapturedBytes) {
  for (const auto& captured : load_capture()) {
    SCOPED_TRACE("packet " + std::to_string(captured.number));
    auto decoded = decode_packet(captured.payload);
    ASSERT_TRUE(decoded);
    EXPECT_EQ(encode_packet(*decoded), captured.payload);
  }
}

// Packet 2 of the capture built from the RFC's field layout by hand, not by
// decoding: our encoder must produce olsrd's bytes for the same content.
TEST(OlsrGolden, HelloBuiltFromFieldsMatchesOlsrd) {
  Packet packet;
  packet.seq = 0xed51;
  Message m;
  m.type = static_cast<uint8_t>(MessageType::hello);
  m.vtime = encode_vtime(std::chrono::seconds(6));
  m.originator = ip("10.99.1.1");
  m.ttl = 1;
  m.hop_count = 0;
  m.seq = 0x4156;
  Hello hello;
  hello.htime = encode_vtime(std::chrono::seconds(2));
  hello.willingness = kWillDefault;
  hello.links.push_back({make_link_code(LinkType::symmetric, NeighbourType::symmetric), {ip("10.99.1.2")}});
  m.body = hello;
  packet.messages.push_back(m);
  const std::vector<uint8_t> expected = {0x00, 0x1c, 0xed, 0x51, 0x01, 0x86, 0x00, 0x18, 0x0a, 0x63,
                                         0x01, 0x01, 0x01, 0x00, 0x41, 0x56, 0x00, 0x00, 0x05, 0x03,
                                         0x06, 0x00, 0x00, 0x08, 0x0a, 0x63, 0x01, 0x02};
  EXPECT_EQ(encode_packet(packet), expected);
}

TEST(OlsrGolden, TcMidAndHnaLayout) {
  Packet packet;
  packet.seq = 7;
  Message tc{2, 0xe7, ip("10.0.0.1"), 255, 0, 9, Tc{0x0102, {ip("10.0.0.2"), ip("10.0.0.3")}}};
  Message mid{3, 0xe7, ip("10.0.0.1"), 255, 0, 10, Mid{{ip("10.1.0.1")}}};
  Message hna{4, 0xe7, ip("10.0.0.1"), 255, 0, 11, Hna{{{ip("192.168.5.0"), ip("255.255.255.0")}}}};
  packet.messages = {tc, mid, hna};
  const auto bytes = encode_packet(packet);
  const std::vector<uint8_t> expected = {
      0x00, 0x40, 0x00, 0x07,                                                  // length 64, seq 7
      0x02, 0xe7, 0x00, 0x18, 0x0a, 0x00, 0x00, 0x01, 0xff, 0x00, 0x00, 0x09,  // TC header, size 24
      0x01, 0x02, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x02, 0x0a, 0x00, 0x00, 0x03,  // ANSN, reserved, 2 addresses
      0x03, 0xe7, 0x00, 0x10, 0x0a, 0x00, 0x00, 0x01, 0xff, 0x00, 0x00, 0x0a,  // MID header, size 16
      0x0a, 0x01, 0x00, 0x01,                                                  // interface address
      0x04, 0xe7, 0x00, 0x14, 0x0a, 0x00, 0x00, 0x01, 0xff, 0x00, 0x00, 0x0b,  // HNA header, size 20
      0xc0, 0xa8, 0x05, 0x00, 0xff, 0xff, 0xff, 0x00};                         // network, netmask
  EXPECT_EQ(bytes, expected);
  auto decoded = decode_packet(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, packet);
}

TEST(OlsrCodec, UnknownMessageTypesAreKeptVerbatim) {
  Packet packet;
  Message custom{200, 0x86, ip("10.0.0.9"), 10, 2, 77, OpaqueBody{{1, 2, 3, 4, 5, 6, 7, 8}}};
  packet.messages = {custom};
  auto decoded = decode_packet(encode_packet(packet));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, packet);
}

TEST(OlsrCodec, MalformedPacketsAreRefused) {
  const auto good = load_capture().at(3).payload;  // HELLO with two link blocks
  ASSERT_TRUE(decode_packet(good));

  EXPECT_EQ(decode_packet(std::vector<uint8_t>{}).error(), DecodeError::truncated);
  EXPECT_EQ(decode_packet(std::vector<uint8_t>{0x00, 0x04, 0x00, 0x01}).error(), DecodeError::no_messages);

  auto longer = good;
  longer.push_back(0);
  EXPECT_EQ(decode_packet(longer).error(), DecodeError::length_mismatch);

  for (size_t cut = 4; cut < good.size(); ++cut) {
    std::vector<uint8_t> truncated(good.begin(), good.begin() + static_cast<long>(cut));
    truncated[0] = static_cast<uint8_t>(cut >> 8);
    truncated[1] = static_cast<uint8_t>(cut);
    EXPECT_FALSE(decode_packet(truncated)) << "cut at " << cut;
  }

  auto zero_size = good;
  zero_size[6] = 0;
  zero_size[7] = 0;
  EXPECT_EQ(decode_packet(zero_size).error(), DecodeError::bad_message_size);

  auto past_end = good;
  past_end[7] = 0x40;
  EXPECT_EQ(decode_packet(past_end).error(), DecodeError::bad_message_size);

  auto bad_link_size = good;
  bad_link_size[22] = 0;
  bad_link_size[23] = 0x07;  // link block size not a whole number of addresses
  EXPECT_EQ(decode_packet(bad_link_size).error(), DecodeError::bad_block);
}

TEST(OlsrCodec, MutatedPacketsNeverCrashAndDecodedOnesRoundTrip) {
  core::Rng rng(2026);
  const auto corpus = load_capture();
  int decoded_count = 0;
  for (int i = 0; i < 20000; ++i) {
    auto bytes = corpus[rng.below(corpus.size())].payload;
    const int edits = 1 + static_cast<int>(rng.below(4));
    for (int e = 0; e < edits; ++e) bytes[rng.below(bytes.size())] = static_cast<uint8_t>(rng.next_u64());
    auto decoded = decode_packet(bytes);
    if (decoded) {
      ++decoded_count;
      // Reserved fields are ignored on receipt and zeroed on sending, so the
      // bytes may differ; the content must not.
      auto again = decode_packet(encode_packet(*decoded));
      ASSERT_TRUE(again);
      EXPECT_EQ(*again, *decoded);
    }
  }
  EXPECT_GT(decoded_count, 0);
}

}  // namespace
}  // namespace mesh::routing::olsr
