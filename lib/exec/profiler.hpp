#pragma once
/// `octorun profile`: measures a model's op costs on the backend the ranks run on and turns them
/// into a `measured` costs file (cost/profile_io.hpp) that octoplan reads unchanged.
///
/// Every DISTINCT layer is measured once (layers of the same kind share their dimensions, which
/// are per-kind in a model spec, so the parts of a layer are the key) and its numbers are written
/// for every model layer of that kind. Layers run the way the executor runs stages: each as a
/// one-layer StageNet on the Device, through forward (F), backward_input (B), backward_weight (W)
/// and, for R, forward without keeping activations followed by recompute. They run in place, as
/// one sequential pipeline of the whole model per repetition (F of every layer for two
/// micro-batches, B back through the layers, then the deferred W), so every op meets the caches a
/// real step leaves behind rather than its own data from the repetition before. Times are
/// medians over the repetitions after the warm-up and over the layers of the kind; all ranks
/// measure at once (as they compute at once in a pipeline, sharing caches and memory bandwidth)
/// and their samples are pooled. Memory is read from the Device's allocation counters (bytes_in_use):
/// activation_bytes is what a layer's forward leaves allocated besides its output (its saved input included),
/// wgrad_bytes what backward_input leaves for backward_weight (the output gradient included;
/// written as at most activation_bytes, which the costs model requires).
///
/// With two or more ranks, ranks 0 and 1 also ping-pong messages of several sizes through the
/// Comm the runtime uses (same requests, same waits) and fit one-way time = latency +
/// bytes / bandwidth to the 10th percentiles of the round trips (weighted least squares on
/// relative error, so small and large messages count alike; a fit the noise makes impossible
/// leaves the link unmeasured, with the reason, rather than failing the profile). A second ping-pong computes
/// 1 ms before each answer, so the receiver waits in Request::wait past its spinning phase as a consumer on
/// the pipeline's critical path does; the extra one-way time (waking it) is added to the latency written for
/// the simulator. The per-op overhead is the runtime's own time per compute op (posting and polling
/// transfers with the receive-side copies made inside the polls, hand-offs, micro-batch contexts,
/// bookkeeping), measured by the real Runtime on a pipeline of near-empty layers that pass tensors
/// of the model's size.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cost/costs.hpp"
#include "exec/comm.hpp"
#include "nn/data.hpp"
#include "nn/device.hpp"
#include "spec/model.hpp"

