#include "agent/runtime/write_behind_storage.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mesh::agent {
namespace {

namespace fs = std::filesystem;

// The event loop, by hand: what the writer posts waits here until the test
// runs it, as asio would on the agent's thread.
class PostedWork {
 public:
  WriteBehindStorage::Post post() {
    return [this](std::function<void()> work) {
      const std::lock_guard lock(mutex_);
      work_.push_back(std::move(work));
    };
  }
  // Runs what has been posted so far; the number of functions run.
  size_t run() {
    std::vector<std::function<void()>> now;
    {
      const std::lock_guard lock(mutex_);
      now.swap(work_);
    }
    for (auto& work : now) work();
    return now.size();
  }

 private:
  std::mutex mutex_;
  std::vector<std::function<void()>> work_;
};

// Holds the writer before each commit until opened, so a test decides when
// the disk "finishes".
class DiskGate {
 public:
  std::function<void()> hold() {
    return [this] {
      std::unique_lock lock(mutex_);
      opened_.wait(lock, [&] { return open_; });
    };
  }
  void open() {
    {
      const std::lock_guard lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

class WriteBehindStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "write_behind_test.").string() + std::string(6, 'X');
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }

  WriteBehindStorage::Fatal no_fatal() {
    return [this](const std::string& why) { fatal_ = why; };
  }
  // Options whose writer waits for `disk` to open before each commit.
  static WriteBehindStorage::Options held_by(DiskGate& disk) {
    WriteBehindStorage::Options options;
    options.before_commit = disk.hold();
    return options;
  }

  std::string root_;
  std::string fatal_;
  PostedWork loop_;
};

TEST_F(WriteBehindStorageTest, ChangesAreVisibleAtOnceAndDurableAfterFlush) {
  FileStorage files(root_);
  {
    WriteBehindStorage storage(files, loop_.post(), no_fatal());
    ASSERT_TRUE(storage.put("kgroup/a/meta", "one"));
    ASSERT_TRUE(storage.put("kgroup/a/log/1", "e1"));
    ASSERT_TRUE(storage.put("kgroup/a/meta", "two"));
    ASSERT_TRUE(storage.put("old", "x"));
    ASSERT_TRUE(storage.remove("old"));
    EXPECT_EQ(storage.get("kgroup/a/meta"), "two");
    EXPECT_EQ(storage.keys("kgroup/a/"), (std::vector<std::string>{"kgroup/a/log/1", "kgroup/a/meta"}));
    EXPECT_FALSE(storage.get("old").has_value());
    ASSERT_TRUE(storage.flush());
    EXPECT_EQ(storage.stats().queued, 0u);
    EXPECT_EQ(storage.stats().changes, 5u);
  }
  EXPECT_TRUE(fatal_.empty()) << fatal_;
  // What a restart reads: the files alone.
  EXPECT_EQ(files.get("kgroup/a/meta"), "two");
  EXPECT_EQ(files.get("kgroup/a/log/1"), "e1");
  EXPECT_FALSE(files.get("old").has_value());
}

TEST_F(WriteBehindStorageTest, DestroyingCommitsWhatIsQueued) {
  FileStorage files(root_);
  {
    WriteBehindStorage storage(files, loop_.post(), no_fatal());
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(storage.put("k/" + std::to_string(i), std::to_string(i)));
  }
  EXPECT_EQ(files.keys("k/").size(), 100u);
}

TEST_F(WriteBehindStorageTest, ActionsWaitForEarlierChangesAndRunInOrder) {
  FileStorage files(root_);
  DiskGate disk;
  WriteBehindStorage storage(files, loop_.post(), no_fatal(), held_by(disk));
  std::vector<std::string> ran;
  // Nothing pending: at once.
  storage.after_durable([&] { ran.push_back("idle"); });
  EXPECT_EQ(ran, std::vector<std::string>{"idle"});

  ASSERT_TRUE(storage.put("a", "1"));
  storage.after_durable([&] {
    ran.push_back("after a");
    EXPECT_EQ(files.get("a"), "1");  // on disk by now
  });
  storage.after_durable([&] { ran.push_back("second after a"); });
  loop_.run();
  EXPECT_EQ(ran.size(), 1u);  // the disk has not committed "a"
  disk.open();
  ASSERT_TRUE(storage.flush());
  EXPECT_EQ(ran.size(), 1u);  // durable, but released only on the loop
  while (loop_.run() > 0) {
  }
  EXPECT_EQ(ran, (std::vector<std::string>{"idle", "after a", "second after a"}));
}

TEST_F(WriteBehindStorageTest, AnActionNeverOvertakesOneWaiting) {
  FileStorage files(root_);
  DiskGate disk;
  WriteBehindStorage storage(files, loop_.post(), no_fatal(), held_by(disk));
  std::vector<int> ran;
  ASSERT_TRUE(storage.put("a", "1"));
  storage.after_durable([&] { ran.push_back(1); });
  disk.open();
  ASSERT_TRUE(storage.flush());
  // Durable, but action 1 has not been released: 2 must queue behind it.
  storage.after_durable([&] { ran.push_back(2); });
  EXPECT_TRUE(ran.empty());
  while (loop_.run() > 0) {
  }
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));
}

