#pragma once

#include <functional>
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

// Durable key/value state of one node. Keys are short path-like names
// ("auth/boot", "kgroup/<target>/log"). A node reaches its storage through
// ChecksummedStorage, which frames every value with a digest so that read()
// can report damage.
//
// Durability ("output commit"). A change (put, remove) is visible to read()
// and keys() as soon as the call returns, but a storage may make it durable
// later: the agent's WriteBehindStorage commits changes in the background, in
// the order they were made, many per fsync, so that a slow disk never stalls
// the event loop. Protocol code therefore never waits for the disk; instead
// whatever a node shows the outside world (a message that may depend on its
// stored state, an answer to meshctl, a command to a device) goes out through
// after_durable(). A power cut can lose the newest changes, but never one
// whose effects anybody outside the node has seen, which is all the safety
// arguments of the protocols need ("persist before you acknowledge"): to
// every other node the crash happened just before those changes.
class Storage {
 public:
  using Action = std::function<void()>;

  virtual ~Storage() = default;

  virtual StoredValue read(std::string_view key) const = 0;
  // False if the change is refused (a key the storage cannot hold, an I/O
  // error of a storage that writes synchronously; logged by the
  // implementation): the caller must not act as if it were made. True: the
  // change is made, and durable once after_durable() says so.
  virtual bool put(std::string_view key, std::string_view value) = 0;
  virtual bool remove(std::string_view key) = 0;
  // Keys starting with `prefix`, sorted.
  virtual std::vector<std::string> keys(std::string_view prefix) const = 0;
  // Removes every key starting with `prefix`, which ends in '/' (a whole
  // subtree, e.g. a retired group's "kgroup/<target>/<epoch>-<gen>/").
  // The agent's storage makes it one change, as cheap as one remove(), and a
  // power cut leaves either every key or none; this default removes them one
  // by one (a cut may leave some).
  virtual bool remove_prefix(std::string_view prefix) {
    bool ok = true;
    for (const std::string& key : keys(prefix)) ok = remove(key) && ok;
    return ok;
  }

  // Runs `action` on the node's thread once every change made before this
  // call is durable. Actions run in the order given; one given while nothing
  // is pending (no change waiting for the disk, no earlier action waiting)
  // runs before after_durable() returns. A storage that is destroyed, or a
  // node that crashes, drops the actions still waiting. Storages that write
  // synchronously run every action at once.
  virtual void after_durable(Action action) { action(); }

  // The value if found. Absent and damaged both read as nullopt: only for
  // tests and for state whose loss is harmless; protocol state uses read().
  std::optional<std::string> get(std::string_view key) const {
    StoredValue stored = read(key);
    if (!stored.found()) return std::nullopt;
    return std::move(stored.value);
  }
};

}  // namespace mesh::core
