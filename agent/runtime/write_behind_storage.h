#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/runtime/file_storage.h"
#include "core/storage.h"

namespace mesh::agent {

// The agent's storage: FileStorage written from a thread of its own, so that
// the event loop never waits for the disk. An fsync on a Pi's SD card takes
// tens of milliseconds, and seconds when the card is busy; the chaos runs
// saw agents frozen 7-22 s inside put(), long enough for the mesh to declare
// them dead and re-elect every group they led.
//
// put() and remove() queue the change and return at once; read() and keys()
// see it from then on. The writer commits whatever has queued, in order, in
// one FileStorage::commit (group commit: a handful of fsyncs for the whole
// batch, not three per change), then tells the event loop, which runs the
// after_durable() actions the batch released (core/storage.h: the node's
// outgoing messages, meshctl answers and device commands wait there, so
// nobody outside sees a change before it is durable).
//
// A commit that changes nothing on disk (disk full) is retried with backoff,
// logged each time; meanwhile the node holds its outputs, like a node with a
// stalled disk. A commit that fails half-way (a rename or directory fsync)
// leaves the disk in an unknown state, and a failed fsync must not be
// retried (the kernel may then report success for data it dropped), so it
// calls `on_fatal`: the agent exits, and at restart recovers from what is on
// disk and from its groups.
class WriteBehindStorage final : public core::Storage {
 public:
  // Runs a function on the node's thread (asio::post onto the event loop).
  using Post = std::function<void(std::function<void()>)>;
  using Fatal = std::function<void(const std::string& why)>;

  struct Options {
    size_t max_batch = 512;  // changes per commit
    std::chrono::milliseconds first_retry{100};
    std::chrono::milliseconds max_retry{5000};
    // A commit slower than this is logged (the disk is the bottleneck).
    std::chrono::milliseconds slow_commit{1000};
    // Tests: runs on the writer thread before each commit, so a test can
    // hold the disk "busy" for as long as it needs.
    std::function<void()> before_commit;
  };

  struct Stats {
    uint64_t commits = 0;
    uint64_t changes = 0;   // committed
    uint64_t retries = 0;   // commits that changed nothing and were tried again
    size_t queued = 0;      // changes not yet durable
    double last_commit_ms = 0;
    double max_commit_ms = 0;
  };

  WriteBehindStorage(FileStorage& files, Post post, Fatal on_fatal, Options options);
  WriteBehindStorage(FileStorage& files, Post post, Fatal on_fatal)
      : WriteBehindStorage(files, std::move(post), std::move(on_fatal), Options{}) {}
  // Commits what is queued (unless the disk refuses it: no retries then),
  // then stops the writer. Waiting actions are dropped.
  ~WriteBehindStorage() override;
  WriteBehindStorage(const WriteBehindStorage&) = delete;
  WriteBehindStorage& operator=(const WriteBehindStorage&) = delete;

  core::StoredValue read(std::string_view key) const override;
  // False for a key FileStorage cannot hold (logged); the change is not made.
  bool put(std::string_view key, std::string_view value) override;
  bool remove(std::string_view key) override;
  // One change (FileStorage renames the subtree away); its files are
  // deleted by a thread of their own once that is durable.
  bool remove_prefix(std::string_view prefix) override;
  std::vector<std::string> keys(std::string_view prefix) const override;
  void after_durable(Action action) override;

  // Blocks until every change made so far is durable; false if the writer
  // stopped on a fatal error first. For start-up tools and tests, never for
  // the event loop.
  bool flush();

  Stats stats() const;

 private:
  struct Queued {
    uint64_t seq;
    FileStorage::Change change;
  };
  struct Overlay {
    std::optional<std::string> value;  // nullopt: removed
    uint64_t seq;
  };

  struct RemovedSubtree {
    std::string prefix;
    uint64_t seq;
  };

  bool enqueue(FileStorage::Change change);
  // Whether a queued subtree removal newer than `since` covers `key`.
  bool removed_after(std::string_view key, uint64_t since) const;
  void run_writer();
  void run_sweeper();
  // On the node's thread: the actions the commits so far released.
  void release();

  FileStorage& files_;
  Post post_;
  Fatal on_fatal_;
  Options options_;

  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable committed_;
  std::condition_variable swept_;  // the sweeper's wake-up
  std::deque<Queued> queue_;  // not yet durable, oldest first
  // The newest value of every key with a change in queue_, and the subtree
  // removals in queue_, oldest first.
  std::map<std::string, Overlay, std::less<>> overlay_;
  std::vector<RemovedSubtree> removed_subtrees_;
  bool sweep_due_ = false;
  uint64_t durable_ = 0;  // changes 1..durable_ are on disk
  bool stopping_ = false;
  bool failed_ = false;
  Stats stats_;

  // The node's thread only.
  uint64_t issued_ = 0;
  std::deque<std::pair<uint64_t, Action>> waiting_;  // (changes it waits for, action)
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  std::thread writer_;
  std::thread sweeper_;
};

}  // namespace mesh::agent
