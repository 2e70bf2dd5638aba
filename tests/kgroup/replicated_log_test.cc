#include "kgroup/replicated_log.h"

#include <set>

#include <gtest/gtest.h>

#include "core/memory_storage.h"
#include "kgroup/epoch_schedule.h"

namespace mesh::kgroup {
namespace {

proto::KgroupEntry entry(uint64_t seq, uint64_t term, std::string data) {
  proto::KgroupEntry e;
  e.set_seq(seq);
  e.set_term(term);
  e.set_data(std::move(data));
  return e;
}

TEST(ReplicatedLog, SurvivesARestart) {
  core::MemoryStorage storage;
  {
    ReplicatedLog log(storage, "device:a/b..c", 2, 1);
    ASSERT_EQ(log.load(), ReplicatedLog::Damage::none);
    ASSERT_TRUE(log.promise(5, core::NodeId(0x0a000001)));
    for (uint64_t s = 1; s <= 12; ++s) ASSERT_TRUE(log.put(entry(s, 5, "v" + std::to_string(s))));
    ASSERT_TRUE(log.set_applied(7));
    ASSERT_TRUE(log.truncate_after(10));
  }
  ReplicatedLog again(storage, "device:a/b..c", 2, 1);
  ASSERT_EQ(again.load(), ReplicatedLog::Damage::none);
  EXPECT_EQ(again.promised_term(), 5u);
  EXPECT_EQ(again.promised_to(), core::NodeId(0x0a000001));
  EXPECT_EQ(again.applied(), 7u);
  EXPECT_EQ(again.last_seq(), 10u);
  ASSERT_NE(again.get(10), nullptr);
  EXPECT_EQ(again.get(10)->data(), "v10");
  EXPECT_EQ(again.get(11), nullptr);
  // Other groups of the same target are separate.
  ReplicatedLog other(storage, "device:a/b..c", 2, 2);
  ASSERT_EQ(other.load(), ReplicatedLog::Damage::none);
  EXPECT_EQ(other.last_seq(), 0u);
}

TEST(ReplicatedLog, KeysAreSafePathComponents) {
  const std::string prefix = ReplicatedLog::key_prefix("device:../../etc/passwd", 1, 0);
  EXPECT_EQ(prefix.find(".."), std::string::npos) << prefix;
  EXPECT_EQ(prefix.rfind("kgroup/device/", 0), 0u) << prefix;
  EXPECT_NE(ReplicatedLog::key_prefix("device:a", 1, 0), ReplicatedLog::key_prefix("routine:a", 1, 0));
  EXPECT_NE(ReplicatedLog::key_prefix("device:a", 1, 0), ReplicatedLog::key_prefix("device:a", 10, 0));
}

TEST(ReplicatedLog, PagesRespectTheByteBudget) {
  core::MemoryStorage storage;
  ReplicatedLog log(storage, "device:a", 0, 0);
  for (uint64_t s = 1; s <= 50; ++s) ASSERT_TRUE(log.put(entry(s, 1, std::string(100, 'x'))));
  uint64_t next = 1;
  bool more = true;
  size_t pages = 0;
  uint64_t seen = 0;
  while (more) {
    const auto page = log.range(next, 900, next, more);
    ASSERT_FALSE(page.empty());
    size_t bytes = 0;
    for (const auto& e : page) {
      EXPECT_EQ(e.seq(), seen + 1);
      seen = e.seq();
      bytes += e.ByteSizeLong();
    }
    EXPECT_LE(bytes, 900u);
    ++pages;
  }
  EXPECT_EQ(seen, 50u);
  EXPECT_GT(pages, 5u);
}

TEST(ReplicatedLog, UnreadableStateIsReportedNotTrusted) {
  core::MemoryStorage storage;
  const std::string prefix = ReplicatedLog::key_prefix("device:a", 0, 0);
  storage.put(prefix + "meta", "short");
  storage.put(prefix + "log/00000000000000000001", "\xff\xff garbage");
  ReplicatedLog log(storage, "device:a", 0, 0);
  EXPECT_EQ(log.load(), ReplicatedLog::Damage::promise);
  EXPECT_EQ(log.promised_term(), 0u);
  EXPECT_EQ(log.last_seq(), 0u);
}

// Storage that reports chosen keys damaged, as ChecksummedStorage does.
class DamagingStorage final : public core::Storage {
 public:
  core::StoredValue read(std::string_view key) const override {
    if (damaged.count(std::string(key)) != 0 && inner.read(key).found()) return {core::ReadStatus::damaged, {}};
    return inner.read(key);
  }
  bool put(std::string_view key, std::string_view value) override {
    damaged.erase(std::string(key));
    return inner.put(key, value);
  }
  bool remove(std::string_view key) override { return inner.remove(key); }
  std::vector<std::string> keys(std::string_view prefix) const override { return inner.keys(prefix); }
  core::MemoryStorage inner;
  std::set<std::string> damaged;
};

void fill(core::Storage& storage) {
  ReplicatedLog log(storage, "device:a", 0, 0);
  ASSERT_TRUE(log.promise(4, core::NodeId(0x0a000002)));
  for (uint64_t s = 1; s <= 6; ++s) ASSERT_TRUE(log.put(entry(s, 4, "v" + std::to_string(s))));
  ASSERT_TRUE(log.set_applied(5));
}

TEST(ReplicatedLog, ADamagedEntryOrAHoleIsEntryDamage) {
  const std::string prefix = ReplicatedLog::key_prefix("device:a", 0, 0);
  {
    DamagingStorage storage;
    fill(storage);
    storage.damaged.insert(prefix + "log/00000000000000000003");
    ReplicatedLog log(storage, "device:a", 0, 0);
    EXPECT_EQ(log.load(), ReplicatedLog::Damage::entries);
    EXPECT_EQ(log.get(3), nullptr);
    EXPECT_EQ(log.promised_term(), 4u);
  }
  {
    DamagingStorage storage;
    fill(storage);
    storage.remove(prefix + "log/00000000000000000004");
    ReplicatedLog log(storage, "device:a", 0, 0);
    EXPECT_EQ(log.load(), ReplicatedLog::Damage::entries);
  }
  {
    DamagingStorage storage;
    fill(storage);
    storage.damaged.insert(prefix + "meta");
    ReplicatedLog log(storage, "device:a", 0, 0);
    EXPECT_EQ(log.load(), ReplicatedLog::Damage::promise);
  }
}

TEST(ReplicatedLog, ARebuildSurvivesACrashAndKeepsAKnownPromise) {
  const std::string prefix = ReplicatedLog::key_prefix("device:a", 0, 0);
  DamagingStorage storage;
  fill(storage);
  storage.damaged.insert(prefix + "log/00000000000000000002");
  {
    ReplicatedLog log(storage, "device:a", 0, 0);
    ASSERT_EQ(log.load(), ReplicatedLog::Damage::entries);
    ASSERT_TRUE(log.begin_rebuild(ReplicatedLog::Damage::entries));
    EXPECT_EQ(log.last_seq(), 0u);
    EXPECT_EQ(log.applied(), 0u);
    EXPECT_EQ(log.promised_term(), 4u);
    ASSERT_TRUE(log.put(entry(1, 4, "v1")));
  }
  {
    ReplicatedLog log(storage, "device:a", 0, 0);  // crashed mid-rebuild
    EXPECT_EQ(log.load(), ReplicatedLog::Damage::none);
    EXPECT_EQ(log.rebuilding(), ReplicatedLog::Damage::entries);
    EXPECT_EQ(log.last_seq(), 1u);
    EXPECT_EQ(log.promised_term(), 4u);
    ASSERT_TRUE(log.finish_rebuild());
  }
  ReplicatedLog log(storage, "device:a", 0, 0);
  EXPECT_EQ(log.load(), ReplicatedLog::Damage::none);
  EXPECT_EQ(log.rebuilding(), ReplicatedLog::Damage::none);
}

TEST(ReplicatedLog, ALostPromiseIsNeverForgotten) {
  const std::string prefix = ReplicatedLog::key_prefix("device:a", 0, 0);
  DamagingStorage storage;
  fill(storage);
  storage.damaged.insert(prefix + "meta");
  {
    ReplicatedLog log(storage, "device:a", 0, 0);
    ASSERT_EQ(log.load(), ReplicatedLog::Damage::promise);
    ASSERT_TRUE(log.begin_rebuild(ReplicatedLog::Damage::promise));
    EXPECT_EQ(log.promised_term(), 0u);
    EXPECT_FALSE(log.finish_rebuild());
  }
  ReplicatedLog log(storage, "device:a", 0, 0);
  EXPECT_EQ(log.load(), ReplicatedLog::Damage::none);
  EXPECT_EQ(log.rebuilding(), ReplicatedLog::Damage::promise);
  // A damaged marker is read as the rebuild that never ends.
  storage.damaged.insert(prefix + "rebuild");
  EXPECT_EQ(log.load(), ReplicatedLog::Damage::none);
  EXPECT_EQ(log.rebuilding(), ReplicatedLog::Damage::promise);
}

TEST(EpochSchedule, GroupsMigrateAtDifferentTimes) {
  const EpochSchedule schedule(std::chrono::seconds(60), core::TimePoint{});
  std::set<int64_t> offsets;
  for (int t = 0; t < 20; ++t) {
    const GroupTarget target{TargetKind::device, "d" + std::to_string(t)};
    const auto offset = schedule.offset(target);
    EXPECT_GE(offset.count(), 0);
    EXPECT_LT(offset, schedule.length());
    offsets.insert(offset.count());
    for (uint64_t e = 0; e < 5; ++e) {
      const core::TimePoint end = schedule.epoch_end(target, e);
      EXPECT_EQ(schedule.epoch_at(target, end), e + 1) << target.to_string();
      EXPECT_EQ(schedule.epoch_at(target, end - core::Duration(1)), e) << target.to_string();
    }
  }
  EXPECT_GT(offsets.size(), 15u);
  const EpochSchedule aligned(std::chrono::seconds(60), core::TimePoint{}, false);
  EXPECT_EQ(aligned.offset(GroupTarget{TargetKind::device, "x"}).count(), 0);
}

}  // namespace
}  // namespace mesh::kgroup
