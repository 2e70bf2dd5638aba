#include "core/persisted_node_set.h"

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
  size_t start = 0;
  while (start < text->size() && nodes_.size() < max_nodes_) {
    size_t comma = text->find(',', start);
    if (comma == std::string::npos) comma = text->size();
    const auto id = NodeId::parse(std::string_view(*text).substr(start, comma - start));
    if (id && !id->is_unspecified()) {
      nodes_.insert(*id);
    } else {
      unreadable.add();
      log(log_component_).warn("storage key {} holds a malformed node id; ignored", key_);
    }
    start = comma + 1;
  }
}

void PersistedNodeSet::remember(NodeId id) {
  if (id.is_unspecified() || nodes_.size() >= max_nodes_ || !nodes_.insert(id).second) return;
  write();
}

void PersistedNodeSet::forget(NodeId id) {
  if (nodes_.erase(id)) write();
}

void PersistedNodeSet::write() {
  // Rewritten whole at every new id, O(N) per call as the mesh grows: one
  // buffer, and Ipv4Address::to_string() fits the small-string buffer.
  std::string text;
  text.reserve(nodes_.size() * 16);
  for (NodeId id : nodes_) {
    if (!text.empty()) text += ',';
    text += id.to_string();
  }
  if (!storage_.put(key_, text)) {
    write_failures_.add();
    log(log_component_).error("cannot persist the node ids kept in storage key {}", key_);
  }
}

}  // namespace mesh::core
