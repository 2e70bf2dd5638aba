#include "agent/drivers/driver_uri.h"

#include <charconv>

#include <fmt/format.h>

namespace mesh::drivers {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int high = hex_digit(text[i + 1]);
    const int low = hex_digit(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out.push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return out;
}

bool valid_scheme(std::string_view scheme) {
  if (scheme.empty()) return false;
  for (char c : scheme) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

bool valid_host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

}  // namespace

std::vector<std::string> DriverUri::path_segments() const {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::optional<std::string> DriverUri::option(const std::string& key) const {
  auto it = query.find(key);
  if (it == query.end()) return std::nullopt;
  return it->second;
}

std::string DriverUri::authority(uint16_t default_port) const {
  const bool v6 = host.find(':') != std::string::npos;
  return fmt::format("{}{}{}:{}", v6 ? "[" : "", host, v6 ? "]" : "", port_or(default_port));
}

core::Expected<DriverUri, std::string> parse_driver_uri(std::string_view text) {
  auto error = [&](std::string_view what) { return core::Unexpected(fmt::format("driver URI '{}': {}", text, what)); };
  DriverUri uri;
  const size_t colon = text.find("://");
  if (colon == std::string_view::npos) return error("expected SCHEME://HOST[:PORT][/PATH][?QUERY]");
  const std::string_view scheme = text.substr(0, colon);
  if (!valid_scheme(scheme)) return error("the scheme must be letters, digits, '+', '-' or '.'");
  for (char c : scheme) uri.scheme.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);

  std::string_view rest = text.substr(colon + 3);
  std::string_view query;
  if (const size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (const size_t hash = rest.find('#'); hash != std::string_view::npos) return error("fragments (#) are not allowed");
  std::string_view authority = rest;
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    authority = rest.substr(0, slash);
    uri.path = std::string(rest.substr(slash + 1));
  }
  if (authority.find('@') != std::string_view::npos) {
    return error("user info (user@host) is not supported: give credentials as query options");
  }
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return error("an IPv6 address needs a closing ']'");
    uri.host = std::string(authority.substr(1, close - 1));
    for (char c : uri.host) {
      if (hex_digit(c) < 0 && c != ':' && c != '.') return error("bad character in the IPv6 address");
    }
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return error("expected ':PORT' after the IPv6 address");
      port_text = after.substr(1);
      if (port_text.empty()) return error("empty port");
    }
  } else {
    const size_t port_colon = authority.rfind(':');
    if (port_colon != std::string_view::npos) {
      port_text = authority.substr(port_colon + 1);
      authority = authority.substr(0, port_colon);
      if (port_text.empty()) return error("empty port");
    }
    for (char c : authority) {
      if (!valid_host_char(c)) return error(fmt::format("bad character '{}' in the host", c));
    }
    uri.host = std::string(authority);
  }
  if (uri.host.empty()) return error("no host");
  if (!port_text.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 || value > 65535) {
      return error(fmt::format("port '{}' is not a number 1..65535", port_text));
    }
    uri.port = static_cast<uint16_t>(value);
  }

  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    auto key = percent_decode(pair.substr(0, eq));
    auto value = percent_decode(eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1));
    if (!key || !value) return error("bad percent-escape in the query");
    if (key->empty()) return error("empty query key");
    if (uri.query.count(*key) != 0) return error(fmt::format("query option '{}' given twice", *key));
    uri.query.emplace(std::move(*key), std::move(*value));
  }
  return uri;
}

std::optional<int> parse_query_int(std::string_view text, int min, int max) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) return std::nullopt;
  return value;
}

}  // namespace mesh::drivers
