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
  int pp = 0;    ///< 0: world / (tp * dp)
  int ep = 1;    ///< expert-parallel size (divides dp; plan/rank_layout.hpp)
  int zero = 0;  ///< ZeRO stage: 0 or 1 (the distributed optimizer)
  /// Devices that share one NVLink domain (consecutive ranks); 0: the node. Links inside a domain
  /// are `intra_node`, between domains `inter_node`.
  int nvlink_domain = 0;

  [[nodiscard]] int nvlink_domain_size() const {
    return nvlink_domain > 0 ? nvlink_domain : devices_per_node;
  }

  [[nodiscard]] int world() const { return nodes * devices_per_node; }
  [[nodiscard]] int pipeline_size() const { return pp > 0 ? pp : world() / (tp * dp); }
  /// Device kind of global rank `rank`.
  [[nodiscard]] const DeviceKind& device(int rank) const;
  /// Node of pipeline device `d` (Megatron's rank order, plan/rank_layout.hpp: d runs ranks
  /// [d*tp*dp, (d+1)*tp*dp), TP innermost, then DP).
  [[nodiscard]] int node_of_pipeline_device(int d) const;
  /// The link pipeline device a sends over to pipeline device b (between their first ranks; every
  /// (dp, tp) replica of the pipeline sends over the same kind of link).
  [[nodiscard]] const LinkSpec& link(int a, int b) const;
  /// intra_node when world ranks a and b share an NVLink domain, else inter_node.
  [[nodiscard]] const LinkSpec& link_between_ranks(std::int64_t a, std::int64_t b) const;
  /// The slowest link a ring collective over `size` ranks `stride` apart from `first_rank` uses:
  /// inter_node as soon as the group spans two NVLink domains.
  [[nodiscard]] const LinkSpec& group_link(int first_rank, int stride, int size) const;
};

}  // namespace octo
