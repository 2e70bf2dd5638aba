#include "kgroup/replicated_log.h"

#include <algorithm>
#include <cstdio>

#include "core/log.h"

namespace mesh::kgroup {
namespace {

constexpr uint8_t kMetaVersion = 1;
constexpr size_t kMetaSize = 1 + 8 + 4 + 8;
constexpr size_t kSeqDigits = 20;
constexpr std::string_view kRebuildEntries = "entries";
constexpr std::string_view kRebuildPromise = "promise";

void put_u64(std::string& out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}
uint64_t get_u64(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<uint8_t>(in[at + static_cast<size_t>(i)]);
  return v;
}

// Storage keys are path components: keep letters, digits, '-' and '_', and
// escape every other byte (so no '/', '.' or '..' reaches the file system).
std::string escape(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || u == '-' || u == '_') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xf]);
    }
  }
  return out;
}

}  // namespace

std::string ReplicatedLog::target_prefix(std::string_view target) {
  const size_t colon = target.find(':');
  const std::string_view kind = colon == std::string_view::npos ? std::string_view("target") : target.substr(0, colon);
  const std::string_view id = colon == std::string_view::npos ? target : target.substr(colon + 1);
  return "kgroup/" + escape(kind) + "/" + escape(id) + "/";
}

std::string ReplicatedLog::key_prefix(std::string_view target, uint64_t epoch, uint32_t generation) {
  return target_prefix(target) + std::to_string(epoch) + "-" + std::to_string(generation) + "/";
}

ReplicatedLog::ReplicatedLog(core::Storage& storage, std::string_view target, uint64_t epoch, uint32_t generation)
    : storage_(storage), prefix_(key_prefix(target, epoch, generation)) {}

std::string ReplicatedLog::entry_key(uint64_t seq) const {
  char digits[kSeqDigits + 1];
  std::snprintf(digits, sizeof digits, "%020llu", static_cast<unsigned long long>(seq));
  return prefix_ + "log/" + digits;
}

ReplicatedLog::Damage ReplicatedLog::load_meta() {
  const core::StoredValue meta = storage_.read(prefix_ + "meta");
  if (meta.status == core::ReadStatus::absent) return Damage::none;
  if (meta.found() && meta.value.size() == kMetaSize && static_cast<uint8_t>(meta.value[0]) == kMetaVersion) {
    promised_term_ = get_u64(meta.value, 1, 8);
    promised_to_ = core::NodeId(static_cast<uint32_t>(get_u64(meta.value, 9, 4)));
    applied_ = get_u64(meta.value, 13, 8);
    return Damage::none;
  }
  core::log("kgroup").error("group meta damaged key={}meta", prefix_);
  return Damage::promise;
}

ReplicatedLog::Damage ReplicatedLog::load() {
  entries_.clear();
  Damage damage = Damage::none;
  if (const core::StoredValue marker = storage_.read(prefix_ + "rebuild"); !marker.damaged()) {
    rebuilding_ = !marker.found() ? Damage::none : marker.value == kRebuildEntries ? Damage::entries : Damage::promise;
  } else {
    rebuilding_ = Damage::promise;  // which rebuild is unknown: assume the one that never ends
  }
  damage = std::max(damage, load_meta());
  for (const std::string& key : storage_.keys(prefix_ + "log/")) {
    const core::StoredValue value = storage_.read(key);
    proto::KgroupEntry entry;
    if (!value.found() || !entry.ParseFromString(value.value) || entry.seq() == 0 || entry_key(entry.seq()) != key) {
      core::log("kgroup").error("log entry damaged key={}", key);
      damage = std::max(damage, Damage::entries);
      continue;
    }
    entries_[entry.seq()] = std::move(entry);
  }
  // Members store entries in order and remove them only from the top, so a
  // hole means an entry's file was lost.
  if (!entries_.empty() && entries_.rbegin()->first - entries_.begin()->first + 1 != entries_.size()) {
    core::log("kgroup").error("log has a hole group={} first={} last={} held={}", prefix_, entries_.begin()->first,
                              entries_.rbegin()->first, entries_.size());
    damage = std::max(damage, Damage::entries);
  }
  // Compaction stores its snapshot before it removes the entries the snapshot
  // covers, so the entries follow on from the snapshot (from 1 without one),
  // and what was applied is held in one or the other.
  uint64_t covered = 0;
  if (const core::StoredValue stored = storage_.read(snapshot_key()); stored.found() || stored.damaged()) {
    const auto snapshot = stored.found() ? decode_log_snapshot(stored.value) : std::nullopt;
    if (!snapshot) {
      core::log("kgroup").error("log snapshot damaged key={}", snapshot_key());
      return std::max(damage, Damage::entries);
    }
    covered = snapshot->last_seq;
  }
  const uint64_t first = entries_.empty() ? covered + 1 : entries_.begin()->first;
  const uint64_t held_through = entries_.empty() ? covered : entries_.rbegin()->first;
  if (first > covered + 1 || applied_ > std::max(held_through, covered)) {
    core::log("kgroup").error("log entries lost group={} snapshot_through={} first={} applied={}", prefix_, covered,
                              first, applied_);
    damage = std::max(damage, Damage::entries);
  }
  return damage;
}

bool ReplicatedLog::begin_rebuild(Damage damage) {
  rebuilding_ = std::max(rebuilding_, damage);
  if (rebuilding_ == Damage::none) return true;
  if (!storage_.put(prefix_ + "rebuild", rebuilding_ == Damage::entries ? kRebuildEntries : kRebuildPromise)) {
    return false;
  }
  // The snapshot goes too: what is rebuilt comes whole from the group (its
  // leader's snapshot, then entries), and a damaged snapshot left behind
  // would be found damaged again at every start.
  bool ok = storage_.remove(snapshot_key());
  for (const std::string& key : storage_.keys(prefix_ + "log/")) ok = storage_.remove(key) && ok;
  entries_.clear();
  applied_ = 0;
  if (rebuilding_ == Damage::promise) {
    promised_term_ = 0;
    promised_to_ = core::NodeId();
  }
  return write_meta() && ok;
}

