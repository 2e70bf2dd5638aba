#include "sim/counter_log.h"

#include <charconv>
#include <utility>

namespace mesh::sim {

CounterLog::CounterLog(KgroupChecker& checker, std::string target, std::function<void()> on_restored)
    : checker_(checker), target_(std::move(target)), on_restored_(std::move(on_restored)) {}

void CounterLog::apply(uint64_t seq, std::string_view update) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(update.data(), update.data() + update.size(), value);
  if (ec != std::errc() || end != update.data() + update.size()) {
    checker_.fail(target_ + " applied a non-counter update at seq " + std::to_string(seq));
    return;
  }
  if (last_seq_ && seq != *last_seq_ + 1) {
    checker_.fail(target_ + " applied seq " + std::to_string(seq) + " after " + std::to_string(*last_seq_));
  }
  last_seq_ = seq;
  checker_.applied(target_, values_.size(), value);
  position_[value] = values_.size();
  values_.push_back(value);
}

std::string CounterLog::snapshot() const {
  std::string out;
  for (uint64_t v : values_) out += std::to_string(v) + "\n";
  return out;
}

bool CounterLog::restore(std::string_view snapshot) {
  std::vector<uint64_t> values;
  size_t at = 0;
  while (at < snapshot.size()) {
    const size_t end = snapshot.find('\n', at);
    if (end == std::string_view::npos) return false;
    uint64_t v = 0;
    const auto [ptr, ec] = std::from_chars(snapshot.data() + at, snapshot.data() + end, v);
    if (ec != std::errc() || ptr != snapshot.data() + end) return false;
    values.push_back(v);
    at = end + 1;
  }
  values_ = std::move(values);
  position_.clear();
  for (size_t p = 0; p < values_.size(); ++p) {
    checker_.applied(target_, p, values_[p]);
    position_[values_[p]] = p;
  }
  // Sequence numbers restart in the inheriting group.
  last_seq_.reset();
  if (on_restored_) on_restored_();
  return true;
}

std::optional<size_t> CounterLog::position_of(uint64_t value) const {
  const auto it = position_.find(value);
  if (it == position_.end()) return std::nullopt;
  return it->second;
}

}  // namespace mesh::sim
