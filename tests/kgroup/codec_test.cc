#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "core/rng.h"
#include "kgroup/kgroup_codec.h"

namespace mesh::kgroup {
namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

proto::KgroupRef ref(std::string target) {
  proto::KgroupRef r;
  r.set_target(std::move(target));
  r.set_epoch(4);
  r.set_generation(1);
  return r;
}

TEST(KgroupCodec, RoundTripsEveryKind) {
  proto::KgroupBody append;
  *append.mutable_append()->mutable_group() = ref("device:a");
  append.mutable_append()->set_term(3);
  for (uint64_t seq : {4, 5, 6}) {
    auto* e = append.mutable_append()->add_entries();
    e->set_seq(seq);
    e->set_term(2);
    e->set_data("x");
  }
  const auto decoded = decode_body(encode_body(append));
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(decoded->append().entries_size(), 3);
  EXPECT_EQ(decoded->append().group().generation(), 1u);
}

TEST(KgroupCodec, RejectsGarbage) {
  EXPECT_FALSE(decode_body(""));                         // nothing set
  EXPECT_FALSE(decode_body("\xff\xff\xff"));             // not protobuf
  EXPECT_FALSE(decode_body(std::string(2000, '\x0a')));  // too large
  proto::KgroupBody bad_target;
  *bad_target.mutable_election()->mutable_group() = ref("nokind");
  EXPECT_FALSE(decode_body(encode_body(bad_target)));
  proto::KgroupBody zero_seq;
  *zero_seq.mutable_append()->mutable_group() = ref("device:a");
  zero_seq.mutable_append()->set_term(1);
  zero_seq.mutable_append()->add_entries()->set_seq(0);
  EXPECT_FALSE(decode_body(encode_body(zero_seq)));
  proto::KgroupBody zero_term;
  *zero_term.mutable_prepare()->mutable_group() = ref("routine:r");
  zero_term.mutable_prepare()->set_from_seq(1);
  EXPECT_FALSE(decode_body(encode_body(zero_term)));
  proto::KgroupBody no_members;
  *no_members.mutable_start()->mutable_group() = ref("cluster:1");
  *no_members.mutable_start()->mutable_source() = ref("cluster:1");
  EXPECT_FALSE(decode_body(encode_body(no_members)));
}

TEST(KgroupCodec, CoalescedHeartbeatsCarryHeartbeatsOnly) {
  proto::KgroupBody heartbeats;
  for (const char* target : {"device:a", "routine:b"}) {
    proto::KgroupAppend* append = heartbeats.mutable_heartbeats()->add_appends();
    *append->mutable_group() = ref(target);
    append->set_term(2);
    append->set_commit(7);
  }
  const auto decoded = decode_body(encode_body(heartbeats));
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(decoded->heartbeats().appends_size(), 2);

  proto::KgroupBody with_entries = heartbeats;
  with_entries.mutable_heartbeats()->mutable_appends(1)->add_entries()->set_seq(8);
  EXPECT_EQ(decode_body(encode_body(with_entries)).error(), "bad_heartbeats");
  proto::KgroupBody zero_term = heartbeats;
  zero_term.mutable_heartbeats()->mutable_appends(0)->set_term(0);
  EXPECT_EQ(decode_body(encode_body(zero_term)).error(), "bad_heartbeats");
  proto::KgroupBody bad_group = heartbeats;
  bad_group.mutable_heartbeats()->mutable_appends(1)->mutable_group()->set_target("nokind");
  EXPECT_EQ(decode_body(encode_body(bad_group)).error(), "bad_group");
  proto::KgroupBody none;
  none.mutable_heartbeats();
  EXPECT_EQ(decode_body(encode_body(none)).error(), "bad_heartbeats");
}

TEST(KgroupCodec, CorpusDecodesAsNamed) {
  // Of the hand-named files, bad_* and empty.bin are refused and every other
  // one decodes. Inputs scripts/fuzz keeps (named by their SHA-1) promise
  // neither.
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(KGROUP_CORPUS_DIR)) {
    const std::string name = entry.path().filename().string();
    if (name.size() == 40 && name.find_first_not_of("0123456789abcdef") == std::string::npos) continue;
    const bool should_fail = name.starts_with("bad_") || name == "empty.bin";
    EXPECT_EQ(decode_body(read_file(entry.path())).has_value(), !should_fail) << name;
    ++files;
  }
  EXPECT_GE(files, 10u);
}

TEST(KgroupCodec, RandomMutationsNeverCrash) {
  std::vector<std::string> seeds;
  for (const auto& entry : std::filesystem::directory_iterator(KGROUP_CORPUS_DIR)) {
    seeds.push_back(read_file(entry.path()));
  }
  ASSERT_FALSE(seeds.empty());
  core::Rng rng(99);
  size_t accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = seeds[rng.below(seeds.size())];
    const uint64_t edits = 1 + rng.below(4);
    for (uint64_t e = 0; e < edits && !bytes.empty(); ++e) {
      bytes[rng.below(bytes.size())] = static_cast<char>(rng.below(256));
    }
    if (rng.chance(0.2) && !bytes.empty()) bytes.resize(rng.below(bytes.size()));
    const auto decoded = decode_body(bytes);
    if (!decoded) continue;
    ++accepted;
    const auto again = decode_body(encode_body(*decoded));
    ASSERT_TRUE(again);
    EXPECT_EQ(encode_body(*again), encode_body(*decoded));
  }
  EXPECT_GT(accepted, 0u);
}

}  // namespace
}  // namespace mesh::kgroup
