#pragma once

#include <utility>
#include <variant>

namespace mesh::core {

// The outcome of an operation that can fail for expected reasons (bad input,
// a timeout): a value or an error, never an exception. std::expected arrives
// only in C++23.
template <typename E>
struct Unexpected {
  // A constructor, not aggregate init: clang 14 lacks parenthesised
  // aggregate initialisation, and callers write Unexpected(error).
  explicit Unexpected(E e) : error(std::move(e)) {}
  E error;
};
template <typename E>
Unexpected(E) -> Unexpected<E>;

template <typename T, typename E>
class Expected {
 public:
  Expected(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Expected(Unexpected<E> error) : state_(std::in_place_index<1>, std::move(error.error)) {}  // NOLINT

  bool has_value() const { return state_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  const E& error() const { return std::get<1>(state_); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, E> state_;
};

}  // namespace mesh::core
