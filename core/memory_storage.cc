#include "core/memory_storage.h"

namespace mesh::core {

StoredValue MemoryStorage::read(std::string_view key) const {
  auto it = data_.find(key);
  if (it == data_.end()) return {};
  return {ReadStatus::found, it->second};
}

std::string* MemoryStorage::raw(std::string_view key) {
  auto it = data_.find(key);
  return it == data_.end() ? nullptr : &it->second;
}

bool MemoryStorage::put(std::string_view key, std::string_view value) {
  auto it = data_.find(key);
  if (it == data_.end()) {
    data_.emplace(std::string(key), std::string(value));
  } else {
    it->second.assign(value);
  }
  ++writes_;
  return true;
}

bool MemoryStorage::remove(std::string_view key) {
  auto it = data_.find(key);
  if (it == data_.end()) return true;
  data_.erase(it);
  return true;
}

std::vector<std::string> MemoryStorage::keys(std::string_view prefix) const {
  std::vector<std::string> out;
  for (auto it = data_.lower_bound(prefix); it != data_.end() && it->first.starts_with(prefix); ++it) {
    out.push_back(it->first);
  }
  return out;
}

}  // namespace mesh::core
