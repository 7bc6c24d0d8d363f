#pragma once
/// Cluster description: devices, links, and the parallel sizes a run uses.

#include <cstdint>
#include <string>
#include <vector>

namespace octo {

struct DeviceKind {
  std::string name;
  double memory_gib = 0;
  double peak_tflops_bf16 = 0;  ///< dense, per device
  double peak_tflops_fp32 = 0;
  double memory_bandwidth_gbs = 0;  ///< GB/s (1e9 bytes)
  double efficiency = 0.6;          ///< fraction of peak FLOP/s GEMMs reach (roofline estimate)
};

struct LinkSpec {
  double bandwidth_gbs = 0;  ///< GB/s per direction
  double latency_us = 0;
};

struct ClusterSpec {
  std::string name;
  std::string source;
  int nodes = 1;
  int devices_per_node = 1;
  /// Device kinds; `device_kind_of[rank]` picks one per rank (one kind today, heterogeneous later).
  std::vector<DeviceKind> device_kinds;
  std::vector<int> device_kind_of;
  LinkSpec intra_node;
  LinkSpec inter_node;
  int tp = 1;
  int dp = 1;
  int pp = 0;  ///< 0: world / (tp * dp)

  [[nodiscard]] int world() const { return nodes * devices_per_node; }
  [[nodiscard]] int pipeline_size() const { return pp > 0 ? pp : world() / (tp * dp); }
  /// Device kind of global rank `rank`.
  [[nodiscard]] const DeviceKind& device(int rank) const;
  /// Node of pipeline device `d` (pipeline devices are laid out TP-major: d occupies ranks
  /// [d*tp, (d+1)*tp) of the first data-parallel replica).
  [[nodiscard]] int node_of_pipeline_device(int d) const;
  /// The link pipeline device a sends over to pipeline device b.
  [[nodiscard]] const LinkSpec& link(int a, int b) const;
};

}  // namespace octo
