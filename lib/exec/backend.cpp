#include "exec/backend.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.hpp"

namespace octo::exec {

BackendDevice::BackendDevice(std::unique_ptr<nn::Device> device, std::string description,
                             TransportFactory transport)
    : device_(std::move(device)), description_(std::move(description)), transport_(std::move(transport)) {
  if (!device_) fail("backend device: no device");
}

BackendDevice::~BackendDevice() = default;

std::unique_ptr<Comm> BackendDevice::make_transport(Comm& world) const {
  return transport_ ? transport_(world) : nullptr;
}

void BackendRegistry::check_new(std::string_view name) const {
  if (name.empty()) fail("backend registry: a backend has an empty name");
  const bool missing =
      std::any_of(missing_.begin(), missing_.end(), [&](const auto& m) { return m.first == name; });
  if (find(name) || missing) fail("backend registry: backend '{}' is registered twice", name);
}

void BackendRegistry::add(std::unique_ptr<Backend> backend) {
  if (!backend) fail("backend registry: no backend");
  check_new(backend->name());
  backends_.push_back(std::move(backend));
}

void BackendRegistry::add_missing(std::string name, std::string why) {
  check_new(name);
  missing_.emplace_back(std::move(name), std::move(why));
}

std::vector<std::string> BackendRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& b : backends_) out.emplace_back(b->name());
  return out;
}

const Backend* BackendRegistry::find(std::string_view name) const {
  for (const auto& b : backends_)
    if (b->name() == name) return b.get();
  return nullptr;
}

const Backend& BackendRegistry::get(std::string_view name) const {
  if (const Backend* b = find(name)) return *b;
  for (const auto& [missing, why] : missing_)
    if (missing == name) fail("--backend {}: {}", name, why);
  fail_usage("--backend {}: unknown backend (this build has: {})", name, fmt::join(names(), ", "));
}

std::string BackendRegistry::preferred() const {
  if (backends_.empty()) fail("backend registry: no backend is registered");
  for (const auto& b : backends_)
    if (b->available()) return std::string(b->name());
  return std::string(backends_.front()->name());
}

std::string BackendRegistry::describe() const {
  std::string out;
  for (const auto& b : backends_)
    out += fmt::format("{}{} ({})", out.empty() ? "" : "; ", b->name(), b->summary());
  return out;
}

}  // namespace octo::exec
