#include "agent/drivers/mqtt_connection.h"

#include <mosquitto.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <random>
#include <stdexcept>
#include <vector>

#include <asio/post.hpp>
#include <fmt/format.h>

#include "core/log.h"

namespace mesh::drivers {
namespace {

spdlog::logger& logger() { return core::log("agent"); }

void init_library() {
  static std::once_flag once;
  std::call_once(once, [] { mosquitto_lib_init(); });
}


std::optional<bool> parse_flag(const std::string& text) {
  if (text == "1" || text == "true" || text == "yes" || text.empty()) return true;
  if (text == "0" || text == "false" || text == "no") return false;
  return std::nullopt;
}

std::string client_id() {
  static uint64_t counter = 0;
  static const uint32_t kRandom = std::random_device{}();
  return fmt::format("meshagent-{:08x}-{}", kRandom, ++counter);
}

std::string error_text(int rc) {
  if (rc == MOSQ_ERR_ERRNO) return std::strerror(errno);
  return mosquitto_strerror(rc);
}

}  // namespace

std::string MqttSettings::key() const {
  return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", host, port, tls, ca_file, cert_file, key_file, insecure, username,
                     std::hash<std::string>{}(password), keepalive.count());
}

std::string MqttSettings::describe() const {
  const bool v6 = host.find(':') != std::string::npos;
  return fmt::format("{}://{}{}{}:{}", tls ? "mqtts" : "mqtt", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

core::Expected<MqttSettings, std::string> mqtt_settings_from_uri(const DriverUri& uri, std::set<std::string>& used) {
  MqttSettings settings;
  settings.host = uri.host;
  auto take = [&](const char* key) -> std::optional<std::string> {
    auto value = uri.option(key);
    if (value) used.insert(key);
    return value;
  };
  if (auto tls = take("tls")) {
    auto flag = parse_flag(*tls);
    if (!flag) return core::Unexpected(std::string("tls must be 1 or 0"));
    settings.tls = *flag;
  }
  if (auto ca = take("ca")) {
    if (ca->empty()) return core::Unexpected(std::string("ca= needs a file"));
    settings.ca_file = *ca;
    settings.tls = true;
  }
  if (auto cert = take("cert")) settings.cert_file = *cert;
  if (auto key = take("key")) settings.key_file = *key;
  if (settings.cert_file.empty() != settings.key_file.empty()) {
    return core::Unexpected(std::string("cert= and key= go together"));
  }
  if (!settings.cert_file.empty()) settings.tls = true;
  if (auto insecure = take("insecure")) {
    auto flag = parse_flag(*insecure);
    if (!flag) return core::Unexpected(std::string("insecure must be 1 or 0"));
    settings.insecure = *flag;
  }
  if (auto user = take("user")) settings.username = *user;
  if (auto file = take("password_file")) {
    if (settings.username.empty()) return core::Unexpected(std::string("password_file= needs user="));
    std::ifstream in(*file);
    if (!in) return core::Unexpected(fmt::format("password_file {}: cannot read it", *file));
    std::getline(in, settings.password);
    if (!settings.password.empty() && settings.password.back() == '\r') settings.password.pop_back();
  }
  if (auto keepalive = take("keepalive_s")) {
    auto seconds = parse_query_int(*keepalive, 5, 3600);
    if (!seconds) return core::Unexpected(std::string("keepalive_s must be an integer 5..3600"));
    settings.keepalive = std::chrono::seconds(*seconds);
  }
  settings.port = uri.port_or(settings.tls ? 8883 : 1883);
  return settings;
}

std::shared_ptr<MqttConnection> MqttConnection::create(asio::io_context& io, MqttSettings settings) {
  std::shared_ptr<MqttConnection> connection(new MqttConnection(io, std::move(settings)));
  connection->start();
  return connection;
}

MqttConnection::MqttConnection(asio::io_context& io, MqttSettings settings)
    : io_(io),
      settings_(std::move(settings)),
      descriptor_(io),
      misc_timer_(io),
      reconnect_timer_(io),
      backoff_(settings_.backoff_min) {
  init_library();
  mosq_ = mosquitto_new(client_id().c_str(), true, this);
  if (mosq_ == nullptr) throw std::runtime_error(fmt::format("{}: cannot create an MQTT client", settings_.describe()));
  mosquitto_int_option(mosq_, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
  mosquitto_connect_callback_set(mosq_, &MqttConnection::on_connect_cb);
  mosquitto_disconnect_callback_set(mosq_, &MqttConnection::on_disconnect_cb);
  mosquitto_message_callback_set(mosq_, &MqttConnection::on_message_cb);
  mosquitto_subscribe_callback_set(mosq_, &MqttConnection::on_subscribe_cb);
  if (!settings_.username.empty()) {
    mosquitto_username_pw_set(mosq_, settings_.username.c_str(),
                              settings_.password.empty() ? nullptr : settings_.password.c_str());
  }
  if (settings_.tls) {
    const char* ca = settings_.ca_file.empty() ? nullptr : settings_.ca_file.c_str();
    const char* ca_dir = ca == nullptr ? "/etc/ssl/certs" : nullptr;
    const int rc =
        mosquitto_tls_set(mosq_, ca, ca_dir, settings_.cert_file.empty() ? nullptr : settings_.cert_file.c_str(),
                          settings_.key_file.empty() ? nullptr : settings_.key_file.c_str(), nullptr);
    if (rc != MOSQ_ERR_SUCCESS) {
      mosquitto_destroy(mosq_);
      throw std::runtime_error(fmt::format("{}: TLS setup (ca={}, cert={}, key={}): {}", settings_.describe(),
                                           settings_.ca_file, settings_.cert_file, settings_.key_file, error_text(rc)));
    }
    if (settings_.insecure) mosquitto_tls_insecure_set(mosq_, true);
  }
}

MqttConnection::~MqttConnection() {
  closing_ = true;
  asio::error_code ignored;
  descriptor_.close(ignored);
  // asio's timers report a failed cancel() only by exception; a destructor
  // must not throw, and the timers die with this object anyway.
  try {
    misc_timer_.cancel();
    reconnect_timer_.cancel();
  } catch (...) {  // NOLINT(bugprone-empty-catch)
  }
  if (mosq_ != nullptr) {
    if (connected_) {
      mosquitto_disconnect(mosq_);
      mosquitto_loop_write(mosq_, 1);
    }
    mosquitto_destroy(mosq_);
  }
}

void MqttConnection::start() {
  connect();
  tick();
}

void MqttConnection::connect() {
  reconnect_scheduled_ = false;
  connecting_ = true;
  connect_started_ = std::chrono::steady_clock::now();
  // The first successful connect_async() stores the broker's address;
  // later attempts reconnect to it.
  const int rc = initialised_ ? mosquitto_reconnect_async(mosq_)
                              : mosquitto_connect_async(mosq_, settings_.host.c_str(), settings_.port,
                                                        static_cast<int>(settings_.keepalive.count()));
  if (rc == MOSQ_ERR_SUCCESS) initialised_ = true;
  if (rc != MOSQ_ERR_SUCCESS) {
    connecting_ = false;
    sync();
    schedule_reconnect(fmt::format("connect {}: {}", settings_.describe(), error_text(rc)));
    return;
  }
  sync();
  // The CONNECT may wait in libmosquitto's queue until the TCP connection is
  // up: wait for writability once whatever want_write() says.
  if (fd_ >= 0 && !writing_) {
    writing_ = true;
    std::weak_ptr<MqttConnection> weak = weak_from_this();
    const uint64_t generation = generation_;
    descriptor_.async_wait(asio::posix::descriptor_base::wait_write, [weak, generation](const asio::error_code& error) {
      auto self = weak.lock();
      if (!self || self->generation_ != generation) return;
      self->writing_ = false;
      if (error) return;
      self->on_writable();
    });
  }
}

void MqttConnection::schedule_reconnect(const std::string& reason) {
  if (closing_) return;
  went_down(reason);
  if (reconnect_scheduled_) return;
  reconnect_scheduled_ = true;
  logger().debug("mqtt reconnect broker={} in_ms={} reason=\"{}\"", settings_.describe(), backoff_.count(), reason);
  reconnect_timer_.expires_after(backoff_);
  backoff_ = std::min(backoff_ * 2, settings_.backoff_max);
  std::weak_ptr<MqttConnection> weak = weak_from_this();
  reconnect_timer_.async_wait([weak](const asio::error_code& error) {
    auto self = weak.lock();
    if (!self || error) return;
    self->connect();
  });
}

void MqttConnection::went_down(const std::string& reason) {
  last_error_ = reason;
  connecting_ = false;
  if (!connected_) return;
  connected_ = false;
  logger().info("mqtt broker down broker={} reason=\"{}\"", settings_.describe(), reason);
  notify_status();
}

void MqttConnection::notify_status() {
  // Handlers may remove themselves or others: iterate over a copy of the ids.
  std::vector<uint64_t> ids;
  for (const auto& [id, handler] : status_handlers_) ids.push_back(id);
  const bool up = connected_;
  const std::string reason = up ? std::string() : last_error_;
  for (uint64_t id : ids) {
    auto it = status_handlers_.find(id);
    if (it == status_handlers_.end()) continue;
    auto handler = it->second;
    handler(up, reason);
  }
}

void MqttConnection::sync() {
  if (closing_) return;
  const int fd = mosquitto_socket(mosq_);
  if (fd != fd_) {
    asio::error_code ignored;
    descriptor_.close(ignored);
    ++generation_;
    reading_ = false;
    writing_ = false;
    fd_ = fd;
    if (fd_ >= 0) {
      const int copy = ::dup(fd_);
      if (copy < 0) {
        logger().warn("mqtt dup failed broker={} error=\"{}\"", settings_.describe(), std::strerror(errno));
        fd_ = -1;
        return;
      }
      descriptor_.assign(copy, ignored);
    }
  }
  if (fd_ < 0) return;
  std::weak_ptr<MqttConnection> weak = weak_from_this();
  const uint64_t generation = generation_;
  if (!reading_) {
    reading_ = true;
    descriptor_.async_wait(asio::posix::descriptor_base::wait_read, [weak, generation](const asio::error_code& error) {
      auto self = weak.lock();
      if (!self || self->generation_ != generation) return;
      self->reading_ = false;
      if (error) return;
      self->on_readable();
    });
    // asio's epoll reactor is edge-triggered: bytes that arrived before this
    // wait was queued would not wake it. Look, and read now if any are there.
    int available = 0;
    if (::ioctl(fd_, FIONREAD, &available) == 0 && available > 0) {
      asio::post(io_, [weak, generation] {
        auto self = weak.lock();
        if (self && self->generation_ == generation) self->on_readable();
      });
    }
  }
  if (!writing_ && mosquitto_want_write(mosq_)) {
    writing_ = true;
    descriptor_.async_wait(asio::posix::descriptor_base::wait_write, [weak, generation](const asio::error_code& error) {
      auto self = weak.lock();
      if (!self || self->generation_ != generation) return;
      self->writing_ = false;
      if (error) return;
      self->on_writable();
    });
  }
}

void MqttConnection::on_readable() {
  auto keep = shared_from_this();  // handlers may drop the last driver
  if (fd_ < 0) return;
  const int rc = mosquitto_loop_read(mosq_, 100);
  if (rc != MOSQ_ERR_SUCCESS) {
    sync();
    schedule_reconnect(fmt::format("{}: {}", settings_.describe(), error_text(rc)));
    return;
  }
  sync();
}

void MqttConnection::on_writable() {
  auto keep = shared_from_this();
  if (fd_ < 0) return;
  const int rc = mosquitto_loop_write(mosq_, 100);
  if (rc != MOSQ_ERR_SUCCESS) {
    sync();
    schedule_reconnect(fmt::format("{}: {}", settings_.describe(), error_text(rc)));
    return;
  }
  sync();
}

void MqttConnection::tick() {
  if (closing_) return;
  if (fd_ >= 0) {
    // A safety net for a writability edge missed while libmosquitto held
    // the data back (a TCP connect still in progress): retry once a second.
    if (mosquitto_want_write(mosq_) && mosquitto_loop_write(mosq_, 100) != MOSQ_ERR_SUCCESS) sync();
    const int rc = mosquitto_loop_misc(mosq_);
    if (rc != MOSQ_ERR_SUCCESS && rc != MOSQ_ERR_NO_CONN) {
      sync();
      schedule_reconnect(fmt::format("{}: {}", settings_.describe(), error_text(rc)));
    } else {
      sync();
    }
    if (connecting_ && std::chrono::steady_clock::now() - connect_started_ > settings_.connect_timeout) {
      mosquitto_disconnect(mosq_);
      sync();
      schedule_reconnect(
          fmt::format("{}: no CONNACK within {} ms", settings_.describe(), settings_.connect_timeout.count()));
    }
  }
  misc_timer_.expires_after(std::chrono::seconds(1));
  std::weak_ptr<MqttConnection> weak = weak_from_this();
  misc_timer_.async_wait([weak](const asio::error_code& error) {
    auto self = weak.lock();
    if (!self || error) return;
    self->tick();
  });
}

void MqttConnection::on_connect_cb(mosquitto* /*m*/, void* self_ptr, int rc) {
  auto* self = static_cast<MqttConnection*>(self_ptr);
  if (self->closing_) return;
  self->connecting_ = false;
  if (rc != 0) {
    const std::string reason =
        fmt::format("{}: broker refused the connection: {}", self->settings_.describe(), mosquitto_connack_string(rc));
    logger().warn("mqtt connect refused broker={} reason=\"{}\"", self->settings_.describe(),
                  mosquitto_connack_string(rc));
    self->refused_reason_ = reason;
    mosquitto_disconnect(self->mosq_);
    self->schedule_reconnect(reason);
    return;
  }
  self->refused_reason_.clear();
  self->connected_ = true;
  self->last_error_.clear();
  self->backoff_ = self->settings_.backoff_min;
  ++self->connects_;
  logger().info("mqtt connected broker={} connects={}", self->settings_.describe(), self->connects_);
  self->unacknowledged_.clear();
  for (const auto& [topic, refs] : self->topic_refs_) self->send_subscribe(topic);
  self->notify_status();
}

void MqttConnection::on_disconnect_cb(mosquitto* /*m*/, void* self_ptr, int rc) {
  auto* self = static_cast<MqttConnection*>(self_ptr);
  if (self->closing_) return;
  // After a refused CONNECT the refusal is the reason worth reporting.
  const std::string reason =
      !self->refused_reason_.empty() ? self->refused_reason_
      : rc == 0                      ? fmt::format("{}: disconnected", self->settings_.describe())
                : fmt::format("{}: connection lost ({})", self->settings_.describe(), mosquitto_strerror(rc));
  // Inside a libmosquitto call: reconnect from a handler of our own.
  std::weak_ptr<MqttConnection> weak = self->weak_from_this();
  self->went_down(reason);
  asio::post(self->io_, [weak, reason] {
    if (auto strong = weak.lock()) {
      strong->sync();
      strong->schedule_reconnect(reason);
    }
  });
}

void MqttConnection::on_message_cb(mosquitto* /*m*/, void* self_ptr, const mosquitto_message* message) {
  auto* self = static_cast<MqttConnection*>(self_ptr);
  if (self->closing_ || message == nullptr || message->topic == nullptr) return;
  const std::string topic = message->topic;
  const std::string_view payload(static_cast<const char*>(message->payload),
                                 message->payload == nullptr ? 0 : static_cast<size_t>(message->payloadlen));
  std::vector<uint64_t> ids;
  for (const auto& [id, subscription] : self->subscriptions_) {
    if (subscription.topic == topic) ids.push_back(id);
  }
  for (uint64_t id : ids) {
    auto it = self->subscriptions_.find(id);
    if (it == self->subscriptions_.end()) continue;
    auto handler = it->second.handler;
    handler(topic, payload);
  }
}

uint64_t MqttConnection::subscribe(const std::string& topic, MessageHandler handler) {
  const uint64_t id = next_id_++;
  subscriptions_[id] = {topic, std::move(handler)};
  if (topic_refs_[topic]++ == 0 && connected_) {
    send_subscribe(topic);
    sync();
  }
  return id;
}

void MqttConnection::unsubscribe(uint64_t id) {
  auto it = subscriptions_.find(id);
  if (it == subscriptions_.end()) return;
  const std::string topic = it->second.topic;
  subscriptions_.erase(it);
  if (--topic_refs_[topic] == 0) {
    topic_refs_.erase(topic);
    if (connected_ && !closing_) {
      mosquitto_unsubscribe(mosq_, nullptr, topic.c_str());
      sync();
    }
  }
}

void MqttConnection::send_subscribe(const std::string& topic) {
  int mid = 0;
  if (mosquitto_subscribe(mosq_, &mid, topic.c_str(), 1) == MOSQ_ERR_SUCCESS) unacknowledged_.insert(mid);
}

void MqttConnection::on_subscribe_cb(mosquitto* /*m*/, void* self_ptr, int mid, int /*count*/, const int* /*granted*/) {
  auto* self = static_cast<MqttConnection*>(self_ptr);
  self->unacknowledged_.erase(mid);
}

uint64_t MqttConnection::on_status(StatusHandler handler) {
  const uint64_t id = next_id_++;
  status_handlers_[id] = std::move(handler);
  return id;
}

void MqttConnection::remove_status(uint64_t id) { status_handlers_.erase(id); }

std::optional<std::string> MqttConnection::publish(const std::string& topic, std::string_view payload, int qos,
                                                   bool retain) {
  if (!connected_) {
    return fmt::format("{} is not connected ({})", settings_.describe(),
                       last_error_.empty() ? "connecting" : last_error_);
  }
  const int rc =
      mosquitto_publish(mosq_, nullptr, topic.c_str(), static_cast<int>(payload.size()), payload.data(), qos, retain);
  sync();
  if (rc != MOSQ_ERR_SUCCESS) return fmt::format("publish {} to {}: {}", topic, settings_.describe(), error_text(rc));
  return std::nullopt;
}

std::shared_ptr<MqttConnection> MqttBrokers::get(const MqttSettings& settings) {
  std::erase_if(connections_, [](const auto& entry) { return entry.second.expired(); });
  const std::string key = settings.key();
  auto it = connections_.find(key);
  if (it != connections_.end()) {
    if (auto existing = it->second.lock()) return existing;
  }
  auto connection = MqttConnection::create(io_, settings);
  connections_[key] = connection;
  return connection;
}

size_t MqttBrokers::live() const {
  size_t count = 0;
  for (const auto& [key, weak] : connections_) count += weak.expired() ? 0 : 1;
  return count;
}

}  // namespace mesh::drivers
