#include "routine/catalog.h"

#include <fmt/format.h>

#include "routine/device_codec.h"

namespace mesh::routine {
namespace {

// The latest accepted definition of `id` among `entries` (nullopt: none, or
// removed last).
std::optional<DeviceSpec> latest_definition(const std::vector<proto::CatalogEntry>& entries, const std::string& id) {
  std::optional<DeviceSpec> out;
  for (const auto& entry : entries) {
    if (entry.refused()) continue;
    const auto& change = entry.change();
    if (change.has_put() && change.put().id() == id) {
      auto spec = from_proto(change.put());
      if (spec) out = std::move(*spec);
    } else if (change.op_case() == proto::CatalogChange::kRemove && change.remove() == id) {
      out.reset();
    }
  }
  return out;
}

std::optional<std::string> conflict(const DeviceSpec& existing, const DeviceSpec& proposed, bool replace,
                                    std::string_view where) {
  if (existing == proposed || replace) return std::nullopt;
  return fmt::format(
      "device {} is already defined differently ({}: kind {}, driver {}); use 'meshctl device add --replace' to "
      "change it, or remove it first",
      proposed.id, where, to_string(existing.kind), existing.driver);
}

// `base` with the first `count` run-time changes of `entries` on top.
std::map<std::string, DeviceSpec> overlay(const std::map<std::string, DeviceSpec>& base,
                                          const std::vector<proto::CatalogEntry>& entries, size_t count) {
  std::map<std::string, DeviceSpec> devices = base;
  for (size_t i = 0; i < count && i < entries.size(); ++i) {
    const auto& entry = entries[i];
    if (entry.refused()) continue;
    const auto& change = entry.change();
    if (change.has_put()) {
      if (auto spec = from_proto(change.put())) devices[spec->id] = std::move(*spec);
    } else if (change.op_case() == proto::CatalogChange::kRemove) {
      devices.erase(change.remove());
    }
  }
  return devices;
}

}  // namespace

void Catalog::set_base(std::vector<DeviceSpec> devices, std::string file_digest) {
  base_.clear();
  for (auto& spec : devices) base_[spec.id] = std::move(spec);
  file_digest_ = std::move(file_digest);
  rebuild();
}

bool Catalog::append(const proto::CatalogEntry& entry) {
  if (entry.version() != version() + 1) return false;
  entries_.push_back(entry);
  rebuild();
  return true;
}

bool Catalog::reset(const std::vector<proto::CatalogEntry>& entries) {
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].version() != i + 1) return false;
  }
  entries_ = entries;
  rebuild();
  return true;
}

const DeviceSpec* Catalog::find(const std::string& id) const {
  const auto it = devices_.find(id);
  return it == devices_.end() ? nullptr : &it->second;
}

std::map<std::string, DeviceSpec> Catalog::devices_at(uint64_t version) const {
  return overlay(base_, entries_, static_cast<size_t>(version));
}

void Catalog::rebuild() {
  std::map<std::string, DeviceSpec> devices = overlay(base_, entries_, entries_.size());
  const bool changed = devices != devices_;
  devices_ = std::move(devices);
  if (changed && on_change_) on_change_();
}

std::optional<std::string> refusal(const std::vector<proto::CatalogEntry>& earlier,
                                   const proto::CatalogChange& change) {
  switch (change.op_case()) {
    case proto::CatalogChange::kPut: {
      auto spec = from_proto(change.put());
      if (!spec) return spec.error();
      if (const auto existing = latest_definition(earlier, spec->id)) {
        return conflict(*existing, *spec, change.replace(), "by an earlier run-time change");
      }
      return std::nullopt;
    }
    case proto::CatalogChange::kRemove:
      if (auto problem = check_device_id(change.remove())) return *problem;
      return std::nullopt;
    case proto::CatalogChange::OP_NOT_SET:
      break;
  }
  return "an empty catalog change";
}

std::optional<std::string> check_change(const Catalog& catalog, const proto::CatalogChange& change) {
  if (auto problem = refusal(catalog.entries(), change)) return problem;
  if (change.has_put()) {
    const auto spec = from_proto(change.put());
    if (const DeviceSpec* existing = catalog.find(spec->id)) {
      return conflict(*existing, *spec, change.replace(),
                      catalog.in_file(spec->id) ? "in the catalog file" : "at run time");
    }
  } else if (catalog.find(change.remove()) == nullptr) {
    return fmt::format("no device {} in the catalog", change.remove());
  }
  return std::nullopt;
}

}  // namespace mesh::routine
