#pragma once

#include <map>

#include "core/storage.h"

namespace mesh::core {

// Storage in memory: the simulator keeps one per node across simulated
// crashes, which is what "persisted" means there. Also handy in tests.
class MemoryStorage final : public Storage {
 public:
  StoredValue read(std::string_view key) const override;
  bool put(std::string_view key, std::string_view value) override;
  bool remove(std::string_view key) override;
  std::vector<std::string> keys(std::string_view prefix) const override;

  // Counts puts, so tests can check that state was persisted before an ack.
  uint64_t writes() const { return writes_; }
  // The stored bytes themselves, for tests that damage them (flip a bit,
  // truncate) the way a failing disk would; null if absent.
  std::string* raw(std::string_view key);

 private:
  std::map<std::string, std::string, std::less<>> data_;
  uint64_t writes_ = 0;
};

}  // namespace mesh::core
