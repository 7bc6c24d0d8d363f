#include "backends/registry.hpp"

#include "exec/cpu_backend.hpp"
#if defined(OCTO_HAVE_CUDA)
#include "cuda/backend.hpp"
#endif

namespace octo::backends {
namespace {

// One line per backend, most capable first. Registration is explicit on purpose: a static
// registration object inside a static library is dropped by the linker when nothing references
// its file, and the backend would silently vanish from the build.
exec::BackendRegistry make_registry() {
  exec::BackendRegistry r;
#if defined(OCTO_HAVE_CUDA)
  cuda::register_backend(r);
#else
  r.add_missing("cuda",
                "not built with CUDA / no GPU (this octorun was configured without the CUDA toolkit; use "
                "--backend cpu)");
#endif
  exec::register_cpu_backend(r);
  return r;
}

}  // namespace

const exec::BackendRegistry& registry() {
  static const exec::BackendRegistry r = make_registry();
  return r;
}

}  // namespace octo::backends
