#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mesh::core {

// What a read found. `damaged`: a value is stored under the key but it is not
// the value that was put (a checksum mismatch, a truncated or unreadable
// file); its bytes are never handed out, and the caller must not treat the
// key as absent either, since an absent key usually means "nothing happened
// yet", which a damaged one does not.
enum class ReadStatus { found, absent, damaged };

struct StoredValue {
  ReadStatus status = ReadStatus::absent;
  std::string value;  // empty unless found

  bool found() const { return status == ReadStatus::found; }
  bool damaged() const { return status == ReadStatus::damaged; }
};

// Durable key/value state of one node. put() returns only once the value
// would survive a power cut (the agent's file storage fsyncs and renames
// atomically; the simulator's memory storage survives simulated crashes).
// Keys are short path-like names ("auth/boot", "kgroup/<target>/log").
// A node reaches its storage through ChecksummedStorage, which frames every
// value with a digest so that read() can report damage.
class Storage {
 public:
  virtual ~Storage() = default;

  virtual StoredValue read(std::string_view key) const = 0;
  // False on an I/O error (logged by the implementation); the caller must not
  // act as if the value were durable.
  virtual bool put(std::string_view key, std::string_view value) = 0;
  virtual bool remove(std::string_view key) = 0;
  // Keys starting with `prefix`, sorted.
  virtual std::vector<std::string> keys(std::string_view prefix) const = 0;

  // The value if found. Absent and damaged both read as nullopt: only for
  // tests and for state whose loss is harmless; protocol state uses read().
  std::optional<std::string> get(std::string_view key) const {
    StoredValue stored = read(key);
    if (!stored.found()) return std::nullopt;
    return std::move(stored.value);
  }
};

}  // namespace mesh::core
