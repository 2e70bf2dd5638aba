#include "routine/catalog_sync.h"

#include <algorithm>

#include "core/log.h"
#include "routine/device_codec.h"

namespace mesh::routine {

CatalogSync::CatalogSync(core::Env& env, RoutineMessages& messages, core::Storage& storage,
                         membership::MemberView& view, core::Metrics& metrics, Catalog& catalog,
                         CatalogSyncOptions options)
    : env_(env),
      messages_(messages),
      storage_(storage),
      view_(view),
      catalog_(catalog),
      options_(options),
      timer_(env),
      entries_learned_(metrics.counter("catalog_entries_learned_total")),
      pages_sent_(metrics.counter("catalog_pages_sent_total")),
      file_mismatches_(metrics.counter("catalog_file_mismatches_total")) {
  messages_.on(proto::RoutineBody::kDigest, [this](const core::Message& message, const proto::RoutineBody& body) {
    on_digest(message, body.digest());
  });
  messages_.on(proto::RoutineBody::kChanges, [this](const core::Message& message, const proto::RoutineBody& body) {
    on_changes(message, body.changes());
  });
}

void CatalogSync::start() {
  const core::StoredValue copy = storage_.read(kStorageKey);
  if (copy.damaged()) {
    core::log("routine").warn("catalog copy on disk is damaged; fetching it from the mesh again");
  } else if (const auto stored = copy.found() ? std::optional(copy.value) : std::nullopt) {
    const auto snapshot = parse_message<proto::CatalogSnapshot>(*stored);
    std::vector<proto::CatalogEntry> entries;
    if (snapshot) entries.assign(snapshot->entries().begin(), snapshot->entries().end());
    if (!snapshot || !catalog_.reset(entries)) {
      // Never serve a damaged copy: start empty and fetch the list again.
      core::log("routine").warn("catalog copy on disk is unreadable; fetching it from the mesh again");
    } else if (!entries.empty()) {
      core::log("routine").info("catalog loaded version={} devices={}", catalog_.version(), catalog_.devices().size());
    }
  }
  timer_.start_periodic(options_.interval, [this] {
    // A node with no run-time change has nothing to offer: a node that has
    // some reaches it (its periodic digest, and the rumour of every new
    // change), so a mesh whose catalog only comes from the file sends none.
    if (catalog_.version() > 0) gossip(1);
  });
}

void CatalogSync::learn(const proto::CatalogEntry& entry) {
  if (entry.version() <= catalog_.version()) return;
  if (!catalog_.append(entry)) return;  // a gap: gossip fills it in order
  entries_learned_.add();
  persist();
  core::log("routine").info("catalog version={} {}{}", entry.version(), describe(entry.change()),
                            entry.refused() ? " (refused: " + entry.detail() + ")" : "");
  gossip(options_.fanout);
}

void CatalogSync::gossip(size_t count) {
  std::vector<core::NodeId> peers;
  for (const auto& member : view_.live_members()) {
    if (member.id != messages_.self()) peers.push_back(member.id);
  }
  for (size_t i = 0; i < count && !peers.empty(); ++i) {
    const size_t pick = env_.rng().below(peers.size());
    send_digest(peers[pick]);
    peers.erase(peers.begin() + static_cast<std::ptrdiff_t>(pick));
  }
}

void CatalogSync::send_digest(core::NodeId to) {
  proto::RoutineBody body;
  body.mutable_digest()->set_version(catalog_.version());
  body.mutable_digest()->set_file_digest(catalog_.file_digest());
  messages_.send(to, body);
}

void CatalogSync::on_digest(const core::Message& message, const proto::CatalogDigest& digest) {
  check_file(message.src, digest.file_digest());
  if (digest.version() > catalog_.version()) {
    send_digest(message.src);  // the peer is ahead: ask it for what we lack
    return;
  }
  if (digest.version() == catalog_.version()) return;
  proto::RoutineBody body;
  proto::CatalogChanges& changes = *body.mutable_changes();
  changes.set_latest(catalog_.version());
  size_t bytes = 0;
  for (uint64_t v = digest.version() + 1; v <= catalog_.version(); ++v) {
    const auto& entry = catalog_.entries()[v - 1];
    const size_t size = entry.ByteSizeLong();
    if (changes.entries_size() > 0 && bytes + size > options_.max_page_bytes) break;
    *changes.add_entries() = entry;
    bytes += size;
  }
  pages_sent_.add();
  messages_.send(message.src, body);
}

void CatalogSync::on_changes(const core::Message& message, const proto::CatalogChanges& changes) {
  const uint64_t before = catalog_.version();
  for (const auto& entry : changes.entries()) {
    if (entry.version() != catalog_.version() + 1) continue;
    if (catalog_.append(entry)) entries_learned_.add();
  }
  if (catalog_.version() == before) return;
  persist();
  core::log("routine").info("catalog version={} from={} (was {})", catalog_.version(), message.src.to_string(),
                            before);
  if (changes.latest() > catalog_.version()) send_digest(message.src);  // next page
  gossip(options_.fanout);
}

void CatalogSync::persist() {
  proto::CatalogSnapshot snapshot;
  for (const auto& entry : catalog_.entries()) *snapshot.add_entries() = entry;
  if (!storage_.put(kStorageKey, snapshot.SerializeAsString())) {
    core::log("routine").error("cannot persist the catalog (version {}); it is fetched again after a restart",
                               catalog_.version());
  }
}

void CatalogSync::check_file(core::NodeId peer, const std::string& digest) {
  if (digest == catalog_.file_digest() || !warned_file_.insert(peer).second) return;
  file_mismatches_.add();
  core::log("routine").warn(
      "node {} has a different catalog file than this node: deploy the same catalog file on every node", peer.to_string());
}

}  // namespace mesh::routine
