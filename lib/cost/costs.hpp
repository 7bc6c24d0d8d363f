#pragma once
/// Op costs per layer: the numbers the simulator runs on. Either `estimated` analytically
/// (estimate.hpp) or `measured` by `octorun profile`.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace octo {

struct LayerCost {
  std::string label;                  ///< layer kind/label, for tables
  double f_ms = 0;                    ///< forward
  double b_ms = 0;                    ///< backward for the input gradient
  double w_ms = 0;                    ///< backward for the weight gradient
  double r_ms = 0;                    ///< recompute (re-running the forward from the saved input)
  std::int64_t activation_bytes = 0;  ///< kept from F until B/W (without recompute)
  std::int64_t wgrad_bytes = 0;       ///< part of activation_bytes still needed by W after B
  std::int64_t output_bytes = 0;      ///< bytes sent to the next layer (gradient back: same size)
  std::int64_t params = 0;            ///< parameters held (already divided by TP)
  double spread = 0;                  ///< measured only: relative spread of repetitions
};

struct CostProfile {
  enum class Source : std::uint8_t { Estimated, Measured };
  Source source = Source::Estimated;
  std::string model;    ///< model name the costs are for
  std::string device;   ///< device name
  std::string backend;  ///< measured: cpu|cuda
  std::string date;     ///< measured: ISO date
  std::string origin;   ///< file path or "<estimated>", for messages
  int micro_batch = 1;
  std::int64_t seq = 0;
  int tp = 1;
  /// Expert-parallel size the costs were measured at (shape.ep): at 1 (and for every estimate)
  /// the op times hold no EP all-to-alls and the simulator adds them; above 1 they are inside.
  int ep = 1;
  std::vector<LayerCost> layers;  ///< one per model layer (embedding first, LM head last)
  /// Measured point-to-point link between ranks, if profiled (overrides the cluster's links).
  std::optional<double> p2p_bandwidth_gbs;
  std::optional<double> p2p_latency_us;
  /// Fixed per-op overhead (launch, bookkeeping) the simulator adds to every compute op.
  double op_overhead_ms = 0;
  /// Where the parts were in the costs YAML (1-based lines; 0: not read from YAML), for messages
  /// about them that only a later check can give (cost/agreement.hpp).
  struct Lines {
    int shape = 0;
    int layers = 0;
    std::vector<int> layer;  ///< per expanded layer: its entry's line (a repeat shares one)
  } lines;
};

[[nodiscard]] std::string_view to_string(CostProfile::Source source);

}  // namespace octo
