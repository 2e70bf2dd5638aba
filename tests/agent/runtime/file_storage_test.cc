#include "agent/runtime/file_storage.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace mesh::agent {
namespace {

namespace fs = std::filesystem;

class FileStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // mkdtemp replaces the six trailing X characters with a unique suffix.
    std::string pattern = (fs::temp_directory_path() / "file_storage_test.").string() + std::string(6, 'X');
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ + "/data";
  }
  void TearDown() override { fs::remove_all(root_); }

  // Every regular file under the storage directory, relative to it.
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& entry : fs::recursive_directory_iterator(dir_)) {
      if (entry.is_regular_file()) out.push_back(fs::relative(entry.path(), dir_).generic_string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string root_;
  std::string dir_;
};

TEST_F(FileStorageTest, CreatesDirectoryWithOwnerOnlyMode) {
  FileStorage storage(dir_ + "/nested");
  struct stat info {};
  ASSERT_EQ(::stat((dir_ + "/nested").c_str(), &info), 0);
  EXPECT_TRUE(S_ISDIR(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0700U);
}

TEST_F(FileStorageTest, PutGetOverwriteRemove) {
  FileStorage storage(dir_);
  EXPECT_FALSE(storage.get("a").has_value());
  ASSERT_TRUE(storage.put("a", "one"));
  EXPECT_EQ(storage.get("a"), "one");
  ASSERT_TRUE(storage.put("a", "two, longer"));
  EXPECT_EQ(storage.get("a"), "two, longer");
  ASSERT_TRUE(storage.put("a", ""));
  EXPECT_EQ(storage.get("a"), "");
  EXPECT_TRUE(storage.remove("a"));
  EXPECT_FALSE(storage.get("a").has_value());
  EXPECT_TRUE(storage.remove("a"));  // absent: nothing to do
}

TEST_F(FileStorageTest, BinaryValuesRoundTrip) {
  FileStorage storage(dir_);
  std::string value;
  for (int i = 0; i < 20000; ++i) value.push_back(static_cast<char>(i % 256));
  ASSERT_TRUE(storage.put("blob", value));
  EXPECT_EQ(storage.get("blob"), value);
}

TEST_F(FileStorageTest, NestedKeysAndSortedPrefixListing) {
  FileStorage storage(dir_);
  ASSERT_TRUE(storage.put("kgroup/b/log", "1"));
  ASSERT_TRUE(storage.put("kgroup/a/log", "2"));
  ASSERT_TRUE(storage.put("kgroup/a/meta", "3"));
  ASSERT_TRUE(storage.put("auth/boot", "4"));
  EXPECT_EQ(storage.get("kgroup/a/meta"), "3");
  EXPECT_EQ(storage.keys(""), (std::vector<std::string>{"auth/boot", "kgroup/a/log", "kgroup/a/meta", "kgroup/b/log"}));
  EXPECT_EQ(storage.keys("kgroup/"), (std::vector<std::string>{"kgroup/a/log", "kgroup/a/meta", "kgroup/b/log"}));
  EXPECT_EQ(storage.keys("kgroup/a/"), (std::vector<std::string>{"kgroup/a/log", "kgroup/a/meta"}));
  EXPECT_EQ(storage.keys("kgroup/a/l"), (std::vector<std::string>{"kgroup/a/log"}));
  EXPECT_EQ(storage.keys("kg"), (std::vector<std::string>{"kgroup/a/log", "kgroup/a/meta", "kgroup/b/log"}));
  EXPECT_TRUE(storage.keys("missing/").empty());
  EXPECT_TRUE(storage.keys("zzz").empty());
  ASSERT_TRUE(storage.remove("kgroup/a/log"));
  EXPECT_EQ(storage.keys("kgroup/a/"), (std::vector<std::string>{"kgroup/a/meta"}));
}

TEST_F(FileStorageTest, SurvivesReopenAndLeavesNoTmpFiles) {
  {
    FileStorage storage(dir_);
    ASSERT_TRUE(storage.put("auth/boot", "7"));
    ASSERT_TRUE(storage.put("auth/boot", "8"));
    ASSERT_TRUE(storage.put("x", "y"));
  }
  EXPECT_EQ(files(), (std::vector<std::string>{"auth/boot", "x"}));
  FileStorage reopened(dir_);
  EXPECT_EQ(reopened.get("auth/boot"), "8");
  EXPECT_EQ(reopened.get("x"), "y");
  EXPECT_EQ(reopened.keys(""), (std::vector<std::string>{"auth/boot", "x"}));
}

TEST_F(FileStorageTest, LeftoverTmpFromACrashIsIgnoredAndCleaned) {
  {
    FileStorage storage(dir_);
    ASSERT_TRUE(storage.put("auth/boot", "3"));
  }
  std::ofstream(dir_ + "/auth/boot.tmp") << "torn";
  FileStorage reopened(dir_);
  EXPECT_EQ(reopened.get("auth/boot"), "3");
  EXPECT_EQ(reopened.keys(""), (std::vector<std::string>{"auth/boot"}));
  EXPECT_EQ(files(), (std::vector<std::string>{"auth/boot"}));
}

TEST_F(FileStorageTest, BadKeysAreRefused) {
  FileStorage storage(dir_);
  for (const char* key : {"", "/etc/passwd", "../escape", "a/../../b", "a//b", "a/", "./a", "a/.", "x.tmp",
                          "dir.tmp/x"}) {
    SCOPED_TRACE(std::string("key=") + key);
    EXPECT_FALSE(FileStorage::key_error(key).empty());
    EXPECT_FALSE(storage.put(key, "v"));
    EXPECT_FALSE(storage.get(key).has_value());
    EXPECT_FALSE(storage.remove(key));
  }
  EXPECT_FALSE(fs::exists(root_ + "/escape"));
  EXPECT_TRUE(files().empty());
  EXPECT_TRUE(FileStorage::key_error("a.b/c-d_e").empty());
}

TEST_F(FileStorageTest, ConstructorThrowsWhenDirectoryCannotBeCreated) {
  std::ofstream(root_ + "/file") << "not a directory";
  try {
    FileStorage storage(root_ + "/file/data");
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(root_ + "/file/data"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("data_dir"), std::string::npos) << e.what();
  }
  EXPECT_THROW(FileStorage(""), std::runtime_error);
}

TEST_F(FileStorageTest, RemovePrefixTakesTheWholeSubtreeAndLeavesNoFiles) {
  FileStorage storage(dir_);
  ASSERT_TRUE(storage.put("kgroup/t/1-0/meta", "m"));
  ASSERT_TRUE(storage.put("kgroup/t/1-0/log/1", "e1"));
  ASSERT_TRUE(storage.put("kgroup/t/1-0/log/2", "e2"));
  ASSERT_TRUE(storage.put("kgroup/t/2-0/meta", "kept"));
  ASSERT_TRUE(storage.put("kgroup/t/retired", "r"));
  ASSERT_TRUE(storage.remove_prefix("kgroup/t/1-0/"));
  EXPECT_EQ(storage.keys("kgroup/"), (std::vector<std::string>{"kgroup/t/2-0/meta", "kgroup/t/retired"}));
  EXPECT_EQ(files(), (std::vector<std::string>{"kgroup/t/2-0/meta", "kgroup/t/retired"}));
  // Nothing there: still fine.
  EXPECT_TRUE(storage.remove_prefix("kgroup/t/1-0/"));
  EXPECT_TRUE(storage.remove_prefix("never/"));
  EXPECT_FALSE(storage.remove_prefix("kgroup/t"));  // not a subtree
  EXPECT_FALSE(storage.remove_prefix("../"));
}

TEST_F(FileStorageTest, ACommitPutsUnderASubtreeItRemovedEarlier) {
  FileStorage storage(dir_);
  ASSERT_TRUE(storage.put("g/1/old", "x"));
  ASSERT_EQ(storage.commit({{"g/1/", std::nullopt, true}, {"g/1/new", std::string("y")}, {"h", std::string("z")}}),
            FileStorage::CommitResult::durable);
  EXPECT_EQ(storage.keys(""), (std::vector<std::string>{"g/1/new", "h"}));
  EXPECT_EQ(storage.get("g/1/new"), "y");
}

// A subtree renamed away but not yet deleted when the agent died is deleted
// at the next start, and was never listed as keys.
TEST_F(FileStorageTest, SubtreesLeftByACrashAreDeletedAtStart) {
  {
    FileStorage storage(dir_);
    ASSERT_TRUE(storage.put("a", "1"));
  }
  fs::create_directories(dir_ + "/removed-7.tmp/kgroup/t/1-0");
  std::ofstream(dir_ + "/removed-7.tmp/kgroup/t/1-0/meta") << "m";
  {
    FileStorage storage(dir_);
    EXPECT_EQ(storage.keys(""), std::vector<std::string>{"a"});
  }
  EXPECT_FALSE(fs::exists(dir_ + "/removed-7.tmp"));
}

}  // namespace
}  // namespace mesh::agent
