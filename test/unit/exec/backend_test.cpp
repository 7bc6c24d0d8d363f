// The backend registry (exec/backend.hpp) with fake backends: preference order, lookup, the
// errors for unknown and missing backends, the default, and the transport a device brings along.

#include "exec/backend.hpp"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "exec/forwarding_comm.hpp"
#include "exec/thread_comm.hpp"
#include "nn/cpu_device.hpp"

using namespace octo;
using namespace octo::exec;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

namespace {

/// The transport of the fake backends: the host's transfers, named after the device it serves.
class TaggedComm final : public ForwardingComm {
 public:
  TaggedComm(Comm& host, std::string name) : ForwardingComm(host), name_(std::move(name)) {}
  [[nodiscard]] std::string_view backend() const override { return name_; }
  [[nodiscard]] Request isend(std::span<const float> d, int peer, int tag) override {
    return host().isend(d, peer, tag);
  }
  [[nodiscard]] Request irecv(std::span<float> d, int peer, int tag) override {
    return host().irecv(d, peer, tag);
  }
  void all_reduce(std::span<float> d, ReduceOp op) override { host().all_reduce(d, op); }
  [[nodiscard]] std::unique_ptr<Comm> split(int, int) override { octo::fail("not needed here"); }

 private:
  std::string name_;
};

/// Opens CPU devices; usable or not as the test says; with its own transport when asked.
class FakeBackend final : public Backend {
 public:
  FakeBackend(std::string name, bool usable, bool own_transport = false)
      : name_(std::move(name)), usable_(usable), own_transport_(own_transport) {}
  [[nodiscard]] std::string_view name() const override { return name_; }
  [[nodiscard]] std::string_view summary() const override { return "a fake"; }
  [[nodiscard]] bool available(std::string* why) const override {
    if (!usable_ && why) *why = name_ + " is switched off";
    return usable_;
  }
  [[nodiscard]] BackendDevice open(const DeviceOptions&) const override {
    if (!usable_) octo::fail("--backend {}: switched off", name_);
    BackendDevice::TransportFactory transport;
    if (own_transport_) {
      const std::string tag = "over " + name_;
      transport = [tag](Comm& world) { return std::make_unique<TaggedComm>(world, tag); };
    }
    return BackendDevice(std::make_unique<nn::CpuDevice>(1), "fake hardware " + name_, transport);
  }

 private:
  std::string name_;
  bool usable_, own_transport_;
};

BackendRegistry registry_of(std::vector<std::pair<std::string, bool>> backends) {
  BackendRegistry r;
  for (auto& [name, usable] : backends) r.add(std::make_unique<FakeBackend>(name, usable));
  return r;
}

}  // namespace

TEST_CASE("backend registry: names in registration order, lookup, and clear errors", "[exec][backend]") {
  BackendRegistry r = registry_of({{"fast", true}, {"slow", true}});
  r.add_missing("absent", "not built with Absent (configure with ABSENT=ON)");
  CHECK_THAT(r.names(), Equals(std::vector<std::string>{"fast", "slow"}));  // the missing one is no choice
  REQUIRE(r.find("slow") != nullptr);
  CHECK(r.find("slow")->name() == "slow");
  CHECK(&r.get("fast") == r.find("fast"));
  CHECK(r.find("absent") == nullptr);
  CHECK(r.find("tpu") == nullptr);
  CHECK_THROWS_WITH(r.get("absent"),
                    Equals("--backend absent: not built with Absent (configure with ABSENT=ON)"));
  CHECK_THROWS_WITH(r.get("tpu"), Contains("--backend tpu: unknown backend") && Contains("fast, slow"));
  CHECK(r.describe() == "fast (a fake); slow (a fake)");

  // A name is registered once, whether as a backend or as a missing one.
  CHECK_THROWS_WITH(r.add(std::make_unique<FakeBackend>("slow", true)),
                    Contains("'slow' is registered twice"));
  CHECK_THROWS_WITH(r.add(std::make_unique<FakeBackend>("absent", true)),
                    Contains("'absent' is registered twice"));
  CHECK_THROWS_WITH(r.add_missing("fast", "x"), Contains("'fast' is registered twice"));
  CHECK_THROWS_WITH(r.add(std::make_unique<FakeBackend>("", true)), Contains("empty name"));
  CHECK_THAT(r.names(), Equals(std::vector<std::string>{"fast", "slow"}));
}

TEST_CASE("backend registry: the default is the first usable backend", "[exec][backend]") {
  CHECK(registry_of({{"gpu", false}, {"cpu", true}}).preferred() == "cpu");
  CHECK(registry_of({{"gpu", true}, {"cpu", true}}).preferred() == "gpu");
  CHECK(registry_of({{"a", false}, {"b", true}, {"c", true}}).preferred() == "b");
  // None usable: the first, whose open() then says why.
  const BackendRegistry none = registry_of({{"gpu", false}, {"npu", false}});
  CHECK(none.preferred() == "gpu");
  std::string why;
  CHECK_FALSE(none.get("gpu").available(&why));
  CHECK(why == "gpu is switched off");
  CHECK_THROWS_WITH(none.get("gpu").open({}), Contains("--backend gpu: switched off"));
  CHECK_THROWS_WITH(BackendRegistry().preferred(), Contains("no backend is registered"));
}

TEST_CASE("backend device: the device, its description and the transport it prefers", "[exec][backend]") {
  ThreadWorld world(1);
  std::unique_ptr<Comm> comm = world.comm(0);

  BackendRegistry r;
  r.add(std::make_unique<FakeBackend>("plain", true));
  r.add(std::make_unique<FakeBackend>("own", true, true));
  const BackendDevice plain = r.get("plain").open({});
  CHECK(plain.description() == "fake hardware plain");
  CHECK(plain.device().name() == "cpu");
  CHECK(plain.make_transport(*comm) == nullptr);  // the world carries the transfers

  const BackendDevice own = r.get("own").open({.exact_gemm = true});
  std::unique_ptr<Comm> t = own.make_transport(*comm);
  REQUIRE(t != nullptr);
  CHECK(t->backend() == "over own");
  CHECK(t->rank() == 0);
  CHECK(t->size() == 1);

  CHECK_THROWS_WITH(BackendDevice(nullptr, "nothing"), Contains("no device"));
}
