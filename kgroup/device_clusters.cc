#include "kgroup/device_clusters.h"

#include <algorithm>
#include <limits>

#include "core/rng.h"
#include "core/sha256.h"

namespace mesh::kgroup {
namespace {

uint64_t seeded_hash(uint64_t seed, const std::string& a, const std::string& b) {
  std::string input = "mesh-kgroup-rep-v1";
  for (int shift = 56; shift >= 0; shift -= 8) input.push_back(static_cast<char>((seed >> shift) & 0xff));
  input += a;
  input.push_back('\0');
  input += b;
  const core::Sha256Digest digest = core::sha256(std::string_view(input));
  uint64_t value = 0;
  for (size_t i = 0; i < 8; ++i) value = (value << 8) | digest[i];
  return value;
}

size_t nearest(const std::vector<Point>& centres, const Point& p) {
  size_t best = 0;
  int64_t best_d = std::numeric_limits<int64_t>::max();
  for (size_t c = 0; c < centres.size(); ++c) {
    const int64_t d = distance2(centres[c], p);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

}  // namespace

DeviceClusters DeviceClusters::build(std::vector<DeviceLocation> devices, const Options& options) {
  DeviceClusters result;
  std::sort(devices.begin(), devices.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  devices.erase(std::unique(devices.begin(), devices.end(), [](const auto& a, const auto& b) { return a.id == b.id; }),
                devices.end());
  if (devices.empty()) return result;
  const size_t n = devices.size();
  const size_t per = std::max<size_t>(options.devices_per_cluster, 1);
  const size_t k = (n + per - 1) / per;

  std::vector<Point> points;
  points.reserve(n);
  for (const auto& d : devices) points.push_back(to_point(d.location));

  // k-means++ seeding with integer weights (squared mm scaled down to keep the
  // sum within 64 bits).
  core::Rng rng(options.seed ^ 0x6b6d65616e73ULL);
  std::vector<Point> centres;
  centres.push_back(points[rng.below(n)]);
  while (centres.size() < k) {
    std::vector<uint64_t> weight(n);
    uint64_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      weight[i] = static_cast<uint64_t>(distance2(points[i], centres[nearest(centres, points[i])])) >> 20;
      total += weight[i];
    }
    if (total == 0) {
      // Every point coincides with a centre: duplicates cannot be separated.
      centres.push_back(points[rng.below(n)]);
      continue;
    }
    uint64_t pick = rng.below(total);
    size_t chosen = 0;
    for (size_t i = 0; i < n; ++i) {
      if (pick < weight[i]) {
        chosen = i;
        break;
      }
      pick -= weight[i];
    }
    centres.push_back(points[chosen]);
  }

  std::vector<size_t> assignment(n, 0);
  for (uint32_t iteration = 0; iteration < std::max<uint32_t>(options.max_iterations, 1); ++iteration) {
    bool changed = iteration == 0;
    for (size_t i = 0; i < n; ++i) {
      const size_t c = nearest(centres, points[i]);
      if (c != assignment[i]) changed = true;
      assignment[i] = c;
    }
    if (!changed) break;
    std::vector<std::array<int64_t, 3>> sum(k, {0, 0, 0});
    std::vector<int64_t> count(k, 0);
    for (size_t i = 0; i < n; ++i) {
      for (size_t d = 0; d < 3; ++d) sum[assignment[i]][d] += points[i].mm[d];
      ++count[assignment[i]];
    }
    for (size_t c = 0; c < k; ++c) {
      if (count[c] == 0) continue;  // keeps its centre; a later pass may refill it
      for (size_t d = 0; d < 3; ++d) centres[c].mm[d] = sum[c][d] / count[c];
    }
  }

  std::vector<DeviceCluster> clusters(k);
  for (size_t i = 0; i < n; ++i) clusters[assignment[i]].devices.push_back(devices[i].id);
  for (size_t c = 0; c < k; ++c) clusters[c].centroid = centres[c];
  clusters.erase(std::remove_if(clusters.begin(), clusters.end(), [](const auto& c) { return c.devices.empty(); }),
                 clusters.end());
  // devices are visited in id order, so each list is sorted and front() is the smallest.
  std::sort(clusters.begin(), clusters.end(),
            [](const auto& a, const auto& b) { return a.devices.front() < b.devices.front(); });
  for (size_t c = 0; c < clusters.size(); ++c) {
    DeviceCluster& cluster = clusters[c];
    // Named by its smallest device id (devices are sorted): a name that
    // survives catalog changes elsewhere, where an index would shift.
    cluster.id = cluster.devices.front();
    cluster.centre_device = *representative_device("cluster:" + cluster.id, cluster.devices, options.seed);
    for (const auto& d : cluster.devices) result.cluster_of_[d] = c;
  }
  for (const auto& d : devices) result.location_of_[d.id] = d.location;
  result.clusters_ = std::move(clusters);
  return result;
}

std::optional<size_t> DeviceClusters::cluster_of(const std::string& device) const {
  const auto it = cluster_of_.find(device);
  if (it == cluster_of_.end()) return std::nullopt;
  return it->second;
}

std::optional<Location> DeviceClusters::location_of(const std::string& device) const {
  const auto it = location_of_.find(device);
  if (it == location_of_.end()) return std::nullopt;
  return it->second;
}

std::vector<Location> DeviceClusters::cluster_neighbours(const std::string& device) const {
  std::vector<Location> out;
  const auto c = cluster_of(device);
  if (!c) return out;
  for (const auto& other : clusters_[*c].devices) {
    if (other != device) out.push_back(location_of_.at(other));
  }
  return out;
}

std::optional<std::string> representative_device(const std::string& routine_id,
                                                 const std::vector<std::string>& touched_devices, uint64_t seed) {
  std::optional<std::string> best;
  uint64_t best_hash = 0;
  for (const auto& device : touched_devices) {
    const uint64_t h = seeded_hash(seed, routine_id, device);
    if (!best || h < best_hash || (h == best_hash && device < *best)) {
      best = device;
      best_hash = h;
    }
  }
  return best;
}

}  // namespace mesh::kgroup