TEST_F(WriteBehindStorageTest, BadKeysAreRefusedAtOnce) {
  FileStorage files(root_);
  WriteBehindStorage storage(files, loop_.post(), no_fatal());
  EXPECT_FALSE(storage.put("../escape", "x"));
  EXPECT_FALSE(storage.put("a.tmp", "x"));
  EXPECT_FALSE(storage.remove("/abs"));
  EXPECT_EQ(storage.stats().queued, 0u);
}

// A commit that cannot be written (here: a key below a file, so its
// directory cannot be made) changes nothing on disk; it is retried, and the
// outputs behind it stay held meanwhile.
TEST_F(WriteBehindStorageTest, ACommitThatFailsIsRetriedAndItsActionsWait) {
  FileStorage files(root_);
  WriteBehindStorage::Options options;
  options.first_retry = std::chrono::milliseconds(5);
  options.max_retry = std::chrono::milliseconds(20);
  WriteBehindStorage storage(files, loop_.post(), no_fatal(), options);
  ASSERT_TRUE(storage.put("file", "x"));
  ASSERT_TRUE(storage.flush());
  ASSERT_TRUE(storage.put("file/below", "y"));
  bool released = false;
  storage.after_durable([&] { released = true; });
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (storage.stats().retries < 3 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(storage.stats().retries, 3u);
  loop_.run();
  EXPECT_FALSE(released);
  EXPECT_EQ(storage.get("file/below"), "y");  // still visible to the node
  EXPECT_FALSE(files.get("file/below").has_value());
  EXPECT_TRUE(fatal_.empty());
}

TEST_F(WriteBehindStorageTest, RemovePrefixIsVisibleAtOnceAndLaterPutsSurviveIt) {
  FileStorage files(root_);
  DiskGate disk;
  {
    WriteBehindStorage storage(files, loop_.post(), no_fatal(), held_by(disk));
    disk.open();
    ASSERT_TRUE(storage.put("kgroup/t/1-0/meta", "m"));
    ASSERT_TRUE(storage.put("kgroup/t/1-0/log/1", "e1"));
    ASSERT_TRUE(storage.put("kgroup/t/2-0/meta", "kept"));
    ASSERT_TRUE(storage.flush());
    ASSERT_TRUE(storage.put("kgroup/t/1-0/log/2", "queued, then removed"));
    ASSERT_TRUE(storage.remove_prefix("kgroup/t/1-0/"));
    ASSERT_TRUE(storage.put("kgroup/t/1-0/meta", "put again"));
    EXPECT_FALSE(storage.get("kgroup/t/1-0/log/1").has_value());
    EXPECT_FALSE(storage.get("kgroup/t/1-0/log/2").has_value());
    EXPECT_EQ(storage.get("kgroup/t/1-0/meta"), "put again");
    EXPECT_EQ(storage.keys("kgroup/t/"), (std::vector<std::string>{"kgroup/t/1-0/meta", "kgroup/t/2-0/meta"}));
    EXPECT_FALSE(storage.remove_prefix("kgroup/t/1-0"));  // not a subtree
    ASSERT_TRUE(storage.flush());
    EXPECT_EQ(storage.keys("kgroup/t/"), (std::vector<std::string>{"kgroup/t/1-0/meta", "kgroup/t/2-0/meta"}));
  }
  EXPECT_TRUE(fatal_.empty()) << fatal_;
  EXPECT_EQ(files.keys(""), (std::vector<std::string>{"kgroup/t/1-0/meta", "kgroup/t/2-0/meta"}));
  EXPECT_EQ(files.get("kgroup/t/1-0/meta"), "put again");
  // The sweeper deleted what was renamed away.
  for (const auto& entry : fs::directory_iterator(root_)) {
    EXPECT_FALSE(entry.path().filename().string().starts_with("removed-")) << entry.path();
  }
}

}  // namespace
}  // namespace mesh::agent
