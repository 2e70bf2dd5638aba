#include "agent/text_log.h"

#include <gtest/gtest.h>

namespace mesh::agent {
namespace {

TEST(TextLogTest, AppliesInOrderAndMapsGroupSequenceNumbersToPositions) {
  TextLog log;
  log.apply(1, TextLog::encode_update(11, "on"));
  log.apply(2, TextLog::encode_update(12, "off"));
  ASSERT_EQ(log.records().size(), 2u);
  EXPECT_EQ(log.records()[0].seq, 1u);
  EXPECT_EQ(log.records()[0].text, "on");
  EXPECT_EQ(log.records()[1].seq, 2u);
  EXPECT_EQ(log.position_of(2), 2u);
  EXPECT_FALSE(log.position_of(3).has_value());
}

TEST(TextLogTest, ARetriedWriteIsAppliedOnceAndMapsToTheFirstCopy) {
  TextLog log;
  log.apply(1, TextLog::encode_update(7, "a"));
  log.apply(2, TextLog::encode_update(8, "b"));
  log.apply(3, TextLog::encode_update(7, "a"));
  ASSERT_EQ(log.records().size(), 2u);
  EXPECT_EQ(log.position_of(3), 1u);
}

TEST(TextLogTest, MalformedUpdatesAreSkippedAlike) {
  TextLog log;
  log.apply(1, "short");
  log.apply(2, TextLog::encode_update(1, ""));
  EXPECT_EQ(log.malformed(), 1u);
  ASSERT_EQ(log.records().size(), 1u);
  EXPECT_EQ(log.records()[0].text, "");
}

TEST(TextLogTest, SnapshotRestoresEveryEntryAndItsDeduplication) {
  TextLog log;
  for (uint64_t i = 1; i <= 20; ++i) log.apply(i, TextLog::encode_update(100 + i, "entry " + std::to_string(i)));
  TextLog copy;
  ASSERT_TRUE(copy.restore(log.snapshot()));
  ASSERT_EQ(copy.records().size(), 20u);
  EXPECT_EQ(copy.records()[19].seq, 20u);
  EXPECT_EQ(copy.records()[19].text, "entry 20");
  EXPECT_EQ(copy.snapshot(), log.snapshot());
  copy.apply(1, TextLog::encode_update(105, "entry 5"));  // a retry reaching the successor group
  EXPECT_EQ(copy.records().size(), 20u);
  EXPECT_EQ(copy.position_of(1), 5u);
}

TEST(TextLogTest, RestoreRejectsWhatIsNoSnapshotAndKeepsTheState) {
  TextLog log;
  log.apply(1, TextLog::encode_update(1, "kept"));
  EXPECT_FALSE(log.restore("\xff\xff\xff"));
  TextLog twice;
  twice.apply(1, TextLog::encode_update(5, "x"));
  std::string duplicated = twice.snapshot() + twice.snapshot();  // one write id twice
  EXPECT_FALSE(log.restore(duplicated));
  ASSERT_EQ(log.records().size(), 1u);
  EXPECT_EQ(log.records()[0].text, "kept");
  EXPECT_TRUE(log.restore(""));  // the empty log
  EXPECT_TRUE(log.records().empty());
}

}  // namespace
}  // namespace mesh::agent
