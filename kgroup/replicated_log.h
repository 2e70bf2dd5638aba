#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/node_id.h"
#include "core/storage.h"
#include "kgroup/log_snapshot.h"
#include "proto/kgroup.pb.h"

namespace mesh::kgroup {

// The durable state of one member of one group (one target, one epoch): the
// term it promised and to whom, how far it has applied, and its log entries.
// Every change is written through Storage before the call returns true, so a
// member acknowledges only what survives a power cut. Keys live under
// kgroup/<kind>/<escaped id>/<epoch>-<generation>/.
class ReplicatedLog {
 public:
  ReplicatedLog(core::Storage& storage, std::string_view target, uint64_t epoch, uint32_t generation);

  // What load() found stored but not readable as it was written (a checksum
  // mismatch, an entry or snapshot that does not parse or sits under the
  // wrong key, a hole between held entries, entries that do not follow on
  // from the snapshot, an applied point beyond what is held).
  enum class Damage {
    none,
    entries,  // log entries or the applied point; the promised term is known
    promise,  // the promised term itself (the meta record) is unknown
  };

  // Reads what an earlier incarnation persisted and reports the worst damage
  // (logged). Damaged parts are not loaded; the caller must not vote with
  // what is left (GroupReplica::start begins a rebuild).
  Damage load();

  // Since a rebuild began, durably: `entries` while the member re-learns its
  // entries from its leader, `promise` for the rest of the group's life.
  Damage rebuilding() const { return rebuilding_; }
  // Persists the rebuild marker first (so a crash from here on stays
  // rebuilding), then forgets the snapshot, every entry and the applied
  // point, and for promise damage the promise as well. False on a storage error; the
  // member is still rebuilding in memory.
  bool begin_rebuild(Damage damage);
  // The entries are re-learnt: removes the marker (promise damage never ends).
  bool finish_rebuild();

  uint64_t promised_term() const { return promised_term_; }
  core::NodeId promised_to() const { return promised_to_; }
  uint64_t applied() const { return applied_; }
  // Sequence number of the last entry held (0 if none).
  uint64_t last_seq() const { return entries_.empty() ? 0 : entries_.rbegin()->first; }
  size_t size() const { return entries_.size(); }

  bool promise(uint64_t term, core::NodeId to);
  bool set_applied(uint64_t seq);
  // Stores (or replaces) the entry at entry.seq(); seq 0 is refused.
  bool put(const proto::KgroupEntry& entry);
  const proto::KgroupEntry* get(uint64_t seq) const;
  // Removes every entry above `seq`.
  bool truncate_after(uint64_t seq);
  // Entries from `from` on, in order, until adding one would exceed
  // `max_bytes` (at least one entry if any exists). `next` gets the sequence
  // number to continue from, `more` whether entries remain.
  std::vector<proto::KgroupEntry> range(uint64_t from, size_t max_bytes, uint64_t& next, bool& more) const;
  // Forgets everything of this group, durably (decommissioning).
  bool erase_all();

  // The group's configuration, kept beside its log so a restarted node
  // knows which groups it serves.
  bool save_config(const proto::KgroupConfigRecord& record);
  // Every readable configuration stored on this node (unreadable ones are
  // logged and skipped).
  static std::vector<proto::KgroupConfigRecord> stored_configs(const core::Storage& storage);

  const std::string& prefix() const { return prefix_; }
  // kgroup/<kind>/<escaped id>/: every group of one target lives below it.
  static std::string target_prefix(std::string_view target);
  static std::string key_prefix(std::string_view target, uint64_t epoch, uint32_t generation);

  // Log compaction. The snapshot is stored under <prefix>snapshot, replacing
  // the previous one; only then may the entries it covers be removed
  // (compact_through), so a crash between the two leaves both.
  bool save_snapshot(const LogSnapshot& snapshot);
  // Removes every entry at or below `seq`.
  bool compact_through(uint64_t seq);
  // After load(): the stored snapshot, if any and undamaged (a damaged one is
  // logged and ignored). Finishes a compaction a crash interrupted: drops the
  // entries the snapshot covers and raises the applied point to it.
  std::optional<LogSnapshot> restore_snapshot();
  std::string snapshot_key() const { return prefix_ + "snapshot"; }

 private:
  bool write_meta();
  Damage load_meta();
  std::string entry_key(uint64_t seq) const;

  core::Storage& storage_;
  std::string prefix_;
  uint64_t promised_term_ = 0;
  core::NodeId promised_to_;
  uint64_t applied_ = 0;
  std::map<uint64_t, proto::KgroupEntry> entries_;
  Damage rebuilding_ = Damage::none;
};

}  // namespace mesh::kgroup
