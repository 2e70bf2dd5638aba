#include "core/checksummed_storage.h"

#include <gtest/gtest.h>

#include "core/memory_storage.h"
#include "tests/support/quiet_logs.h"

namespace mesh::core {
namespace {

// Memory storage whose puts start failing after `budget` of them, as a full
// or failing disk would: stands for a crash in the middle of a migration.
class FailingStorage final : public Storage {
 public:
  explicit FailingStorage(MemoryStorage& inner, size_t budget) : inner_(inner), budget_(budget) {}
  StoredValue read(std::string_view key) const override { return inner_.read(key); }
  bool put(std::string_view key, std::string_view value) override {
    if (budget_ == 0) return false;
    --budget_;
    return inner_.put(key, value);
  }
  bool remove(std::string_view key) override { return inner_.remove(key); }
  std::vector<std::string> keys(std::string_view prefix) const override { return inner_.keys(prefix); }

 private:
  MemoryStorage& inner_;
  size_t budget_;
};

std::unique_ptr<ChecksummedStorage> open_ok(Storage& inner) {
  auto opened = ChecksummedStorage::open(inner);
  EXPECT_TRUE(opened.has_value()) << (opened ? "" : opened.error());
  return opened ? std::move(*opened) : nullptr;
}

TEST(ChecksummedStorage, RoundTripsAndTellsAbsentFromDamaged) {
  MemoryStorage inner;
  auto storage = open_ok(inner);
  ASSERT_TRUE(storage);
  const std::string binary("a\0b\xff", 4);
  ASSERT_TRUE(storage->put("kgroup/x/log/1", binary));
  EXPECT_EQ(storage->read("kgroup/x/log/1").status, ReadStatus::found);
  EXPECT_EQ(storage->read("kgroup/x/log/1").value, binary);
  EXPECT_EQ(storage->read("missing").status, ReadStatus::absent);
  ASSERT_TRUE(storage->put("empty", ""));
  EXPECT_TRUE(storage->read("empty").found());
  EXPECT_EQ(*inner.raw("kgroup/x/log/1"), ChecksummedStorage::frame("kgroup/x/log/1", binary));
}

TEST(ChecksummedStorage, EveryFlippedBitIsDamage) {
  MemoryStorage inner;
  auto storage = open_ok(inner);
  ASSERT_TRUE(storage);
  ASSERT_TRUE(storage->put("k", "promised term 7"));
  const std::string good = *inner.raw("k");
  for (size_t byte = 0; byte < good.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      *inner.raw("k") = good;
      (*inner.raw("k"))[byte] = static_cast<char>((*inner.raw("k"))[byte] ^ (1 << bit));
      const StoredValue read = storage->read("k");
      EXPECT_TRUE(read.damaged()) << "byte " << byte << " bit " << bit;
      EXPECT_TRUE(read.value.empty());
    }
  }
}

TEST(ChecksummedStorage, TruncatedEmptyOrExtendedIsDamage) {
  MemoryStorage inner;
  auto storage = open_ok(inner);
  ASSERT_TRUE(storage);
  ASSERT_TRUE(storage->put("k", "0123456789"));
  const std::string good = *inner.raw("k");
  for (size_t size = 0; size < good.size(); ++size) {
    *inner.raw("k") = good.substr(0, size);
    EXPECT_TRUE(storage->read("k").damaged()) << "truncated to " << size;
  }
  *inner.raw("k") = good + "x";
  EXPECT_TRUE(storage->read("k").damaged());
}

TEST(ChecksummedStorage, AValueUnderAnotherKeyIsDamage) {
  MemoryStorage inner;
  auto storage = open_ok(inner);
  ASSERT_TRUE(storage);
  ASSERT_TRUE(storage->put("log/1", "one"));
  ASSERT_TRUE(inner.put("log/2", *inner.raw("log/1")));
  EXPECT_TRUE(storage->read("log/2").damaged());
}

TEST(ChecksummedStorage, MigratesLegacyValuesOnce) {
  MemoryStorage inner;
  inner.put("auth/boot", "41");
  inner.put("kgroup/x/meta", std::string("\x01\0\0", 3));
  inner.put("empty", "");
  auto storage = open_ok(inner);
  ASSERT_TRUE(storage);
  EXPECT_EQ(storage->read("auth/boot").value, "41");
  EXPECT_EQ(storage->read("kgroup/x/meta").value, std::string("\x01\0\0", 3));
  EXPECT_TRUE(storage->read("empty").found());
  EXPECT_TRUE(storage->read(ChecksummedStorage::kFormatKey).found());
  // Migrated: a bare value written behind the storage's back is now damage,
  // and opening again rewrites nothing.
  inner.put("auth/boot", "42");
  const uint64_t writes = inner.writes();
  auto again = open_ok(inner);
  ASSERT_TRUE(again);
  EXPECT_EQ(inner.writes(), writes);
  EXPECT_TRUE(again->read("auth/boot").damaged());
}

TEST(ChecksummedStorage, ACrashMidMigrationIsSafe) {
  for (size_t budget = 0; budget <= 3; ++budget) {
    MemoryStorage inner;
    inner.put("a", "1");
    inner.put("b", "2");
    inner.put("c", "3");
    FailingStorage failing(inner, budget);
    EXPECT_FALSE(ChecksummedStorage::open(failing).has_value()) << "budget " << budget;
    EXPECT_FALSE(inner.read(ChecksummedStorage::kFormatKey).found()) << "budget " << budget;
    auto storage = open_ok(inner);
    ASSERT_TRUE(storage);
    EXPECT_EQ(storage->read("a").value, "1") << "budget " << budget;
    EXPECT_EQ(storage->read("b").value, "2") << "budget " << budget;
    EXPECT_EQ(storage->read("c").value, "3") << "budget " << budget;
  }
}

TEST(ChecksummedStorage, MigrationNeverLaundersADamagedFrame) {
  MemoryStorage inner;
  std::string framed = ChecksummedStorage::frame("k", "value");
  framed.back() = 'X';
  inner.put("k", framed);  // framed by an interrupted migration, then damaged
  auto storage = open_ok(inner);
  ASSERT_TRUE(storage);
  EXPECT_TRUE(storage->read("k").damaged());
}

TEST(ChecksummedStorage, ADamagedMarkerDoesNotRestartTheMigration) {
  MemoryStorage inner;
  {
    auto storage = open_ok(inner);
    ASSERT_TRUE(storage);
  }
  std::string& marker = *inner.raw(ChecksummedStorage::kFormatKey);
  marker.front() = static_cast<char>(marker.front() ^ 1);
  inner.put("bare", "not framed");
  auto storage = open_ok(inner);
  ASSERT_TRUE(storage);
  EXPECT_TRUE(storage->read("bare").damaged());
  EXPECT_TRUE(storage->read(ChecksummedStorage::kFormatKey).found());
}

}  // namespace
}  // namespace mesh::core
