#include "core/checksummed_storage.h"

#include <cstring>

#include <fmt/format.h>

#include "core/log.h"
#include "core/sha256.h"

namespace mesh::core {
namespace {

constexpr char kMagic[] = {'\xff', 'M', 'S', 'C'};
constexpr size_t kMagicSize = sizeof kMagic;
constexpr size_t kLengthSize = 4;
constexpr size_t kDigestSize = 32;
constexpr size_t kHeaderSize = kMagicSize + kLengthSize + kDigestSize;
constexpr std::string_view kFormatValue = "checksummed-1";

Sha256Digest digest_of(std::string_view key, std::string_view payload) {
  std::string covered;
  covered.reserve(key.size() + 1 + payload.size());
  covered.append(key);
  covered.push_back('\0');
  covered.append(payload);
  return sha256(covered);
}

bool has_magic(std::string_view stored) {
  return stored.size() >= kMagicSize && std::memcmp(stored.data(), kMagic, kMagicSize) == 0;
}

}  // namespace

std::string ChecksummedStorage::frame(std::string_view key, std::string_view payload) {
  std::string out;
  out.reserve(kHeaderSize + payload.size());
  out.append(kMagic, kMagicSize);
  const auto length = static_cast<uint32_t>(payload.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((length >> shift) & 0xff));
  const Sha256Digest digest = digest_of(key, payload);
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  out.append(payload);
  return out;
}

StoredValue ChecksummedStorage::unframe(std::string_view key, std::string_view stored) {
  const StoredValue damaged{ReadStatus::damaged, {}};
  if (stored.size() < kHeaderSize || !has_magic(stored)) return damaged;
  uint32_t length = 0;
  for (size_t i = 0; i < kLengthSize; ++i) length = (length << 8) | static_cast<uint8_t>(stored[kMagicSize + i]);
  if (stored.size() - kHeaderSize != length) return damaged;
  const std::string_view payload = stored.substr(kHeaderSize);
  const Sha256Digest digest = digest_of(key, payload);
  if (std::memcmp(digest.data(), stored.data() + kMagicSize + kLengthSize, kDigestSize) != 0) return damaged;
  return {ReadStatus::found, std::string(payload)};
}

Expected<std::unique_ptr<ChecksummedStorage>, std::string> ChecksummedStorage::open(Storage& inner) {
  std::unique_ptr<ChecksummedStorage> storage(new ChecksummedStorage(inner));
  const StoredValue marker = inner.read(kFormatKey);
  if (marker.found() && storage->read(kFormatKey).found()) return storage;
  if (marker.status != ReadStatus::absent) {
    // Present but damaged: the marker is written last, so the migration had
    // finished; rewrite it rather than re-frame (and so launder) damaged values.
    log("core").error("storage format marker is damaged; rewriting it key={}", kFormatKey);
  } else {
    size_t migrated = 0;
    for (const std::string& key : inner.keys("")) {
      const StoredValue raw = inner.read(key);
      if (!raw.found()) continue;  // an unreadable file stays unreadable: read() reports it damaged
      // Framed by an interrupted earlier run of this migration; a frame that
      // does not verify is left as it is (damaged), never framed as data.
      if (has_magic(raw.value)) continue;
      if (!inner.put(key, frame(key, raw.value))) {
        return Unexpected(fmt::format(
            "cannot rewrite storage key {} in the checksummed format (see the storage error logged above); free "
            "space or fix the permissions of the data directory and restart",
            key));
      }
      ++migrated;
    }
    if (migrated > 0) log("core").info("storage migrated to checksummed values keys={}", migrated);
  }
  if (!storage->put(kFormatKey, kFormatValue)) {
    return Unexpected(fmt::format(
        "cannot write the storage format marker {} (see the storage error logged above); free space or fix the "
        "permissions of the data directory and restart",
        kFormatKey));
  }
  return storage;
}

StoredValue ChecksummedStorage::read(std::string_view key) const {
  StoredValue raw = inner_.read(key);
  if (!raw.found()) return raw;
  StoredValue value = unframe(key, raw.value);
  if (value.damaged()) {
    log("core").error("storage value failed its checksum key={} bytes={}", key, raw.value.size());
  }
  return value;
}

bool ChecksummedStorage::put(std::string_view key, std::string_view value) {
  return inner_.put(key, frame(key, value));
}

bool ChecksummedStorage::remove(std::string_view key) { return inner_.remove(key); }

std::vector<std::string> ChecksummedStorage::keys(std::string_view prefix) const { return inner_.keys(prefix); }

}  // namespace mesh::core
