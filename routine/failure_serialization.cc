#include "routine/failure_serialization.h"

#include <fmt/format.h>

#include "core/fnv1a.h"

namespace mesh::routine {

AvailabilityBaseline make_baseline(const std::map<std::string, DeviceAvailability>& watched) {
  AvailabilityBaseline baseline;
  std::string listed;
  for (const auto& [device, availability] : watched) {
    listed += fmt::format("{}\n{}\n", device, availability.events);
  }
  baseline.digest = core::fnv1a(listed);
  baseline.devices = static_cast<uint32_t>(watched.size());
  if (watched.size() <= kMaxNamedBaselineDevices) {
    for (const auto& [device, availability] : watched) baseline.events.push_back(availability.events);
  }
  return baseline;
}

proto::AvailabilityBaselineMsg to_proto(const AvailabilityBaseline& baseline) {
  proto::AvailabilityBaselineMsg msg;
  msg.set_digest(baseline.digest);
  msg.set_devices(baseline.devices);
  for (const uint64_t events : baseline.events) msg.add_events(events);
  return msg;
}

AvailabilityBaseline from_proto(const proto::AvailabilityBaselineMsg& msg) {
  AvailabilityBaseline baseline;
  baseline.digest = msg.digest();
  baseline.devices = msg.devices();
  baseline.events.assign(msg.events().begin(), msg.events().end());
  return baseline;
}

WatchedDevices watched_devices(Visibility visibility) {
  switch (visibility) {
    case Visibility::gsv:
      return WatchedDevices::locked;
    case Visibility::sgsv:
      return WatchedDevices::all;
    case Visibility::wv:
    case Visibility::psv:
    case Visibility::ev:
      return WatchedDevices::none;
  }
  return WatchedDevices::none;
}

bool serializes_failures(Visibility visibility) { return visibility != Visibility::wv; }

namespace {

std::string what_happened(const DeviceAvailability& now) {
  return now.up ? "failed and restarted" : "failed";
}

// GSV and S-GSV: any event on a watched device since the start.
std::optional<std::string> changed_since_start(const FinishCheck& check) {
  const AvailabilityBaseline& start = *check.baseline;
  const std::string model(to_string(check.visibility));
  const std::string rule = check.visibility == Visibility::sgsv
                               ? "S-GSV aborts a routine when any device of the mesh fails or restarts while it runs"
                               : "GSV aborts a routine when a device it locks fails or restarts while it runs";
  const AvailabilityBaseline now = make_baseline(check.watched_now);
  if (now.digest == start.digest && now.devices == start.devices) return std::nullopt;
  if (now.devices == start.devices && start.events.size() == check.watched_now.size()) {
    size_t i = 0;
    for (const auto& [device, availability] : check.watched_now) {
      if (availability.events != start.events[i++]) {
        return fmt::format("device {} {} while the routine ran ({})", device, what_happened(availability), rule);
      }
    }
  }
  if (now.devices != start.devices) {
    return fmt::format("the devices it watches changed while it ran ({} at its start, {} now), so it cannot tell "
                       "whether one failed meanwhile ({})",
                       start.devices, now.devices, rule);
  }
  std::string down;
  for (const auto& [device, availability] : check.watched_now) {
    if (!availability.up) down += (down.empty() ? "" : ", ") + device;
  }
  return fmt::format("a device failed or restarted while the routine ran{} ({})", down.empty() ? std::string() : "; down now: " + down, rule);
}

// EV's rules 2, 3 and 4 (PSV's with 3*) for each device the routine
// touched.
std::optional<std::string> touches_rule(const FinishCheck& check) {
  for (const auto& [device, counts] : check.touches) {
    if (counts.empty()) continue;
    if (counts.front() != counts.back()) {
      return fmt::format("device {} failed or restarted between two of the routine's commands on it (an event "
                         "inside a routine's use of a device cannot be serialized before or after it)",
                         device);
    }
    // EV serializes a failure after the routine's last command on the
    // device after the routine, whether or not the device is back.
    if (check.visibility == Visibility::ev) continue;
    const auto now = check.touched_now.find(device);
    if (now == check.touched_now.end()) continue;
    if (now->second.events != counts.back() && !now->second.up) {
      return fmt::format("device {} failed after the routine's last command on it and is still down at its "
                         "finish (PSV serializes such a failure after the routine only once the device is back)",
                         device);
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> failure_abort_reason(const FinishCheck& check) {
  if (!serializes_failures(check.visibility)) return std::nullopt;
  if (watched_devices(check.visibility) != WatchedDevices::none && check.baseline) {
    if (auto reason = changed_since_start(check)) return reason;
  }
  return touches_rule(check);
}

}  // namespace mesh::routine
