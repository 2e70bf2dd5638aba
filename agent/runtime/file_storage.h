#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/storage.h"

namespace mesh::agent {

// core::Storage on disk, synchronous: one file per key under a directory, the
// key's path components mapping to subdirectories ("kgroup/abc/log" is
// DIR/kgroup/abc/log). A change is made durable by commit(), alone (put,
// remove) or many at once (WriteBehindStorage's group commits): each new
// value is written to KEY.<n>.tmp and fsynced, then the renames over KEY and
// the unlinks of removed keys are made in order, then each directory touched
// is fsynced. So after a power cut a key holds either its old or its new
// value, never a torn one, and a put that returned true survives. A cut in
// the middle of a batch leaves some prefix of its renames and unlinks:
// journaling filesystems (ext4, xfs: what a Pi's card or disk carries)
// commit metadata operations in the order they were made.
// Keys must be relative, without empty, "." or ".." components, and must not
// end in ".tmp" (those names are the in-flight writes); other keys are
// refused (false / nullopt, logged).
class FileStorage final : public core::Storage {
 public:
  // Creates `directory` (mode 0700, parents too) if missing and removes
  // leftover .tmp files of writes interrupted by a crash. Throws
  // std::runtime_error naming the directory, the cause and the fix if it
  // cannot be created or written.
  explicit FileStorage(std::string directory);

  // One change of a commit: a new value for `key`, its removal, or (subtree)
  // the removal of every key under `key`, a prefix ending in '/'.
  struct Change {
    std::string key;
    std::optional<std::string> value;  // nullopt: remove
    bool subtree = false;
  };
  enum class CommitResult {
    durable,
    // Nothing on disk changed (a value could not be written: disk full, a
    // failing fsync of a new file): committing the same changes again is
    // safe, and may succeed.
    retry,
    // A rename, unlink or directory fsync failed: what the disk holds is
    // unknown, and after a failed fsync the kernel may report later ones as
    // successful (it drops the dirty pages). The process must stop and
    // recover from what the disk holds at restart.
    fatal,
  };
  // Makes `changes` durable, in order; logs what failed. Every key must be
  // valid (key_error() empty; an invalid one is a caller's bug, `fatal`).
  CommitResult commit(const std::vector<Change>& changes);

  core::StoredValue read(std::string_view key) const override;
  bool put(std::string_view key, std::string_view value) override;
  bool remove(std::string_view key) override;
  std::vector<std::string> keys(std::string_view prefix) const override;
  // Renames the subtree's directory out of the way in one durable step
  // (DIR/removed-<n>.tmp) and deletes it right away.
  bool remove_prefix(std::string_view prefix) override;

  // Deletes the subtrees commit() renamed away (removed-<n>.tmp); the
  // renames made them durable, so this only frees the space, and may run on
  // another thread than commit(), or never (the next start does it).
  void sweep_removed();

  const std::string& directory() const { return directory_; }

  // Why `key` is not a valid key, or empty if it is.
  static std::string key_error(std::string_view key);
  // Why `prefix` cannot be removed as a subtree (remove_prefix), or empty.
  static std::string prefix_error(std::string_view prefix);

 private:
  std::string path_of(std::string_view key) const { return directory_ + "/" + std::string(key); }

  std::string directory_;
  std::atomic<uint64_t> removed_count_{0};
};

}  // namespace mesh::agent
