#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"
#include "core/storage.h"

namespace mesh::core {

// Storage that detects damage: every value is stored framed as
//   magic "\xff" "MSC" (4 bytes) | payload length (u32, big endian) |
//   SHA-256 of (key, a zero byte, payload) (32 bytes) | payload
// and read() reports `damaged` for a frame whose magic, length or digest is
// wrong (a flipped bit, a truncated or empty file, a file renamed to another
// key), never its bytes. SHA-256 rather than CRC32C: it is already linked
// (OpenSSL), values are small, and migration below relies on a legacy value
// never passing for a frame by chance. The leading 0xff also keeps frames
// apart from every legacy value: it is an invalid protobuf tag, and no other
// stored format starts with it.
//
// Deployments written before framing hold bare values. open() rewrites each
// of them framed and only then writes the format marker key, so a crash
// mid-way re-runs the migration: values already framed verify and are kept,
// bare ones are framed. Once the marker exists, a bare value is damage.
class ChecksummedStorage final : public Storage {
 public:
  static constexpr std::string_view kFormatKey = "storage/format";

  // Frames `inner` (migrating it if needed). The error names the key that
  // could not be rewritten.
  static Expected<std::unique_ptr<ChecksummedStorage>, std::string> open(Storage& inner);

  StoredValue read(std::string_view key) const override;
  bool put(std::string_view key, std::string_view value) override;
  bool remove(std::string_view key) override;
  std::vector<std::string> keys(std::string_view prefix) const override;
  bool remove_prefix(std::string_view prefix) override { return inner_.remove_prefix(prefix); }
  void after_durable(Action action) override { inner_.after_durable(std::move(action)); }

  // The framing on its own, for tests and tools.
  static std::string frame(std::string_view key, std::string_view payload);
  // The payload of a valid frame of `key`; damaged otherwise.
  static StoredValue unframe(std::string_view key, std::string_view stored);

 private:
  explicit ChecksummedStorage(Storage& inner) : inner_(inner) {}

  Storage& inner_;
};

}  // namespace mesh::core