bool ReplicatedLog::finish_rebuild() {
  if (rebuilding_ != Damage::entries) return rebuilding_ == Damage::none;
  if (!storage_.remove(prefix_ + "rebuild")) return false;
  rebuilding_ = Damage::none;
  return true;
}

bool ReplicatedLog::write_meta() {
  std::string meta;
  meta.push_back(static_cast<char>(kMetaVersion));
  put_u64(meta, promised_term_);
  for (int shift = 24; shift >= 0; shift -= 8)
    meta.push_back(static_cast<char>((promised_to_.value() >> shift) & 0xff));
  put_u64(meta, applied_);
  return storage_.put(prefix_ + "meta", meta);
}

bool ReplicatedLog::promise(uint64_t term, core::NodeId to) {
  const uint64_t old_term = promised_term_;
  const core::NodeId old_to = promised_to_;
  promised_term_ = term;
  promised_to_ = to;
  if (write_meta()) return true;
  promised_term_ = old_term;
  promised_to_ = old_to;
  return false;
}

bool ReplicatedLog::set_applied(uint64_t seq) {
  const uint64_t old = applied_;
  applied_ = seq;
  if (write_meta()) return true;
  applied_ = old;
  return false;
}

bool ReplicatedLog::put(const proto::KgroupEntry& entry) {
  if (entry.seq() == 0) return false;
  if (!storage_.put(entry_key(entry.seq()), entry.SerializeAsString())) return false;
  entries_[entry.seq()] = entry;
  return true;
}

const proto::KgroupEntry* ReplicatedLog::get(uint64_t seq) const {
  const auto it = entries_.find(seq);
  return it == entries_.end() ? nullptr : &it->second;
}

bool ReplicatedLog::truncate_after(uint64_t seq) {
  while (!entries_.empty() && entries_.rbegin()->first > seq) {
    const uint64_t last = entries_.rbegin()->first;
    if (!storage_.remove(entry_key(last))) return false;
    entries_.erase(last);
  }
  return true;
}

std::vector<proto::KgroupEntry> ReplicatedLog::range(uint64_t from, size_t max_bytes, uint64_t& next,
                                                     bool& more) const {
  std::vector<proto::KgroupEntry> out;
  size_t bytes = 0;
  auto it = entries_.lower_bound(from);
  next = from;
  for (; it != entries_.end(); ++it) {
    const size_t size = it->second.ByteSizeLong() + 4;
    if (!out.empty() && bytes + size > max_bytes) break;
    bytes += size;
    out.push_back(it->second);
    next = it->first + 1;
  }
  more = it != entries_.end();
  return out;
}

bool ReplicatedLog::erase_all() {
  const bool ok = storage_.remove_prefix(prefix_);
  entries_.clear();
  promised_term_ = 0;
  promised_to_ = core::NodeId();
  applied_ = 0;
  rebuilding_ = Damage::none;
  return ok;
}

bool ReplicatedLog::save_config(const proto::KgroupConfigRecord& record) {
  return storage_.put(prefix_ + "config", record.SerializeAsString());
}

std::vector<proto::KgroupConfigRecord> ReplicatedLog::stored_configs(const core::Storage& storage) {
  std::vector<proto::KgroupConfigRecord> out;
  for (const std::string& key : storage.keys("kgroup/")) {
    if (!key.ends_with("/config")) continue;
    const core::StoredValue value = storage.read(key);
    proto::KgroupConfigRecord record;
    // Skipping a damaged record is safe: the node does not rejoin that group,
    // as if it had crashed for good, and votes in it nowhere.
    if (!value.found() || !record.ParseFromString(value.value) ||
        key_prefix(record.group().target(), record.group().epoch(), record.group().generation()) + "config" != key) {
      core::log("kgroup").error("unreadable group config key={}", key);
      continue;
    }
    out.push_back(std::move(record));
  }
  return out;
}

bool ReplicatedLog::save_snapshot(const LogSnapshot& snapshot) {
  return snapshot.last_seq != 0 && storage_.put(snapshot_key(), encode_log_snapshot(snapshot));
}

bool ReplicatedLog::compact_through(uint64_t seq) {
  while (!entries_.empty() && entries_.begin()->first <= seq) {
    const uint64_t first = entries_.begin()->first;
    if (!storage_.remove(entry_key(first))) return false;
    entries_.erase(first);
  }
  return true;
}

std::optional<LogSnapshot> ReplicatedLog::restore_snapshot() {
  const auto stored = storage_.get(snapshot_key());
  if (!stored) return std::nullopt;
  auto snapshot = decode_log_snapshot(*stored);
  if (!snapshot) {
    core::log("kgroup").error("damaged log snapshot ignored key={}", snapshot_key());
    return std::nullopt;
  }
  // The snapshot was durable before any entry it covers was removed, and the
  // applied point it stands for may not have been written yet.
  if (!compact_through(snapshot->last_seq)) {
    core::log("kgroup").error("could not remove compacted entries key={}", snapshot_key());
  }
  if (applied_ < snapshot->last_seq && !set_applied(snapshot->last_seq)) {
    core::log("kgroup").error("could not persist applied point key={}meta", prefix_);
  }
  return snapshot;
}

}  // namespace mesh::kgroup
