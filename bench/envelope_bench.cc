// Cost of one agent message on the wire path: encode the Envelope, seal it
// (HMAC-SHA256, core/packet_auth.h), open it, decode it; and the whole round
// trip. BM_MemcpyBaseline copies the same number of bytes as a sealed
// datagram in the same run, so results read as ratios against it, e.g.
// "a round trip costs N memcpys", which survives a change of machine.
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/message.h"
#include "core/packet_auth.h"
#include "proto/wire.pb.h"
#include "routing/envelope_codec.h"

namespace {

using mesh::core::ByteSpan;
using mesh::core::Message;
using mesh::core::MeshKey;
using mesh::core::NodeId;
using mesh::core::PacketAuth;

constexpr size_t kPayloadBytes = 64;
// How many datagrams BM_Open seals ahead of time; opening one twice would be
// refused as a replay.
constexpr size_t kPresealed = 4096;

const NodeId kSender = mesh::core::Ipv4Address::from_octets(10, 0, 0, 1);
const NodeId kReceiver = mesh::core::Ipv4Address::from_octets(10, 0, 0, 2);

MeshKey key() {
  return MeshKey::from_hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f").value();
}

// An echo request with a 64-byte payload: what `meshctl ping` sends.
Message typical_message() {
  mesh::proto::EchoBody body;
  body.mutable_request()->set_payload(std::string(kPayloadBytes, '\x5a'));
  Message m;
  m.src = kSender;
  m.dst = kReceiver;
  m.kind = mesh::core::MessageKind::request;
  m.msg_id = 0x0123456789abcdefULL;
  m.body_type = mesh::proto::Envelope::kEchoFieldNumber;
  m.body = body.SerializeAsString();
  m.ttl = 32;
  return m;
}

ByteSpan span_of(const std::string& s) { return ByteSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

void BM_MemcpyBaseline(benchmark::State& state) {
  PacketAuth auth(key(), kSender, 1);
  const std::vector<uint8_t> sealed = auth.seal(span_of(mesh::routing::encode_envelope(typical_message())));
  std::vector<uint8_t> copy(sealed.size());
  for (auto _ : state) {
    std::memcpy(copy.data(), sealed.data(), sealed.size());
    benchmark::DoNotOptimize(copy.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * sealed.size()));
  state.counters["bytes"] = static_cast<double>(sealed.size());
}
BENCHMARK(BM_MemcpyBaseline);

void BM_Encode(benchmark::State& state) {
  const Message m = typical_message();
  size_t size = 0;
  for (auto _ : state) {
    std::string bytes = mesh::routing::encode_envelope(m);
    size = bytes.size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["bytes"] = static_cast<double>(size);
}
BENCHMARK(BM_Encode);

void BM_Seal(benchmark::State& state) {
  const std::string encoded = mesh::routing::encode_envelope(typical_message());
  PacketAuth auth(key(), kSender, 1);
  for (auto _ : state) {
    std::vector<uint8_t> sealed = auth.seal(span_of(encoded));
    benchmark::DoNotOptimize(sealed);
  }
}
BENCHMARK(BM_Seal);

void BM_Open(benchmark::State& state) {
  const std::string encoded = mesh::routing::encode_envelope(typical_message());
  PacketAuth sender(key(), kSender, 1);
  std::vector<std::vector<uint8_t>> sealed;
  sealed.reserve(kPresealed);
  for (size_t i = 0; i < kPresealed; ++i) sealed.push_back(sender.seal(span_of(encoded)));
  auto receiver = std::make_unique<PacketAuth>(key(), kReceiver, 1);
  size_t next = 0;
  for (auto _ : state) {
    if (next == sealed.size()) {
      // A fresh receiver has seen no counter, so the batch opens again.
      state.PauseTiming();
      receiver = std::make_unique<PacketAuth>(key(), kReceiver, 1);
      next = 0;
      state.ResumeTiming();
    }
    auto opened = receiver->open(sealed[next++]);
    if (!opened) state.SkipWithError("open refused a fresh datagram");
    benchmark::DoNotOptimize(opened);
  }
}
BENCHMARK(BM_Open);

void BM_Decode(benchmark::State& state) {
  const std::string encoded = mesh::routing::encode_envelope(typical_message());
  for (auto _ : state) {
    auto decoded = mesh::routing::decode_envelope(span_of(encoded));
    if (!decoded) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(decoded);
  }
}
BENCHMARK(BM_Decode);

void BM_RoundTrip(benchmark::State& state) {
  const Message m = typical_message();
  PacketAuth sender(key(), kSender, 1);
  PacketAuth receiver(key(), kReceiver, 1);
  for (auto _ : state) {
    const std::string encoded = mesh::routing::encode_envelope(m);
    const std::vector<uint8_t> sealed = sender.seal(span_of(encoded));
    auto opened = receiver.open(sealed);
    if (!opened) {
      state.SkipWithError("open failed");
      break;
    }
    auto decoded = mesh::routing::decode_envelope(opened->payload);
    if (!decoded) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(decoded);
  }
}
BENCHMARK(BM_RoundTrip);

}  // namespace

BENCHMARK_MAIN();
