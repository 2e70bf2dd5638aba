// Log compaction's durable pieces: the snapshot codec, and ReplicatedLog
// storing a snapshot, removing the entries it covers, and finishing a
// compaction that a crash interrupted.
#include "kgroup/log_snapshot.h"

#include <gtest/gtest.h>

#include "core/memory_storage.h"
#include "kgroup/replicated_log.h"

namespace mesh::kgroup {
namespace {

constexpr std::string_view kTarget = "device:lamp";

proto::KgroupEntry entry(uint64_t seq, uint64_t term) {
  proto::KgroupEntry e;
  e.set_seq(seq);
  e.set_term(term);
  e.set_data("v" + std::to_string(seq));
  return e;
}

size_t log_keys(const core::Storage& storage) {
  return storage.keys(ReplicatedLog::key_prefix(kTarget, 0, 0) + "log/").size();
}

LogSnapshot sample() { return LogSnapshot{40, 3, std::string("state\0with\nbytes", 16)}; }

TEST(LogSnapshot, EncodeDecodeRoundTrip) {
  const auto decoded = decode_log_snapshot(encode_log_snapshot(sample()));
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->last_seq, 40u);
  EXPECT_EQ(decoded->last_term, 3u);
  EXPECT_EQ(decoded->state, sample().state);
  // An empty state is a state.
  const auto empty = decode_log_snapshot(encode_log_snapshot(LogSnapshot{1, 1, ""}));
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->state, "");
}

TEST(LogSnapshot, DecoderRejectsEveryDamage) {
  const std::string good = encode_log_snapshot(sample());
  // Every flipped bit anywhere: version, digest or body.
  for (size_t at = 0; at < good.size(); ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good;
      bad[at] = static_cast<char>(bad[at] ^ (1 << bit));
      EXPECT_FALSE(decode_log_snapshot(bad).has_value()) << "byte " << at << " bit " << bit;
    }
  }
  // Every truncation and an extension.
  for (size_t size = 0; size < good.size(); ++size) {
    EXPECT_FALSE(decode_log_snapshot(std::string_view(good).substr(0, size)).has_value()) << "size " << size;
  }
  EXPECT_FALSE(decode_log_snapshot(good + "x").has_value());
  // A well-formed snapshot of no entry (last_seq 0) stands for nothing.
  EXPECT_FALSE(decode_log_snapshot(encode_log_snapshot(LogSnapshot{0, 1, "s"})).has_value());
}

TEST(ReplicatedLogSnapshot, CompactionSurvivesARestart) {
  core::MemoryStorage storage;
  {
    ReplicatedLog log(storage, kTarget, 0, 0);
    ASSERT_EQ(log.load(), ReplicatedLog::Damage::none);
    for (uint64_t s = 1; s <= 50; ++s) ASSERT_TRUE(log.put(entry(s, 3)));
    ASSERT_TRUE(log.set_applied(40));
    ASSERT_TRUE(log.save_snapshot(sample()));
    ASSERT_TRUE(log.compact_through(40));
    EXPECT_EQ(log.size(), 10u);
    EXPECT_EQ(log.get(40), nullptr);
    EXPECT_EQ(log_keys(storage), 10u);
  }
  ReplicatedLog again(storage, kTarget, 0, 0);
  ASSERT_EQ(again.load(), ReplicatedLog::Damage::none);
  const auto snapshot = again.restore_snapshot();
  ASSERT_TRUE(snapshot.has_value());
  EXPECT_EQ(snapshot->last_seq, 40u);
  EXPECT_EQ(snapshot->state, sample().state);
  EXPECT_EQ(again.applied(), 40u);
  EXPECT_EQ(again.size(), 10u);
  ASSERT_NE(again.get(41), nullptr);
  EXPECT_EQ(again.get(50)->data(), "v50");
  // Decommissioning forgets the snapshot too.
  ASSERT_TRUE(again.erase_all());
  EXPECT_FALSE(storage.get(again.snapshot_key()).has_value());
}

TEST(ReplicatedLogSnapshot, CrashBetweenSnapshotAndEntryRemovalIsFinishedAtLoad) {
  core::MemoryStorage storage;
  {
    ReplicatedLog log(storage, kTarget, 0, 0);
    ASSERT_EQ(log.load(), ReplicatedLog::Damage::none);
    for (uint64_t s = 1; s <= 50; ++s) ASSERT_TRUE(log.put(entry(s, 3)));
    ASSERT_TRUE(log.set_applied(30));
    // A received snapshot ahead of the applied point: stored, then the crash
    // came before the applied point and the removals were written.
    ASSERT_TRUE(log.save_snapshot(sample()));
  }
  ReplicatedLog again(storage, kTarget, 0, 0);
  ASSERT_EQ(again.load(), ReplicatedLog::Damage::none);
  EXPECT_EQ(again.size(), 50u);
  const auto snapshot = again.restore_snapshot();
  ASSERT_TRUE(snapshot.has_value());
  EXPECT_EQ(again.applied(), 40u);
  EXPECT_EQ(again.size(), 10u);
  EXPECT_EQ(log_keys(storage), 10u);
  EXPECT_EQ(again.get(40), nullptr);
  ASSERT_NE(again.get(41), nullptr);
  // And the applied point it raised is durable.
  ReplicatedLog third(storage, kTarget, 0, 0);
  ASSERT_EQ(third.load(), ReplicatedLog::Damage::none);
  EXPECT_EQ(third.applied(), 40u);
}

TEST(ReplicatedLogSnapshot, DamagedStoredSnapshotIsIgnoredAndRemovesNothing) {
  core::MemoryStorage storage;
  {
    ReplicatedLog log(storage, kTarget, 0, 0);
    ASSERT_EQ(log.load(), ReplicatedLog::Damage::none);
    for (uint64_t s = 1; s <= 50; ++s) ASSERT_TRUE(log.put(entry(s, 3)));
    ASSERT_TRUE(log.set_applied(30));
    std::string damaged = encode_log_snapshot(sample());
    damaged[damaged.size() / 2] = static_cast<char>(damaged[damaged.size() / 2] ^ 0x10);
    ASSERT_TRUE(storage.put(log.snapshot_key(), damaged));
  }
  ReplicatedLog again(storage, kTarget, 0, 0);
  // The entries a snapshot covers may be gone already: a member whose
  // snapshot is damaged must rebuild from its group, not vote with a prefix
  // missing.
  EXPECT_EQ(again.load(), ReplicatedLog::Damage::entries);
  EXPECT_FALSE(again.restore_snapshot().has_value());
  EXPECT_EQ(again.applied(), 30u);
  EXPECT_EQ(again.size(), 50u);
}

TEST(ReplicatedLogSnapshot, EntriesThatDoNotFollowOnFromTheSnapshotAreDamage) {
  core::MemoryStorage storage;
  {
    ReplicatedLog log(storage, kTarget, 0, 0);
    ASSERT_EQ(log.load(), ReplicatedLog::Damage::none);
    for (uint64_t s = 1; s <= 50; ++s) ASSERT_TRUE(log.put(entry(s, 3)));
    ASSERT_TRUE(log.set_applied(40));
    ASSERT_TRUE(log.compact_through(20));  // as if the snapshot through 20 were lost with its file
  }
  ReplicatedLog again(storage, kTarget, 0, 0);
  EXPECT_EQ(again.load(), ReplicatedLog::Damage::entries);
}

}  // namespace
}  // namespace mesh::kgroup
