// Storage frames (core/checksummed_storage.h): any bytes read back from a
// file either unframe to the payload that was put or are reported damaged,
// never crash; what unframes frames back to the very bytes that were read.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/checksummed_storage.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using mesh::core::ChecksummedStorage;
  using mesh::core::ReadStatus;
  constexpr std::string_view kKey = "kgroup/device/lamp/3-0/log/00000000000000000007";
  const std::string_view stored(reinterpret_cast<const char*>(data), size);
  const auto value = ChecksummedStorage::unframe(kKey, stored);
  if (value.status == ReadStatus::absent) std::abort();  // bytes were there: found or damaged
  if (value.found() && ChecksummedStorage::frame(kKey, value.value) != stored) std::abort();
  if (!value.found() && !value.value.empty()) std::abort();  // a damaged value's bytes are never handed out
  return 0;
}
