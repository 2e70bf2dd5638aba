#include "core/log.h"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace mesh::core {
namespace {

constexpr std::array<std::string_view, 9> kKnownLayers = {"core",   "proto", "routing", "membership", "kgroup",
                                                          "mutex",  "routine", "agent", "sim"};
// spdlog::level::from_str maps every unknown name to `off`, so the accepted
// names are checked here first.
constexpr std::array<std::string_view, 8> kLevelNames = {"trace", "debug",   "info",     "warn",
                                                         "warning", "error", "critical", "off"};
constexpr const char* kPattern = "%Y-%m-%d %H:%M:%S.%e %l [%n] %v";
constexpr const char* kClockPattern = "%* %l [%n] %v";

class ClockFlag final : public spdlog::custom_flag_formatter {
 public:
  explicit ClockFlag(std::shared_ptr<const LogClock> clock) : clock_(std::move(clock)) {}
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    fmt::format_to(std::back_inserter(dest), "{:.6f}s", (*clock_)());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<ClockFlag>(clock_); }

 private:
  std::shared_ptr<const LogClock> clock_;
};

// All loggers write into one dist_sink; swapping its one child redirects
// every existing and future logger at once.
class Registry {
 public:
  Registry() : sink_(std::make_shared<spdlog::sinks::dist_sink_mt>()) { use(stderr_sink()); }

  spdlog::logger& get(std::string_view layer) {
    std::lock_guard lock(mutex_);
    return get_locked(layer);
  }

  std::vector<std::string> layers() {
    std::lock_guard lock(mutex_);
    std::vector<std::string> names(kKnownLayers.begin(), kKnownLayers.end());
    for (const auto& [name, logger] : loggers_) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  bool set_level(std::string_view level_name, std::string_view layer) {
    if (std::find(kLevelNames.begin(), kLevelNames.end(), level_name) == kLevelNames.end()) return false;
    const auto level = spdlog::level::from_str(std::string(level_name));
    std::lock_guard lock(mutex_);
    if (layer.empty()) {
      default_level_ = level;
      for (std::string_view known : kKnownLayers) get_locked(known);
      for (auto& [name, logger] : loggers_) logger->set_level(level);
      return true;
    }
    const bool known = std::find(kKnownLayers.begin(), kKnownLayers.end(), layer) != kKnownLayers.end();
    if (!known && loggers_.find(layer) == loggers_.end()) return false;
    get_locked(layer).set_level(level);
    return true;
  }

  static std::shared_ptr<spdlog::sinks::sink> stderr_sink() { return std::make_shared<spdlog::sinks::stderr_sink_mt>(); }
  static std::shared_ptr<spdlog::sinks::sink> null_sink() { return std::make_shared<spdlog::sinks::null_sink_mt>(); }

  void use(std::shared_ptr<spdlog::sinks::sink> target) {
    std::lock_guard lock(mutex_);
    target_ = std::move(target);
    apply_pattern_locked();
    sink_->set_sinks({target_});
  }

  uint64_t use_clock(LogClock seconds) {
    std::lock_guard lock(mutex_);
    clock_ = std::make_shared<const LogClock>(std::move(seconds));
    apply_pattern_locked();
    return ++clock_token_;
  }

  void stop_clock(uint64_t token) {
    std::lock_guard lock(mutex_);
    if (token != clock_token_ || !clock_) return;
    clock_.reset();
    apply_pattern_locked();
  }

 private:
  spdlog::logger& get_locked(std::string_view layer) {
    auto it = loggers_.find(layer);
    if (it == loggers_.end()) {
      auto logger = std::make_shared<spdlog::logger>(std::string(layer), sink_);
      logger->set_level(default_level_);
      it = loggers_.emplace(std::string(layer), std::move(logger)).first;
    }
    return *it->second;
  }

  void apply_pattern_locked() {
    if (!target_) return;
    if (!clock_) {
      target_->set_pattern(kPattern);
      return;
    }
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<ClockFlag>('*', clock_).set_pattern(kClockPattern);
    target_->set_formatter(std::move(formatter));
  }

  std::mutex mutex_;
  std::shared_ptr<spdlog::sinks::dist_sink_mt> sink_;
  std::shared_ptr<spdlog::sinks::sink> target_;
  std::shared_ptr<const LogClock> clock_;
  uint64_t clock_token_ = 0;
  std::map<std::string, std::shared_ptr<spdlog::logger>, std::less<>> loggers_;
  spdlog::level::level_enum default_level_ = spdlog::level::info;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

spdlog::logger& log(std::string_view layer) { return registry().get(layer); }

std::vector<std::string> log_layers() { return registry().layers(); }

bool set_log_level(std::string_view level, std::string_view layer) { return registry().set_level(level, layer); }

void log_to_stderr() { registry().use(Registry::stderr_sink()); }

void log_to_null() { registry().use(Registry::null_sink()); }

uint64_t log_with_clock(LogClock seconds) { return registry().use_clock(std::move(seconds)); }

void stop_log_clock(uint64_t token) { registry().stop_clock(token); }

}  // namespace mesh::core
