#include "sim/sim_disk.h"

#include <algorithm>

namespace mesh::sim {

void SimDisk::attach(core::Env& env) {
  env_ = &env;
  if (in_flight_ == 0) start_commit();
}

void SimDisk::power_cut(core::Rng& rng) {
  if (in_flight_ > 0) {
    const auto landed = static_cast<size_t>(rng.between(0, static_cast<int64_t>(in_flight_)));
    for (size_t i = 0; i < landed; ++i) apply(queue_[i]);
    lost_ += queue_.size() - landed;
  } else {
    lost_ += queue_.size();
  }
  queue_.clear();
  overlay_.clear();
  waiting_.clear();
  in_flight_ = 0;
  durable_seq_ = issued_;
  env_ = nullptr;
  ++life_;
}

core::StoredValue SimDisk::read(std::string_view key) const {
  if (auto it = overlay_.find(key); it != overlay_.end()) {
    if (!it->second.first) return {};
    return {core::ReadStatus::found, *it->second.first};
  }
  return durable_.read(key);
}

bool SimDisk::put(std::string_view key, std::string_view value) {
  change(key, value);
  return true;
}

bool SimDisk::remove(std::string_view key) {
  change(key, std::nullopt);
  return true;
}

void SimDisk::change(std::string_view key, std::optional<std::string_view> value) {
  const uint64_t seq = ++issued_;
  Change queued{seq, std::string(key), value ? std::optional<std::string>(*value) : std::nullopt};
  if (synchronous()) {
    apply(queued);
    durable_seq_ = seq;
    return;
  }
  overlay_.insert_or_assign(queued.key, std::make_pair(queued.value, seq));
  queue_.push_back(std::move(queued));
  if (in_flight_ == 0) start_commit();
}

std::vector<std::string> SimDisk::keys(std::string_view prefix) const {
  std::vector<std::string> out;
  for (std::string& key : durable_.keys(prefix)) {
    if (auto it = overlay_.find(key); it != overlay_.end() && !it->second.first) continue;
    out.push_back(std::move(key));
  }
  for (auto it = overlay_.lower_bound(prefix); it != overlay_.end() && it->first.starts_with(prefix); ++it) {
    if (it->second.first) out.push_back(it->first);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void SimDisk::after_durable(Action action) {
  if (waiting_.empty() && durable_seq_ >= issued_) {
    action();
    return;
  }
  waiting_.emplace_back(issued_, std::move(action));
}

void SimDisk::start_commit() {
  if (env_ == nullptr || queue_.empty()) return;
  in_flight_ = queue_.size();
  core::Rng& rng = env_->rng();
  core::Duration took(rng.between(options_.min_commit.count(), options_.max_commit.count()));
  if (options_.stall_probability > 0.0 && rng.chance(options_.stall_probability)) took += options_.stall;
  env_->start_timer(took, [this, life = life_] {
    if (life == life_) finish_commit();
  });
}

void SimDisk::finish_commit() {
  if (env_->now() < stall_until_) {
    env_->start_timer(stall_until_ - env_->now(), [this, life = life_] {
      if (life == life_) finish_commit();
    });
    return;
  }
  for (size_t i = 0; i < in_flight_; ++i) {
    const Change& done = queue_.front();
    apply(done);
    if (auto it = overlay_.find(done.key); it != overlay_.end() && it->second.second == done.seq) overlay_.erase(it);
    durable_seq_ = done.seq;
    queue_.pop_front();
  }
  in_flight_ = 0;
  // Changes the actions below make start the next commit; so do those that
  // queued while this one ran.
  while (!waiting_.empty() && waiting_.front().first <= durable_seq_) {
    Action action = std::move(waiting_.front().second);
    waiting_.pop_front();
    action();
  }
  if (in_flight_ == 0) start_commit();
}

void SimDisk::apply(const Change& change) {
  if (change.value) {
    durable_.put(change.key, *change.value);
  } else {
    durable_.remove(change.key);
  }
}

}  // namespace mesh::sim
