// The idle-devices note of the plan reports: a plan whose ranks do not fill the cluster says how
// many devices it uses and the --dp that fills it, as Megatron-LM derives DP from the world size.

#include "tune/report.hpp"

#include <catch2/catch.hpp>

#include "plan/plan.hpp"
#include "spec/cluster.hpp"

namespace octo {
namespace {

ClusterSpec cluster(int nodes, int per_node) {
  ClusterSpec c;
  c.name = "test";
  c.nodes = nodes;
  c.devices_per_node = per_node;
  return c;
}

Plan plan(int devices, int tp, int dp) {
  Plan p;
  p.devices = devices;
  p.tp = tp;
  p.dp = dp;
  return p;
}

}  // namespace

TEST_CASE("idle devices: a note names them and the --dp that fills the cluster", "[tune][report]") {
  CHECK(idle_devices_note(cluster(1, 8), plan(8, 1, 1)).empty());
  CHECK(idle_devices_note(cluster(2, 8), plan(4, 2, 2)).empty());
  CHECK(idle_devices_note(cluster(1, 8), plan(4, 1, 1)) ==
        "note: the plan uses 4 of the 8 devices of test; --dp 2 would run a replica on the rest\n");
  CHECK(idle_devices_note(cluster(2, 8), plan(2, 2, 1)) ==
        "note: the plan uses 4 of the 16 devices of test; --dp 4 would run replicas on the rest\n");
  CHECK(idle_devices_note(cluster(2, 8), plan(2, 2, 2)) ==
        "note: the plan uses 8 of the 16 devices of test; --dp 4 would run replicas on the rest\n");
  // No DP fills 8 devices with replicas of 3: the count alone.
  CHECK(idle_devices_note(cluster(1, 8), plan(3, 1, 1)) ==
        "note: the plan uses 3 of the 8 devices of test\n");
}

}  // namespace octo
