#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace mesh::routing {

// A hashed map from 64-bit keys, stored in one array (open addressing,
// linear probing, deletion by backward shift). OLSR's duplicate set is looked
// up for every message received and holds every message of the mesh seen
// within DUP_HOLD: a node-based std::unordered_map cost a cache miss for the
// bucket and another for the node on most lookups, and an allocation per
// insert. Never iterated, so no order to keep.
//
// The key ~0 is reserved (it marks an empty slot). Pointers returned stay
// valid until the next insert or erase.
template <typename Value>
class U64HashMap {
 public:
  static constexpr uint64_t kReservedKey = ~uint64_t{0};

  Value* find(uint64_t key) {
    if (slots_.empty()) return nullptr;
    for (size_t i = home(key);; i = next(i)) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kReservedKey) return nullptr;
    }
  }
  // Adds `key` (which must not be present) with `value`.
  Value& insert(uint64_t key, Value value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    size_t i = home(key);
    while (slots_[i].key != kReservedKey) i = next(i);
    slots_[i] = Slot{key, std::move(value)};
    ++size_;
    return slots_[i].value;
  }
  // Whether `key` was present.
  bool erase(uint64_t key) {
    if (slots_.empty()) return false;
    size_t hole = home(key);
    while (slots_[hole].key != key) {
      if (slots_[hole].key == kReservedKey) return false;
      hole = next(hole);
    }
    // Backward shift: move up every later entry of the run that may not sit
    // past the hole, so no probe sequence ever crosses an empty slot early.
    for (size_t i = next(hole); slots_[i].key != kReservedKey; i = next(i)) {
      const size_t wanted = home(slots_[i].key);
      if (distance(wanted, i) >= distance(hole, i)) {
        slots_[hole] = std::move(slots_[i]);
        hole = i;
      }
    }
    slots_[hole].key = kReservedKey;
    --size_;
    return true;
  }
  size_t size() const { return size_; }
  // Room for `entries` without growing: one allocation where a map filled
  // from empty would grow (and rehash) at every doubling.
  void reserve(size_t entries) {
    size_t capacity = slots_.empty() ? 16 : slots_.size();
    while (2 * entries > capacity) capacity *= 2;
    if (capacity != slots_.size()) rehash(capacity);
  }

 private:
  struct Slot {
    uint64_t key = kReservedKey;
    Value value{};
  };

  // Fibonacci hashing: keys that differ in their low bits (sequence numbers)
  // spread over the table.
  size_t home(uint64_t key) const {
    constexpr uint64_t kGoldenRatio = 0x9e3779b97f4a7c15;
    return static_cast<size_t>((key * kGoldenRatio) >> shift_);
  }
  size_t next(size_t i) const { return (i + 1) & (slots_.size() - 1); }
  // Probe steps from `from` forward to `to`.
  size_t distance(size_t from, size_t to) const { return (to - from) & (slots_.size() - 1); }

  void grow() { rehash(slots_.empty() ? 16 : 2 * slots_.size()); }
  // `capacity`: a power of two, at least twice the entries held.
  void rehash(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (Slot& slot : old) {
      if (slot.key != kReservedKey) insert(slot.key, std::move(slot.value));
    }
  }

  std::vector<Slot> slots_;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace mesh::routing
