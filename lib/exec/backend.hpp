#pragma once
/// The backend registry: what octorun (training and `octorun profile`) knows about each compute
/// backend — its --backend name, whether this process can use it, how to open this rank's device,
/// the transport that device prefers and how to describe its hardware. The runtime never names a
/// backend; it asks the registry.
///
/// A backend is one class implementing Backend (exec/cpu_backend.cpp here, cuda/backend.cpp in
/// lib/cuda) plus one line in the build's list (backends/registry.cpp), which registers every
/// backend explicitly: a self-registering static object in a static library would be dropped by
/// the linker whenever nothing else references its file.
///
///   const Backend& b = registry.get("cuda");            // throws a clear error when absent
///   BackendDevice opened = b.open({.exact_gemm = check});
///   std::unique_ptr<Comm> t = opened.make_transport(world);  // collective; nullptr: use world

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exec/comm.hpp"
#include "nn/device.hpp"

namespace octo::exec {

/// What a caller may ask of a device beyond its backend.
struct DeviceOptions {
  /// GEMMs exactly in fp32 (octorun --check compares gradients with an fp32 reference); a
  /// backend whose GEMMs are always exact ignores it.
  bool exact_gemm = false;
};

/// A device opened by a backend, together with what only that backend knows about it. The
/// transport factory was made with the device's concrete type in hand, so nothing downstream
/// inspects the device's type or name.
class BackendDevice {
 public:
  /// Collective over `world`: the communicator for the runtime's transfers on this device, or
  /// nullptr when `world` itself carries them.
  using TransportFactory = std::function<std::unique_ptr<Comm>(Comm& world)>;

  /// `transport` may be empty: `world` carries the transfers (host memory).
  BackendDevice(std::unique_ptr<nn::Device> device, std::string description, TransportFactory transport = {});
  BackendDevice(BackendDevice&&) noexcept = default;
  BackendDevice& operator=(BackendDevice&&) noexcept = default;
  ~BackendDevice();

  [[nodiscard]] nn::Device& device() const { return *device_; }
  /// The hardware, for costs files and logs: "Intel(R) Xeon(R) ...", "cuda:0 NVIDIA H100 ...".
  [[nodiscard]] const std::string& description() const { return description_; }
  /// Collective over `world` (e.g. NCCL set-up): the transport this device prefers for the
  /// runtime's transfers, or nullptr to use `world`. The result must not outlive this object.
  [[nodiscard]] std::unique_ptr<Comm> make_transport(Comm& world) const;

 private:
  std::unique_ptr<nn::Device> device_;
  std::string description_;
  TransportFactory transport_;
};

/// One compute backend.
class Backend {
 public:
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  virtual ~Backend() = default;

  /// The --backend name: "cpu", "cuda".
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// One line for --help: what computes and what carries the transfers.
  [[nodiscard]] virtual std::string_view summary() const = 0;
  /// Whether this process can open a device now (the cuda backend: a GPU is visible); when not,
  /// `why` (if given) says why.
  [[nodiscard]] virtual bool available(std::string* why = nullptr) const = 0;
  /// This rank's device. Throws octo::Error "--backend NAME: ..." when it cannot be opened.
  [[nodiscard]] virtual BackendDevice open(const DeviceOptions& options) const = 0;
  /// Whether the device's tensors live in this machine's memory (the CPU backend), so that a run
  /// is checked against the machine's memory before it starts; a GPU holds them itself.
  [[nodiscard]] virtual bool tensors_in_host_memory() const { return false; }
};

/// The backends of one build, in order of preference (the most capable first).
class BackendRegistry {
 public:
  /// Appends `backend`; throws octo::Error when its name is taken (by a backend or a missing one).
  void add(std::unique_ptr<Backend> backend);
  /// Records a backend this build left out, so that asking for it gets `why` ("not built with
  /// CUDA ...") instead of "unknown". It is not listed by names().
  void add_missing(std::string name, std::string why);

  /// The registered backends' names, in order of preference: the --backend choices.
  [[nodiscard]] std::vector<std::string> names() const;
  /// nullptr when `name` is not registered.
  [[nodiscard]] const Backend* find(std::string_view name) const;
  /// Throws octo::Error "--backend NAME: <why it is missing>" for a missing backend, or
  /// "--backend NAME: unknown backend (this build has: ...)".
  [[nodiscard]] const Backend& get(std::string_view name) const;
  /// The first available backend (the default of --backend); the first registered one when none
  /// is available (opening it then says why). Throws octo::Error for an empty registry.
  [[nodiscard]] std::string preferred() const;
  /// "cuda (summary); cpu (summary)": the choices for --help.
  [[nodiscard]] std::string describe() const;

 private:
  void check_new(std::string_view name) const;

  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<std::pair<std::string, std::string>> missing_;  ///< (name, why)
};

}  // namespace octo::exec
