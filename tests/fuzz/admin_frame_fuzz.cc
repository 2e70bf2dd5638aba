// Admin socket input: a stream arriving in arbitrary pieces is reassembled
// into frames and each frame parsed as an AdminRequest. Nothing a client
// sends may crash the agent; a parsed request must survive a frame round trip.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

// Also declares protobuf's SetLogHandler.
#include "proto/admin.pb.h"
#include "proto/frame.h"
#include "tests/fuzz/quiet_protobuf.h"

namespace {

void check_round_trip(const mesh::proto::AdminRequest& request) {
  std::string serialized;
  if (!request.SerializeToString(&serialized)) return;
  std::string stream;
  if (!mesh::proto::append_frame(serialized, stream)) std::abort();
  mesh::proto::FrameReader reader;
  if (!reader.feed(stream)) std::abort();
  auto frame = reader.next();
  if (!frame || *frame != serialized || reader.buffered() != 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mesh::fuzz::quiet_protobuf_log();
  if (size == 0) return 0;

  // The first byte chooses how the rest is cut into reads, so the fuzzer
  // explores piece boundaries as well as contents.
  const size_t piece = 1 + data[0] % 64;
  const std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);

  mesh::proto::FrameReader reader;
  size_t fed = 0;
  for (size_t at = 0; at < stream.size(); at += piece) {
    const std::string_view chunk = stream.substr(at, piece);
    if (!reader.feed(chunk)) break;
    fed += chunk.size();
    while (auto frame = reader.next()) {
      mesh::proto::AdminRequest request;
      if (request.ParseFromString(*frame)) check_round_trip(request);
    }
    if (reader.error() != mesh::proto::FrameReader::Error::none) break;
  }
  // Whatever was not consumed as whole frames is still buffered, never lost
  // or invented.
  if (reader.error() == mesh::proto::FrameReader::Error::none && reader.buffered() > fed) std::abort();
  return 0;
}