namespace octo::exec {

struct ProfileOptions {
  int micro_batch = 0;   ///< sequences per micro-batch; 0: the model's training.micro_batch
  std::int64_t seq = 0;  ///< tokens per sequence; 0: the model's seq_len
  int reps = 10;         ///< measured repetitions per layer (per rank)
  int warmup = 2;        ///< repetitions run first and not measured
  std::uint64_t seed = 1;
  bool recompute = true;        ///< also measure R (else r_ms = f_ms)
  bool link = true;             ///< with >= 2 ranks, measure the point-to-point link between ranks 0 and 1
  int link_reps = 30;           ///< round trips per message size
  std::string backend = "cpu";  ///< written into the costs file
  /// The device's hardware as its backend describes it (BackendDevice::description), written into
  /// the costs file as "host (hardware)"; empty: the device's name.
  std::string hardware;
  /// What the costs file gets of each op's samples. The median is the op's typical time; the
  /// (5 %-trimmed) mean keeps the share of slow repetitions a sum of many ops (a step) pays.
  enum class Statistic : std::uint8_t { Median, Mean };
  Statistic statistic = Statistic::Median;
  /// Training text the micro-batches are drawn from, as octorun draws them (the tokens steer MoE
  /// routing, hence expert GEMM shapes); nullptr: counter-based synthetic tokens.
  const nn::TextData* data = nullptr;
};

/// Median and the 10th / 90th percentiles of a sample, in ms.
struct Timing {
  double median_ms = 0, p10_ms = 0, p90_ms = 0;
  double mean_ms = 0;  ///< mean of the samples between the 5th and the 95th percentile
  /// (p90 − p10) / median: the relative spread (0 for a zero median).
  [[nodiscard]] double spread() const { return median_ms > 0 ? (p90_ms - p10_ms) / median_ms : 0.0; }
};

/// Median / p10 / p90 of `samples` (linear interpolation between order statistics); zeros for
/// an empty sample.
[[nodiscard]] Timing summarize(std::vector<double> samples);

/// One distinct layer: what was measured on its first occurrence, shared by all of them.
struct LayerMeasurement {
  std::vector<std::size_t> layers;  ///< model layers of this kind (the first was measured)
  std::string label;
  Timing f, b, w, r;
  std::int64_t activation_bytes = 0;  ///< left allocated by F besides its output
  std::int64_t wgrad_bytes = 0;       ///< left allocated by B besides the input gradient
  std::int64_t output_bytes = 0;      ///< the activation passed on (0 for the LM head: a loss)
  std::int64_t params = 0;
  /// Transient memory at the peak of each op above what it starts and ends with (workspace,
  /// temporaries): not part of the costs file, reported in the summary.
  std::int64_t f_temp_bytes = 0, b_temp_bytes = 0, w_temp_bytes = 0;
};

/// Point-to-point link between ranks 0 and 1.
struct LinkMeasurement {
  struct Point {
    std::int64_t bytes = 0;
    double one_way_us = 0;  ///< median half round trip
  };
  std::vector<Point> points;
  double latency_us = 0;
  double bandwidth_gbs = 0;  ///< 1e9 bytes per second
  /// One-way times when the receiver has been waiting (blocked in Request::wait past its
  /// spinning phase, as a consumer on the critical path is), and their mean excess over the fit:
  /// the time to wake the receiver.
  std::vector<Point> blocked;
  double blocked_extra_us = 0;
  /// What the simulator gets as the link latency: a transfer on the critical path has a waiting
  /// receiver.
  [[nodiscard]] double effective_latency_us() const { return latency_us + blocked_extra_us; }
};

/// Weighted least-squares fit of one_way_us = latency_us + bytes / (bandwidth_gbs × 1e3) with
/// weights 1 / one_way_us² (relative error). Latency is clamped at >= 0 and the bandwidth must
/// come out positive. Throws octo::Error for fewer than two distinct sizes or a non-increasing
/// time.
[[nodiscard]] LinkMeasurement fit_link(std::vector<LinkMeasurement::Point> points);

struct ProfileResult {
  CostProfile costs;  ///< the file contents (one entry per model layer)
  std::vector<LayerMeasurement> distinct;
  std::optional<LinkMeasurement> link;
  std::string link_note;  ///< why there is no link measurement (one rank, --no-link, a failed fit)
  Timing op_overhead;
  int ranks = 1;
  double seconds = 0;  ///< wall time of the whole profile
};

/// Called by rank 0 with one line per finished step (layer, link, overhead).
using ProgressFn = std::function<void(const std::string& line)>;

/// The key identifying layers with identical costs: embedding, LM head, or the parts of a block
/// (dimensions are per kind in a model spec). "E|M-|..." style, stable across runs.
[[nodiscard]] std::string layer_key(const ModelSpec& model, std::size_t layer);

/// Profiles `model` on `device`; collective over `world` (every rank calls it with the same
/// arguments; a single rank is fine). `transport` is the communicator that carries the runtime's
/// transfers on this device (NCCL for a CUDA device; nullptr: `world` itself): the link and the
/// per-op overhead are measured through it. All ranks return the same result. Throws
/// octo::Error for a model the layers cannot build, bad options, or a layer whose memory does
/// not balance.
/// `model` at the shape the profile measures: --micro-batch and --seq (`options`) over its own.
[[nodiscard]] ModelSpec profiled_model(const ModelSpec& model, const ProfileOptions& options);

/// Throws octo::Error (kind TooLarge, exit 6) when this rank cannot hold what a profile of
/// `shaped` (profiled_model) holds at once: every layer's fp32 weights and gradients and two
/// micro-batches of activations. It counts only that much (the model's activation bytes at its
/// dtype), so it never refuses what would fit. Local; before any layer is built.
void check_profile_memory(const ModelSpec& shaped);

[[nodiscard]] ProfileResult profile_model(const ModelSpec& model, nn::Device& device, Comm& world,
                                          const ProfileOptions& options, const ProgressFn& progress = {},
                                          Comm* transport = nullptr);

/// The summary table printed at the end: one line per distinct layer (F, B, W, R, spread,
/// activation and wgrad bytes, temporaries), then the link fit and the per-op overhead.
[[nodiscard]] std::string profile_table(const ProfileResult& result);

}  // namespace octo::exec
