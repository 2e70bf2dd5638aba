#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/storage.h"

namespace mesh::agent {

// core::Storage on disk: one file per key under a directory, the key's path
// components mapping to subdirectories ("kgroup/abc/log" is
// DIR/kgroup/abc/log). put() writes KEY.tmp, fsyncs it, renames it over KEY
// and fsyncs the directory, so after a power cut a key holds either its old
// or its new value, never a torn one, and a put that returned true survives.
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

  core::StoredValue read(std::string_view key) const override;
  bool put(std::string_view key, std::string_view value) override;
  bool remove(std::string_view key) override;
  std::vector<std::string> keys(std::string_view prefix) const override;

  const std::string& directory() const { return directory_; }

  // Why `key` is not a valid key, or empty if it is.
  static std::string key_error(std::string_view key);

 private:
  std::string path_of(std::string_view key) const { return directory_ + "/" + std::string(key); }

  std::string directory_;
};

}  // namespace mesh::agent
