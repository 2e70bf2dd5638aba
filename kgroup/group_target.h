#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace mesh::kgroup {

// What a k-group serves: one device, one cluster of devices, one routine,
// or the mesh's catalog of devices and routines ("catalog:mesh").
enum class TargetKind { device, cluster, routine, catalog };

std::string_view to_string(TargetKind kind);

// A group target, written "device:ID", "cluster:ID", "routine:ID" or "catalog:ID". The
// printed form is what selection hashes, so it must be canonical: parse()
// accepts exactly what to_string() prints.
struct GroupTarget {
  TargetKind kind = TargetKind::device;
  std::string id;

  // Rejects unknown kinds, empty ids, and ids with control characters or
  // longer than kMaxIdLength.
  static std::optional<GroupTarget> parse(std::string_view text);
  std::string to_string() const;

  friend auto operator<=>(const GroupTarget&, const GroupTarget&) = default;
};

inline constexpr size_t kMaxIdLength = 128;

}  // namespace mesh::kgroup
