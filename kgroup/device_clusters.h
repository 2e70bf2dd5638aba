#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kgroup/geometry.h"

namespace mesh::kgroup {

// A device (simple or smart) as clustering sees it.
struct DeviceLocation {
  std::string id;
  Location location{};
};

struct DeviceCluster {
  std::string id;                    // its smallest device id: the group target is cluster:<id>
  std::vector<std::string> devices;  // sorted
  std::string centre_device;         // CoMesh's "random device chosen as the centre"
  Point centroid;
};

// CoMesh 3.6 "limiting the number of k-groups": devices partitioned by
// k-means into ceil(n / devices_per_cluster) clusters. Deterministic: the
// input is sorted by id, seeding (k-means++) draws from core::Rng(seed), and
// the arithmetic is on integer millimetres, so every node with the same
// device list and seed computes the same clusters. Clusters are numbered by
// their smallest device id.
class DeviceClusters {
 public:
  struct Options {
    size_t devices_per_cluster = 25;
    uint64_t seed = 0;
    uint32_t max_iterations = 100;
  };

  static DeviceClusters build(std::vector<DeviceLocation> devices, const Options& options);

  const std::vector<DeviceCluster>& clusters() const { return clusters_; }
  // The cluster index of a device, if it was clustered.
  std::optional<size_t> cluster_of(const std::string& device) const;
  std::optional<Location> location_of(const std::string& device) const;
  // The other devices of a device's cluster, as locations (LSH borrowing).
  std::vector<Location> cluster_neighbours(const std::string& device) const;

 private:
  std::vector<DeviceCluster> clusters_;
  std::map<std::string, size_t> cluster_of_;
  std::map<std::string, Location> location_of_;
};

// A routine's representative device (CoMesh 3.6): the touched device with the
// lowest SHA-256(seed, routine, device); the routine's group follows that
// device's cluster. Empty if the routine touches no device.
std::optional<std::string> representative_device(const std::string& routine_id,
                                                 const std::vector<std::string>& touched_devices, uint64_t seed);

}  // namespace mesh::kgroup
