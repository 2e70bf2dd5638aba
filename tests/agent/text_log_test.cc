#include "agent/text_log.h"

#include <gtest/gtest.h>

#include "proto/kgroup_client.pb.h"

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

proto::TextLogPage read_page(const TextLog& log, uint64_t from, uint32_t max_bytes) {
  proto::TextLogQuery query;
  query.set_from(from);
  query.set_max_bytes(max_bytes);
  const auto answer = log.read(query.SerializeAsString());
  EXPECT_TRUE(answer) << answer.error();
  proto::TextLogPage page;
  EXPECT_TRUE(answer && page.ParseFromString(*answer));
  return page;
}

TEST(TextLogTest, ReadsOnePageFromAPositionWithinItsBudget) {
  TextLog log;
  for (uint64_t i = 1; i <= 10; ++i) log.apply(i, TextLog::encode_update(100 + i, std::string(20, 'a' + i)));
  // 20 bytes of text and 16 of framing each: two fit in 80 bytes.
  const proto::TextLogPage page = read_page(log, 4, 80);
  EXPECT_EQ(page.first(), 4u);
  EXPECT_EQ(page.total(), 10u);
  ASSERT_EQ(page.entries_size(), 2);
  EXPECT_EQ(page.entries(0).text(), std::string(20, 'a' + 4));
  EXPECT_EQ(page.entries(1).write_id(), 105u);
  // One entry even above the budget, so a read always advances.
  EXPECT_EQ(read_page(log, 1, 1).entries_size(), 1);
  // No budget: the rest of the log; past the end: nothing, and the total.
  EXPECT_EQ(read_page(log, 3, 0).entries_size(), 8);
  const proto::TextLogPage past = read_page(log, 11, 80);
  EXPECT_EQ(past.entries_size(), 0);
  EXPECT_EQ(past.total(), 10u);
  // The empty query reads from the start.
  proto::TextLogPage all;
  ASSERT_TRUE(all.ParseFromString(*log.read("")));
  EXPECT_EQ(all.first(), 1u);
  EXPECT_EQ(all.entries_size(), 10);
}

TEST(TextLogTest, ReadRejectsWhatIsNoQuery) {
  TextLog log;
  log.apply(1, TextLog::encode_update(1, "kept"));
  const auto answer = log.read("\xff\xff\xff");
  ASSERT_FALSE(answer);
  EXPECT_NE(answer.error().find("TextLogQuery"), std::string::npos);
}

}  // namespace
}  // namespace mesh::agent
