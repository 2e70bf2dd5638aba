#include "core/persisted_node_set.h"

#include <algorithm>
#include <set>
#include <utility>

#include "core/log.h"

namespace mesh::core {

PersistedNodeSet::PersistedNodeSet(Storage& storage, std::string key, size_t max_nodes, std::string log_component,
                                   Counter& write_failures, Counter& unreadable)
    : storage_(storage),
      key_(std::move(key)),
      max_nodes_(max_nodes),
      log_component_(std::move(log_component)),
      write_failures_(write_failures) {
  const StoredValue stored = storage_.read(key_);
  if (stored.damaged()) {
    // Only a hint for the first contacts after a restart: start as a first
    // boot would, and the next remember() rewrites the key.
    unreadable.add();
    log(log_component_).error("storage key {} is damaged; starting without the node ids kept there", key_);
    return;
  }
  if (!stored.found()) return;
  const std::string* text = &stored.value;
  std::set<NodeId> read;
  size_t start = 0;
  while (start < text->size() && read.size() < max_nodes_) {
    size_t comma = text->find(',', start);
    if (comma == std::string::npos) comma = text->size();
    const auto id = NodeId::parse(std::string_view(*text).substr(start, comma - start));
    if (id && !id->is_unspecified()) {
      read.insert(*id);
    } else {
      unreadable.add();
      log(log_component_).warn("storage key {} holds a malformed node id; ignored", key_);
    }
    start = comma + 1;
  }
  // As the next write will store it: sorted, each id once, the bad ones gone.
  nodes_.assign(read.begin(), read.end());
  for (NodeId id : nodes_) {
    if (!text_.empty()) text_ += ',';
    text_ += id.to_string();
  }
}

void PersistedNodeSet::remember(NodeId id) {
  if (id.is_unspecified() || nodes_.size() >= max_nodes_) return;
  const auto at = std::lower_bound(nodes_.begin(), nodes_.end(), id);
  if (at != nodes_.end() && *at == id) return;
  const auto index = static_cast<size_t>(at - nodes_.begin());
  if (index == nodes_.size()) {
    if (!text_.empty()) text_ += ',';
    text_ += id.to_string();
  } else {
    text_.insert(text_offset(index), id.to_string() + ',');
  }
  nodes_.insert(at, id);
  write();
}

void PersistedNodeSet::forget(NodeId id) {
  const auto at = std::lower_bound(nodes_.begin(), nodes_.end(), id);
  if (at == nodes_.end() || *at != id) return;
  const auto index = static_cast<size_t>(at - nodes_.begin());
  const size_t length = id.to_string().size();
  if (index + 1 < nodes_.size()) {
    text_.erase(text_offset(index), length + 1);  // the id and the comma after it
  } else if (index > 0) {
    text_.erase(text_offset(index) - 1, length + 1);  // the comma before the last id, and the id
  } else {
    text_.clear();
  }
  nodes_.erase(at);
  write();
}

size_t PersistedNodeSet::text_offset(size_t index) const {
  size_t offset = 0;
  for (size_t i = 0; i < index; ++i) offset = text_.find(',', offset) + 1;
  return offset;
}

void PersistedNodeSet::write() {
  // The whole value at every change: O(N) bytes per new member.
  if (!storage_.put(key_, text_)) {
    write_failures_.add();
    log(log_component_).error("cannot persist the node ids kept in storage key {}", key_);
  }
}

}  // namespace mesh::core
