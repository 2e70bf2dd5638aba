#pragma once

// One MQTT 3.1.1 broker connection on the agent's event loop, shared by every
// device on that broker (MqttBrokers hands out one connection per broker
// address and credentials).
//
// Why libmosquitto: it is written and maintained by the authors of the
// mosquitto broker, packaged by Debian (libmosquitto-dev), speaks MQTT 3.1.1
// with QoS 0/1/2, TLS (OpenSSL) and username/password, and - unlike Paho C's
// asynchronous client, which runs its own threads - has a non-threaded API
// that fits a single-threaded asio program: mosquitto_socket() gives the file
// descriptor and mosquitto_loop_read/_write/_misc do the work when it is
// ready. Here an asio::posix::stream_descriptor (over a dup() of that
// descriptor, so libmosquitto closing its own never leaves asio with a stale
// one) waits for readiness; there is no mosquitto_loop_start() thread. A
// broker given by name is resolved inside mosquitto_connect_async(), which
// blocks the loop for that lookup: give brokers as IP addresses (or names
// in /etc/hosts) where that matters.
//
// Reconnects: a lost or failed connection is retried after a backoff that
// starts at `backoff_min` and doubles up to `backoff_max`; on every
// (re)connect the connection subscribes again to every topic it has
// handlers for, so retained state arrives again.
//
// Settings from a driver URI's query (mqtt_driver.h lists them with the
// topic conventions):
//   tls=1                 TLS; the default port becomes 8883
//   ca=/path              CA certificate file (PEM) (implies tls=1); default: the system's CAs
//   cert=/path&key=/path  client certificate and key (PEM)
//   insecure=1            do not check the broker's host name against its certificate
//   user=NAME             username
//   password_file=/path   the password: the file's first line
//   keepalive_s=N         MQTT keepalive, 5..3600, default 30

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <asio/io_context.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/steady_timer.hpp>

#include "agent/drivers/driver_uri.h"
#include "core/expected.h"

struct mosquitto;
struct mosquitto_message;

namespace mesh::drivers {

struct MqttSettings {
  std::string host;
  uint16_t port = 1883;
  bool tls = false;
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  bool insecure = false;
  std::string username;
  std::string password;
  std::chrono::seconds keepalive{30};
  std::chrono::milliseconds backoff_min{250};
  std::chrono::milliseconds backoff_max{30000};
  // A CONNECT not acknowledged within this is a failed attempt.
  std::chrono::milliseconds connect_timeout{10000};

  // Connections are shared between settings with equal keys.
  std::string key() const;
  std::string describe() const;  // "mqtt://host:port" or "mqtts://host:port"
};

// The broker settings in `uri` (its host, port and the options above). Keys
// it used are added to `used`, so the caller can reject unknown ones. The
// password file is read here (start-up), its error names the file.
core::Expected<MqttSettings, std::string> mqtt_settings_from_uri(const DriverUri& uri, std::set<std::string>& used);

class MqttConnection : public std::enable_shared_from_this<MqttConnection> {
 public:
  using MessageHandler = std::function<void(const std::string& topic, std::string_view payload)>;
  // Called on every change of the connection: connected, or lost with a reason.
  using StatusHandler = std::function<void(bool connected, const std::string& reason)>;

  // Starts connecting at once. Throws std::runtime_error only if libmosquitto
  // cannot create a client or load the TLS files (start-up).
  static std::shared_ptr<MqttConnection> create(asio::io_context& io, MqttSettings settings);
  MqttConnection(const MqttConnection&) = delete;
  MqttConnection& operator=(const MqttConnection&) = delete;
  ~MqttConnection();

  // Delivers every message on `topic` (exact, no wildcards) to `handler`
  // until unsubscribe(id). Subscribes at the broker (QoS 1) when the first
  // handler for a topic arrives, and again on every reconnect.
  uint64_t subscribe(const std::string& topic, MessageHandler handler);
  void unsubscribe(uint64_t id);
  uint64_t on_status(StatusHandler handler);
  void remove_status(uint64_t id);

  // Publishes now; an error (not connected, refused by libmosquitto) says why.
  std::optional<std::string> publish(const std::string& topic, std::string_view payload, int qos, bool retain = false);

  bool connected() const { return connected_; }
  // Connected, and the broker acknowledged every subscription.
  bool subscribed() const { return connected_ && unacknowledged_.empty(); }
  // Why the connection is down (empty while connected).
  const std::string& last_error() const { return last_error_; }
  const MqttSettings& settings() const { return settings_; }
  uint64_t connects() const { return connects_; }

 private:
  struct Subscription {
    std::string topic;
    MessageHandler handler;
  };

  MqttConnection(asio::io_context& io, MqttSettings settings);
  void start();
  void connect();
  void schedule_reconnect(const std::string& reason);
  void went_down(const std::string& reason);
  // Follows libmosquitto's socket: re-dups it when it changed, then waits for
  // what libmosquitto wants (read always, write when it has data queued).
  void sync();
  void on_readable();
  void on_writable();
  void tick();
  void notify_status();

  static void on_connect_cb(mosquitto* m, void* self, int rc);
  static void on_disconnect_cb(mosquitto* m, void* self, int rc);
  void send_subscribe(const std::string& topic);
  static void on_subscribe_cb(mosquitto* m, void* self, int mid, int count, const int* granted);
  static void on_message_cb(mosquitto* m, void* self, const mosquitto_message* message);

  asio::io_context& io_;
  MqttSettings settings_;
  mosquitto* mosq_ = nullptr;
  asio::posix::stream_descriptor descriptor_;
  int fd_ = -1;              // libmosquitto's socket, as last seen
  uint64_t generation_ = 0;  // of descriptor_, so stale wait handlers do nothing
  bool reading_ = false;
  bool writing_ = false;
  asio::steady_timer misc_timer_;
  asio::steady_timer reconnect_timer_;
  std::chrono::milliseconds backoff_;
  bool connected_ = false;
  bool connecting_ = false;
  bool reconnect_scheduled_ = false;
  bool closing_ = false;
  bool initialised_ = false;
  std::chrono::steady_clock::time_point connect_started_{};
  std::string last_error_ = "connecting";
  uint64_t connects_ = 0;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Subscription> subscriptions_;
  std::map<std::string, int> topic_refs_;
  std::map<uint64_t, StatusHandler> status_handlers_;
  std::set<int> unacknowledged_;  // SUBSCRIBE message ids without a SUBACK
  std::string refused_reason_;    // why the broker refused the last CONNECT
};

// The agent's broker connections, one per MqttSettings::key(), alive while a
// driver holds one.
class MqttBrokers {
 public:
  explicit MqttBrokers(asio::io_context& io) : io_(io) {}
  std::shared_ptr<MqttConnection> get(const MqttSettings& settings);
  // Connections some driver still holds.
  size_t live() const;

 private:
  asio::io_context& io_;
  std::map<std::string, std::weak_ptr<MqttConnection>> connections_;
};

}  // namespace mesh::drivers
