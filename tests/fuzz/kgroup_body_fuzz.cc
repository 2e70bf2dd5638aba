// Kgroup body decoder: any bytes either decode or are refused, never crash;
// whatever decodes re-encodes to bytes that decode to the same message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kgroup/kgroup_codec.h"
#include "proto/wire.pb.h"

namespace {

void ignore_protobuf_log(google::protobuf::LogLevel, const char*, int, const std::string&) {}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Hostile strings make protobuf log every invalid UTF-8 field; the decoder
  // refuses them, so the log is only noise here.
  static const bool quiet = (google::protobuf::SetLogHandler(&ignore_protobuf_log), true);
  (void)quiet;

  using namespace mesh::kgroup;
  auto decoded = decode_body(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!decoded) return 0;
  const std::string bytes = encode_body(*decoded);
  auto again = decode_body(bytes);
  if (!again) std::abort();
  // Canonical bytes are a fixed point of decode + encode.
  if (encode_body(*again) != bytes) std::abort();
  return 0;
}
