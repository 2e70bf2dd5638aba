#include "core/persisted_node_set.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <utility>

#include "core/log.h"

namespace mesh::core {
namespace {

// The journal holds at most this share of the set (and at least
// kMinJournal ids) before it is folded into the snapshot.
constexpr size_t kJournalDivisor = 4;
constexpr size_t kMinJournal = 16;

}  // namespace

PersistedNodeSet::PersistedNodeSet(Storage& storage, std::string key, size_t max_nodes, std::string log_component,
                                   Counter& write_failures, Counter& unreadable)
    : storage_(storage),
      key_(std::move(key)),
      journal_prefix_(key_ + ".added/"),
      max_nodes_(max_nodes),
      log_component_(std::move(log_component)),
      write_failures_(write_failures) {
  if (read_stored(nodes_, unreadable)) compact();
}

bool PersistedNodeSet::read_stored(std::vector<NodeId>& ids, Counter& unreadable) {
  std::set<NodeId> read;
  bool rewrite = false;
  const StoredValue stored = storage_.read(key_);
  if (stored.damaged()) {
    // Only a hint for the first contacts after a restart: start as a first
    // boot would (but for the journal), and the next change rewrites the key.
    unreadable.add();
    log(log_component_).error("storage key {} is damaged; starting without the node ids kept there", key_);
    snapshot_stale_ = true;
  } else if (stored.found()) {
    const std::string_view text = stored.value;
    size_t start = 0;
    while (start < text.size() && read.size() < max_nodes_) {
      size_t comma = text.find(',', start);
      if (comma == std::string_view::npos) comma = text.size();
      const auto id = NodeId::parse(text.substr(start, comma - start));
      if (id && !id->is_unspecified()) {
        read.insert(*id);
      } else {
        unreadable.add();
        log(log_component_).warn("storage key {} holds a malformed node id; ignored", key_);
      }
      start = comma + 1;
    }
  }
  for (const std::string& entry : storage_.keys(journal_prefix_)) {
    rewrite = true;
    const StoredValue value = storage_.read(entry);
    const std::string_view name = std::string_view(entry).substr(journal_prefix_.size());
    const auto id = NodeId::parse(name);
    if (!value.found() || value.value != name || !id || id->is_unspecified()) {
      unreadable.add();
      log(log_component_).warn("storage key {} is damaged or malformed; ignored", entry);
      continue;
    }
    if (read.size() < max_nodes_) read.insert(*id);
  }
  // As the next write will store it: sorted, each id once, the bad ones gone.
  ids.assign(read.begin(), read.end());
  return rewrite;
}

void PersistedNodeSet::remember(NodeId id) {
  if (id.is_unspecified() || nodes_.size() >= max_nodes_) return;
  const auto at = std::lower_bound(nodes_.begin(), nodes_.end(), id);
  if (at != nodes_.end() && *at == id) return;
  nodes_.insert(at, id);
  if (snapshot_stale_ || journaled_.size() + 1 >= std::max(kMinJournal, nodes_.size() / kJournalDivisor)) {
    compact();
    return;
  }
  const std::string text = id.to_string();
  if (!storage_.put(journal_prefix_ + text, text)) {
    report_write_failure();
    snapshot_stale_ = true;
    return;
  }
  journaled_.insert(std::lower_bound(journaled_.begin(), journaled_.end(), id), id);
}

void PersistedNodeSet::forget(NodeId id) {
  const auto at = std::lower_bound(nodes_.begin(), nodes_.end(), id);
  if (at == nodes_.end() || *at != id) return;
  nodes_.erase(at);
  const auto journaled = std::lower_bound(journaled_.begin(), journaled_.end(), id);
  const bool was_journaled = journaled != journaled_.end() && *journaled == id;
  if (was_journaled) {
    // Its journal key goes first: a rewrite of the snapshot below, then a
    // crash before the journal's removal, must not bring it back.
    journaled_.erase(journaled);
    if (!storage_.remove(journal_prefix_ + id.to_string())) {
      report_write_failure();
      snapshot_stale_ = true;
    }
  }
  // An id remembered since the last rewrite is in the journal only; any
  // other is in the snapshot, which only a rewrite takes it out of.
  if (snapshot_stale_ || !was_journaled) compact();
}

void PersistedNodeSet::compact() {
  std::string text;
  for (NodeId id : nodes_) {
    if (!text.empty()) text += ',';
    text += id.to_string();
  }
  // The snapshot first: until the journal's removal lands, both name the
  // journaled ids, and a crash between the two loses none of them.
  if (!storage_.put(key_, text) || !storage_.remove_prefix(journal_prefix_)) {
    report_write_failure();
    snapshot_stale_ = true;
    return;
  }
  journaled_.clear();
  snapshot_stale_ = false;
}

void PersistedNodeSet::report_write_failure() {
  write_failures_.add();
  log(log_component_).error("cannot persist the node ids kept in storage key {}", key_);
}

}  // namespace mesh::core
