#include "agent/runtime/write_behind_storage.h"

#include <algorithm>
#include <utility>

#include "core/log.h"

namespace mesh::agent {

WriteBehindStorage::WriteBehindStorage(FileStorage& files, Post post, Fatal on_fatal, Options options)
    : files_(files), post_(std::move(post)), on_fatal_(std::move(on_fatal)), options_(options) {
  writer_ = std::thread([this] { run_writer(); });
  sweeper_ = std::thread([this] { run_sweeper(); });
}

WriteBehindStorage::~WriteBehindStorage() {
  *alive_ = false;
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  writer_.join();
  {
    const std::lock_guard lock(mutex_);
    sweep_due_ = true;  // one last sweep, then stop
  }
  swept_.notify_all();
  sweeper_.join();
}

core::StoredValue WriteBehindStorage::read(std::string_view key) const {
  {
    const std::lock_guard lock(mutex_);
    const auto it = overlay_.find(key);
    if (removed_after(key, it == overlay_.end() ? 0 : it->second.seq)) return {};
    if (it != overlay_.end()) {
      if (!it->second.value) return {};
      return {core::ReadStatus::found, *it->second.value};
    }
  }
  // No change of this key is queued, and only this thread queues one: the
  // file holds the newest value.
  return files_.read(key);
}

bool WriteBehindStorage::removed_after(std::string_view key, uint64_t since) const {
  return std::any_of(removed_subtrees_.begin(), removed_subtrees_.end(), [&](const RemovedSubtree& removed) {
    return removed.seq > since && key.starts_with(removed.prefix);
  });
}

bool WriteBehindStorage::put(std::string_view key, std::string_view value) {
  if (const std::string problem = FileStorage::key_error(key); !problem.empty()) {
    core::log("agent").warn("storage put refused key={} reason={}", key, problem);
    return false;
  }
  return enqueue(FileStorage::Change{std::string(key), std::string(value)});
}

bool WriteBehindStorage::remove(std::string_view key) {
  if (const std::string problem = FileStorage::key_error(key); !problem.empty()) {
    core::log("agent").warn("storage remove refused key={} reason={}", key, problem);
    return false;
  }
  return enqueue(FileStorage::Change{std::string(key), std::nullopt});
}

bool WriteBehindStorage::remove_prefix(std::string_view prefix) {
  if (const std::string problem = FileStorage::prefix_error(prefix); !problem.empty()) {
    core::log("agent").warn("storage remove refused prefix={} reason={}", prefix, problem);
    return false;
  }
  return enqueue(FileStorage::Change{std::string(prefix), std::nullopt, true});
}

bool WriteBehindStorage::enqueue(FileStorage::Change change) {
  const uint64_t seq = ++issued_;
  {
    const std::lock_guard lock(mutex_);
    if (change.subtree) {
      removed_subtrees_.push_back(RemovedSubtree{change.key, seq});
    } else {
      overlay_.insert_or_assign(change.key, Overlay{change.value, seq});
    }
    queue_.push_back(Queued{seq, std::move(change)});
  }
  work_.notify_one();
  return true;
}

std::vector<std::string> WriteBehindStorage::keys(std::string_view prefix) const {
  // The queued changes first, then the files: a change committed in between
  // is in both, one committed before is in the files, so the newest state
  // of every key is seen.
  std::map<std::string, Overlay, std::less<>> queued;
  std::vector<RemovedSubtree> removed;
  {
    const std::lock_guard lock(mutex_);
    for (auto it = overlay_.lower_bound(prefix); it != overlay_.end() && it->first.starts_with(prefix); ++it) {
      queued.emplace(it->first, it->second);
    }
    removed = removed_subtrees_;
  }
  auto removed_since = [&](std::string_view key, uint64_t since) {
    return std::any_of(removed.begin(), removed.end(),
                       [&](const RemovedSubtree& r) { return r.seq > since && key.starts_with(r.prefix); });
  };
  std::vector<std::string> out;
  for (std::string& key : files_.keys(prefix)) {
    if (queued.contains(key) || removed_since(key, 0)) continue;
    out.push_back(std::move(key));
  }
  for (const auto& [key, overlay] : queued) {
    if (overlay.value && !removed_since(key, overlay.seq)) out.push_back(key);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void WriteBehindStorage::after_durable(Action action) {
  uint64_t durable = 0;
  {
    const std::lock_guard lock(mutex_);
    durable = durable_;
  }
  if (waiting_.empty() && durable >= issued_) {
    action();
    return;
  }
  waiting_.emplace_back(issued_, std::move(action));
}

void WriteBehindStorage::release() {
  uint64_t durable = 0;
  {
    const std::lock_guard lock(mutex_);
    durable = durable_;
  }
  while (!waiting_.empty() && waiting_.front().first <= durable) {
    Action action = std::move(waiting_.front().second);
    waiting_.pop_front();
    action();  // may queue changes and actions of its own, behind these
  }
}

bool WriteBehindStorage::flush() {
  const uint64_t target = issued_;
  std::unique_lock lock(mutex_);
  committed_.wait(lock, [&] { return durable_ >= target || failed_; });
  return durable_ >= target;
}

WriteBehindStorage::Stats WriteBehindStorage::stats() const {
  const std::lock_guard lock(mutex_);
  Stats stats = stats_;
  stats.queued = queue_.size();
  return stats;
}

void WriteBehindStorage::run_writer() {
  std::chrono::milliseconds backoff = options_.first_retry;
  std::vector<FileStorage::Change> batch;
  while (true) {
    uint64_t last_seq = 0;
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      const size_t n = std::min(queue_.size(), options_.max_batch);
      batch.clear();
      for (size_t i = 0; i < n; ++i) batch.push_back(queue_[i].change);
      last_seq = queue_[n - 1].seq;
    }
    if (options_.before_commit) options_.before_commit();
    const auto started = std::chrono::steady_clock::now();
    const FileStorage::CommitResult result = files_.commit(batch);
    const double elapsed_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    if (result == FileStorage::CommitResult::fatal) {
      {
        const std::lock_guard lock(mutex_);
        failed_ = true;
      }
      committed_.notify_all();
      on_fatal_(fmt::format("storage commit of {} changes in {} failed part-way; what the disk holds is unknown, "
                            "so the agent stops and recovers from it and from its groups at restart",
                            batch.size(), files_.directory()));
      return;
    }
    if (result == FileStorage::CommitResult::retry) {
      bool give_up = false;
      {
        const std::lock_guard lock(mutex_);
        ++stats_.retries;
        give_up = stopping_;
      }
      core::log("agent").error(
          "storage commit of {} changes failed and changed nothing; retrying in {} ms. Outputs that depend on them "
          "are held until it succeeds: free space in {} or fix the error above",
          batch.size(), backoff.count(), files_.directory());
      if (give_up) {
        core::log("agent").error("storage stopping with {} changes not durable", batch.size());
        return;
      }
      std::unique_lock lock(mutex_);
      work_.wait_for(lock, backoff, [&] { return stopping_; });
      backoff = std::min(backoff * 2, options_.max_retry);
      continue;
    }
    backoff = options_.first_retry;
    if (elapsed_ms > static_cast<double>(options_.slow_commit.count())) {
      core::log("agent").warn(
          "storage commit of {} changes took {:.0f} ms: the disk is slow; messages and answers that depend on "
          "them waited that long (Medley and echo did not)",
          batch.size(), elapsed_ms);
    }
    {
      const std::lock_guard lock(mutex_);
      for (size_t i = 0; i < batch.size(); ++i) {
        const Queued& done = queue_.front();
        if (auto it = overlay_.find(done.change.key); it != overlay_.end() && it->second.seq == done.seq) {
          overlay_.erase(it);
        }
        queue_.pop_front();
      }
      std::erase_if(removed_subtrees_, [&](const RemovedSubtree& removed) { return removed.seq <= last_seq; });
      if (std::any_of(batch.begin(), batch.end(), [](const FileStorage::Change& c) { return c.subtree; })) {
        sweep_due_ = true;
      }
      durable_ = last_seq;
      ++stats_.commits;
      stats_.changes += batch.size();
      stats_.last_commit_ms = elapsed_ms;
      stats_.max_commit_ms = std::max(stats_.max_commit_ms, elapsed_ms);
      // Posted under the lock, so whoever sees durable_ advanced (flush())
      // can count on the release being on its way to the loop.
      post_([this, alive = alive_] {
        if (*alive) release();
      });
    }
    committed_.notify_all();
    swept_.notify_all();
  }
}

void WriteBehindStorage::run_sweeper() {
  while (true) {
    bool stopping = false;
    {
      std::unique_lock lock(mutex_);
      swept_.wait(lock, [&] { return sweep_due_; });
      sweep_due_ = false;
      stopping = stopping_;
    }
    // Deleting a removed subtree's files costs the disk about as much as
    // writing them; here it holds back no commit and no output.
    files_.sweep_removed();
    if (stopping) return;
  }
}

}  // namespace mesh::agent
