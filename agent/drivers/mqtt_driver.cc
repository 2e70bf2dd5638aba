#include "agent/drivers/mqtt_driver.h"

#include <utility>

#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <fmt/format.h>

#include "core/log.h"

namespace mesh::drivers {

using routine::DriverError;
using routine::DriverFailure;
using routine::DriverResult;

struct MqttDriver::Pending {
  explicit Pending(asio::io_context& io) : timer(io) {}
  bool is_read = false;
  std::set<std::string> wanted;  // actuations: attributes whose report confirms it
  Callback callback;
  asio::steady_timer timer;
};


MqttDriver::MqttDriver(asio::io_context& io, std::shared_ptr<MqttConnection> connection, mqtt::Device device,
                       Options options)
    : io_(io),
      connection_(std::move(connection)),
      device_(std::move(device)),
      options_(options),
      alive_(std::make_shared<MqttDriver*>(this)) {
  for (const auto& topic : mqtt::subscriptions(device_)) {
    subscriptions_.push_back(connection_->subscribe(
        topic, [this](const std::string& t, std::string_view payload) { on_message(t, payload); }));
  }
  status_id_ =
      connection_->on_status([this](bool connected, const std::string& reason) { on_status(connected, reason); });
}

MqttDriver::~MqttDriver() {
  alive_.reset();
  // Unsubscribing touches maps and libmosquitto; a destructor must not throw,
  // and a timer whose cancel() failed finds the driver gone (alive_).
  try {
    for (uint64_t id : subscriptions_) connection_->unsubscribe(id);
    connection_->remove_status(status_id_);
    for (auto& [id, pending] : pending_) pending->timer.cancel();
  } catch (...) {  // NOLINT(bugprone-empty-catch)
  }
}

core::Expected<std::unique_ptr<MqttDriver>, std::string> MqttDriver::open(asio::io_context& io, MqttBrokers& brokers,
                                                                          const routine::DeviceSpec& spec,
                                                                          const DriverUri& uri) {
  auto error = [&](std::string_view what) {
    return core::Unexpected(fmt::format("device {}: driver URI '{}': {}", spec.id, spec.driver, what));
  };
  mqtt::Device device;
  device.kind = spec.kind;
  const auto segments = uri.path_segments();
  if (uri.scheme == "z2m") {
    device.flavor = mqtt::Flavor::z2m;
    if (segments.size() < 2) return error("expected z2m://BROKER[:PORT]/BASE/NAME");
    device.name = segments.back();
    for (size_t i = 0; i + 1 < segments.size(); ++i) device.base += (i == 0 ? "" : "/") + segments[i];
  } else if (uri.scheme == "tasmota") {
    device.flavor = mqtt::Flavor::tasmota;
    if (segments.empty()) return error("expected tasmota://BROKER[:PORT]/TOPIC");
    for (size_t i = 0; i < segments.size(); ++i) device.name += (i == 0 ? "" : "/") + segments[i];
    if (spec.kind == routine::DeviceKind::lock || spec.kind == routine::DeviceKind::thermostat) {
      return error(fmt::format("Tasmota has no convention for a {}", routine::to_string(spec.kind)));
    }
  } else {
    return error("not an MQTT scheme (z2m, tasmota)");
  }
  for (const auto& name : {device.base, device.name}) {
    if (name.find_first_of("+#") != std::string::npos) return error("topics must not contain MQTT wildcards (+, #)");
  }

  std::set<std::string> used;
  auto settings = mqtt_settings_from_uri(uri, used);
  if (!settings) return error(settings.error());
  Options options;
  if (auto timeout = uri.option("timeout_ms")) {
    used.insert("timeout_ms");
    auto ms = parse_query_int(*timeout, 1, 600000);
    if (!ms) return error("timeout_ms must be an integer 1..600000");
    options.timeout = std::chrono::milliseconds(*ms);
  }
  if (auto qos = uri.option("qos")) {
    used.insert("qos");
    auto level = parse_query_int(*qos, 0, 1);
    if (!level) return error("qos must be 0 or 1");
    options.qos = *level;
  }
  for (const auto& [key, value] : uri.query) {
    if (used.count(key) == 0) {
      return error(
          fmt::format("unknown option '{}' (known: timeout_ms, qos, tls, ca, cert, key, insecure, user, "
                      "password_file, keepalive_s)",
                      key));
    }
  }
  std::shared_ptr<MqttConnection> connection;
  try {
    connection = brokers.get(*settings);
  } catch (const std::exception& e) {
    return error(e.what());
  }
  return std::make_unique<MqttDriver>(io, std::move(connection), std::move(device), options);
}

std::string MqttDriver::label() const {
  if (device_.flavor == mqtt::Flavor::z2m)
    return fmt::format("{}/{}/{}", connection_->settings().describe(), device_.base, device_.name);
  return fmt::format("{}/{}", connection_->settings().describe(), device_.name);
}

void MqttDriver::fail_soon(DriverError error, Callback callback) {
  std::weak_ptr<MqttDriver*> alive = alive_;
  asio::post(io_, [alive, error = std::move(error), callback = std::move(callback)] {
    if (!alive.expired()) callback(core::Unexpected(error));
  });
}

uint64_t MqttDriver::add_pending(bool is_read, std::set<std::string> wanted, Callback callback, std::string what) {
  const uint64_t id = next_pending_++;
  auto pending = std::make_unique<Pending>(io_);
  pending->is_read = is_read;
  pending->wanted = std::move(wanted);
  pending->callback = std::move(callback);
  pending->timer.expires_after(options_.timeout);
  std::weak_ptr<MqttDriver*> alive = alive_;
  pending->timer.async_wait([this, alive, id, what = std::move(what)](const asio::error_code& error) {
    if (alive.expired() || error) return;
    complete({id},
             core::Unexpected(DriverError{DriverFailure::timeout,
                                          fmt::format("{}: {} within {} ms", label(), what, options_.timeout.count())}),
             std::nullopt);
  });
  pending_.emplace(id, std::move(pending));
  return id;
}

void MqttDriver::read(Callback callback) {
  if (!connection_->connected()) {
    fail_soon(
        {DriverFailure::unreachable, fmt::format("{}: broker not connected: {}", label(), connection_->last_error())},
        std::move(callback));
    return;
  }
  if (online_ == false) {
    fail_soon({DriverFailure::unreachable, fmt::format("{}: the device reports itself offline", label())},
              std::move(callback));
    return;
  }
  if (have_state_) {
    std::weak_ptr<MqttDriver*> alive = alive_;
    asio::post(io_, [this, alive, callback = std::move(callback)] {
      if (alive.expired()) return;
      callback(state_);
    });
    return;
  }
  add_pending(true, {}, std::move(callback), "no state message");
  for (const auto& message : mqtt::read_request(device_)) {
    if (auto error = connection_->publish(message.topic, message.payload, options_.qos)) {
      core::log("agent").debug("mqtt read request failed device={} error=\"{}\"", label(), *error);
    }
  }
}

void MqttDriver::actuate(const routine::Attributes& values, const std::string& /*command_id*/, Callback callback) {
  auto messages = mqtt::command_messages(device_, values);
  if (!messages) {
    fail_soon({DriverFailure::refused, fmt::format("{}: {}", label(), messages.error())}, std::move(callback));
    return;
  }
  if (!connection_->connected()) {
    fail_soon(
        {DriverFailure::unreachable, fmt::format("{}: broker not connected: {}", label(), connection_->last_error())},
        std::move(callback));
    return;
  }
  if (online_ == false) {
    fail_soon({DriverFailure::unreachable, fmt::format("{}: the device reports itself offline", label())},
              std::move(callback));
    return;
  }
  std::set<std::string> wanted;
  for (const auto& [name, value] : values) wanted.insert(name);
  for (const auto& message : *messages) {
    if (auto error = connection_->publish(message.topic, message.payload, options_.qos)) {
      fail_soon({DriverFailure::unreachable, fmt::format("{}: {}", label(), *error)}, std::move(callback));
      return;
    }
  }
  add_pending(false, std::move(wanted), std::move(callback), "no state report after the command");
}

bool MqttDriver::watch(Callback callback) {
  watcher_ = std::move(callback);
  return true;
}

void MqttDriver::on_message(const std::string& topic, std::string_view payload) {
  const auto update = mqtt::parse_message(device_, topic, payload);
  if (update.error) {
    core::log("agent").debug("mqtt bad message device={} topic={} error=\"{}\"", label(), topic, *update.error);
    return;
  }
  if (update.online) {
    const bool was = online_.value_or(true);
    online_ = *update.online;
    if (!*update.online) {
      have_state_ = false;
      std::vector<uint64_t> ids;
      for (const auto& [id, pending] : pending_) ids.push_back(id);
      const DriverResult down = core::Unexpected(
          DriverError{DriverFailure::unreachable, fmt::format("{}: the device reports itself offline", label())});
      complete(ids, down, was ? std::optional<DriverResult>(down) : std::nullopt);
    }
    return;
  }
  if (!update.state || update.state->empty()) return;
  for (const auto& [name, value] : *update.state) state_[name] = value;
  have_state_ = true;
  std::vector<uint64_t> ids;
  for (const auto& [id, pending] : pending_) {
    if (pending->is_read) {
      ids.push_back(id);
      continue;
    }
    for (const auto& [name, value] : *update.state) {
      if (pending->wanted.count(name) != 0) {
        ids.push_back(id);
        break;
      }
    }
  }
  complete(ids, state_, state_);
}

void MqttDriver::on_status(bool connected, const std::string& reason) {
  if (connected) {
    // Ask for the state again so a watcher hears of changes missed while the
    // broker was away (retained state also arrives on the new subscription).
    if (watcher_) {
      for (const auto& message : mqtt::read_request(device_))
        connection_->publish(message.topic, message.payload, options_.qos);
    }
    return;
  }
  have_state_ = false;
  online_.reset();
  std::vector<uint64_t> ids;
  for (const auto& [id, pending] : pending_) ids.push_back(id);
  const DriverResult down = core::Unexpected(
      DriverError{DriverFailure::unreachable, fmt::format("{}: broker connection lost: {}", label(), reason)});
  complete(ids, down, down);
}

void MqttDriver::complete(const std::vector<uint64_t>& ids, const DriverResult& result,
                          const std::optional<DriverResult>& watch_result) {
  std::vector<Callback> callbacks;
  for (uint64_t id : ids) {
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    it->second->timer.cancel();
    callbacks.push_back(std::move(it->second->callback));
    pending_.erase(it);
  }
  std::weak_ptr<MqttDriver*> alive = alive_;
  // Copies: a callback may destroy this driver, and `result` may be state_.
  const DriverResult outcome = result;  // NOLINT(performance-unnecessary-copy-initialization)
  for (auto& callback : callbacks) {
    if (alive.expired()) return;
    callback(outcome);
  }
  if (watch_result && !alive.expired() && watcher_) {
    auto watcher = watcher_;
    watcher(*watch_result);
  }
}

}  // namespace mesh::drivers
