#include "exec/profiler.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>
#include <map>
#include <span>
#include <utility>

#include "core/error.hpp"
#include "core/quantile.hpp"
#include "core/random.hpp"
#include "core/system.hpp"
#include "core/units.hpp"
#include "cost/inputs.hpp"
#include "exec/runtime.hpp"
#include "nn/data.hpp"
#include "nn/model.hpp"
#include "plan/lower.hpp"
#include "spec/kinds/mlp.hpp"

namespace octo::exec {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

nn::MicroBatch synthetic_batch(int batch, int seq, std::int64_t vocab, std::uint64_t seed) {
  nn::MicroBatch mb;
  mb.batch = batch;
  mb.seq = seq;
  const auto n = static_cast<std::size_t>(batch) * static_cast<std::size_t>(seq);
  mb.tokens.resize(n);
  mb.targets.resize(n);
  // Counter-based values so every rank and every run feeds the layers the same inputs.
  for (std::size_t i = 0; i < n; ++i) {
    mb.tokens[i] = static_cast<std::int32_t>(splitmix64(seed + 2 * i) % static_cast<std::uint64_t>(vocab));
    mb.targets[i] =
        static_cast<std::int32_t>(splitmix64(seed + 2 * i + 1) % static_cast<std::uint64_t>(vocab));
  }
  return mb;
}

/// Micro-batch `index`: from the training text as octorun draws them when there is one (the
/// tokens decide which experts a MoE layer routes to, and so the shapes of its GEMMs), else
/// counter-based tokens.
nn::MicroBatch draw_batch(const ProfileOptions& o, int batch, int seq, std::int64_t vocab,
                          std::uint64_t index) {
  if (o.data) return o.data->microbatch(static_cast<std::int64_t>(index), batch, seq);
  return synthetic_batch(batch, seq, vocab, o.seed * 0x9e3779b9ULL + index);
}

std::string kib(std::int64_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / kKiB); }

/// Samples of all ranks pooled: rank r writes its `mine` into slot r (`n` values, the same on
/// every rank; a rank with fewer pads with NaN, dropped here), the sum gives everyone all.
std::vector<double> pool(Comm& world, const std::vector<double>& mine, std::size_t n) {
  const auto ranks = static_cast<std::size_t>(world.size());
  std::vector<float> all(n * ranks, 0.0f);
  for (std::size_t i = 0; i < n; ++i)
    all[static_cast<std::size_t>(world.rank()) * n + i] =
        i < mine.size() ? static_cast<float>(mine[i]) : std::numeric_limits<float>::quiet_NaN();
  if (ranks > 1) world.all_reduce(all);
  std::vector<double> out;
  for (float v : all)
    if (!std::isnan(v)) out.push_back(v);
  return out;
}
std::vector<double> pool(Comm& world, const std::vector<double>& mine) {
  return pool(world, mine, mine.size());
}

/// Largest value over the ranks (bytes are deterministic: this only guards against a rank
/// whose device behaves differently).
std::int64_t max_over_ranks(Comm& world, std::int64_t v) {
  if (world.size() == 1) return v;
  std::vector<float> x{static_cast<float>(v)};
  world.all_reduce(x, ReduceOp::Max);
  return std::max(v, static_cast<std::int64_t>(std::llround(x[0])));
}

std::string iso_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

/// Keeps the core busy for `us` microseconds: a stand-in for compute.
void spin_for(double us) {
  const auto end = Clock::now() +
                   std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::micro>(us));
  while (Clock::now() < end) {
  }
}

/// What one model layer measured on this rank.
struct LayerRun {
  std::vector<double> f, b, w, r;
  std::int64_t activation = 0, wgrad = 0, output = 0, params = 0;
  std::int64_t f_temp = 0, b_temp = 0, w_temp = 0;
};

/// Runs the whole model as a sequential pipeline on this rank, one one-layer StageNet per layer,
/// and times every layer's ops in place. A repetition runs F of every layer for kInFlight
/// micro-batches, then B of every layer (last to first) for each, then W of every layer, the
/// order of a GPipe step with the weight gradients deferred as zero-bubble schedules defer them;
/// then, for R, F without keeping activations over all layers followed by R of every layer. So
/// a layer runs with the caches in the state the rest of a step leaves them in, not with its
/// own data still hot from the previous repetition. Memory is read from the Device counters
/// around each op of the first repetition: what the layer's context holds after F (its saved
/// input included; its output is passed on) and after B (the output gradient it keeps included;
/// the input gradient is passed on), and the transient peak above both ends of each op.
std::vector<LayerRun> measure_model(const ModelSpec& model, nn::Device& device, const ProfileOptions& o,
                                    int batch, int seq, float loss_scale, const ProgressFn& progress) {
  constexpr int kInFlight = 2;
  const std::size_t L = model.layers.size();
  std::vector<std::unique_ptr<nn::StageNet>> nets;
  for (std::size_t l = 0; l < L; ++l)
    nets.push_back(std::make_unique<nn::StageNet>(model, l, l + 1, o.seed, device));
  std::vector<LayerRun> out(L);
  for (std::size_t l = 0; l < L; ++l) out[l].params = static_cast<std::int64_t>(nets[l]->param_count());
  const auto in_use = [&] { return static_cast<std::int64_t>(device.bytes_in_use()); };
  const auto peak = [&] { return static_cast<std::int64_t>(device.peak_bytes()); };
  const auto bytes = [](const nn::Buffer& b) { return static_cast<std::int64_t>(b.bytes()); };

  const int total = o.warmup + o.reps;
  const int every = std::max(1, total / 4);
  for (int rep = 0; rep < total; ++rep) {
    const bool measured = rep >= o.warmup, first = rep == 0;
    const auto rep_start = Clock::now();
    std::vector<std::vector<nn::StageContext>> ctx(kInFlight);
    for (int m = 0; m < kInFlight; ++m) {
      const nn::MicroBatch mb =
          draw_batch(o, batch, seq, model.vocab, static_cast<std::uint64_t>(rep * kInFlight + m));
      for (std::size_t l = 0; l < L; ++l) ctx[m].push_back(nets[l]->make_context(mb, loss_scale));
    }
    std::vector<std::int64_t> held(L, 0);  // bytes held by the context of micro-batch 0
    // F, layer after layer, for each micro-batch in flight.
    for (int m = 0; m < kInFlight; ++m) {
      nn::Buffer x;
      for (std::size_t l = 0; l < L; ++l) {
        const std::int64_t before = in_use(), x_bytes = bytes(x);
        device.synchronize();
        device.reset_peak();
        const auto t0 = Clock::now();
        nn::Buffer y = nets[l]->forward(ctx[m][l], std::move(x), true);
        device.synchronize();
        const auto t1 = Clock::now();
        if (measured) out[l].f.push_back(ms_between(t0, t1));
        const std::int64_t after = in_use();
        if (first && m == 0) {
          held[l] = after - before + x_bytes - bytes(y);
          out[l].activation = held[l];
          out[l].f_temp = std::max<std::int64_t>(0, peak() - std::max(before, after));
          out[l].output = nets[l]->has_lm_head() ? 0 : bytes(y);
        }
        x = std::move(y);
      }
    }
    // B, last layer to first, for each micro-batch; the loss (the LM head's output) is dropped.
    for (int m = 0; m < kInFlight; ++m) {
      nn::Buffer g;
      for (std::size_t l = L; l-- > 0;) {
        const std::int64_t before = in_use(), g_bytes = bytes(g);
        device.synchronize();
        device.reset_peak();
        const auto t0 = Clock::now();
        nn::Buffer dx = nets[l]->backward_input(ctx[m][l], std::move(g));
        device.synchronize();
        const auto t1 = Clock::now();
        if (measured) out[l].b.push_back(ms_between(t0, t1));
        const std::int64_t after = in_use();
        if (first && m == 0) {
          const std::int64_t now_held = held[l] + after - before + g_bytes - bytes(dx);
          out[l].wgrad = now_held;
          out[l].b_temp = std::max<std::int64_t>(0, peak() - std::max(before, after));
          held[l] = now_held;
        }
        g = std::move(dx);
      }
    }
    // W, deferred behind every B.
    for (int m = 0; m < kInFlight; ++m) {
      for (std::size_t l = L; l-- > 0;) {
        const std::int64_t before = in_use();
        device.synchronize();
        device.reset_peak();
        const auto t0 = Clock::now();
        nets[l]->backward_weight(ctx[m][l]);
        device.synchronize();
        const auto t1 = Clock::now();
        if (measured) out[l].w.push_back(ms_between(t0, t1));
        const std::int64_t after = in_use();
        if (first && m == 0) {
          out[l].w_temp = std::max<std::int64_t>(0, peak() - std::max(before, after));
          if (after - before != -held[l])
            fail(
                "profile: layer {} ({}) frees {} bytes in W but held {} after B: its memory cannot be "
                "attributed",
                l, model.layers[l].label, before - after, held[l]);
        }
      }
    }
    ctx.clear();
    if (o.recompute) {
      const nn::MicroBatch mb =
          draw_batch(o, batch, seq, model.vocab, static_cast<std::uint64_t>(total * kInFlight + rep));
      std::vector<nn::StageContext> rc;
      nn::Buffer x;
      for (std::size_t l = 0; l < L; ++l) {
        rc.push_back(nets[l]->make_context(mb, loss_scale));
        x = nets[l]->forward(rc[l], std::move(x), false);
      }
      x.reset();
      for (std::size_t l = L; l-- > 0;) {
        device.synchronize();
        const auto t0 = Clock::now();
        nets[l]->recompute(rc[l]);
        device.synchronize();
        const auto t1 = Clock::now();
        if (measured) out[l].r.push_back(ms_between(t0, t1));
      }
    }
    if (progress && (rep % every == every - 1 || rep + 1 == total))
      progress(fmt::format("  repetition {}/{}{}: {:.1f} ms (all layers, {} micro-batches F B W{})", rep + 1,
                           total, measured ? "" : " (warm-up)", ms_between(rep_start, Clock::now()),
                           kInFlight, o.recompute ? ", then F and R" : ""));
  }
  if (!o.recompute)
    for (auto& run : out) run.r = run.f;
  return out;
}

/// Ping-pong between ranks 0 and 1 through the runtime's transport (`comm`, device buffers);
/// other ranks only join the pooling over `world`.
std::optional<LinkMeasurement> measure_link(Comm& world, Comm& comm, nn::Device& device,
                                            const ProfileOptions& o, std::size_t boundary_floats,
                                            std::string* note) {
  if (world.size() < 2) {
    *note = "one rank; launch with mpirun -np 2 to measure it";
    return std::nullopt;
  }
  if (!o.link) {
    *note = "--no-link";
    return std::nullopt;
  }
  std::vector<std::size_t> sizes = {1, 64, 1024, 16384, 262144, boundary_floats, 4 * boundary_floats};
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  sizes.erase(std::remove(sizes.begin(), sizes.end(), std::size_t{0}), sizes.end());
  const int me = world.rank();
  const int tag = 7;
  std::vector<double> one_way(sizes.size(), 0.0);
  world.barrier();
  // Device buffers: the transport moves device memory (host memory for the CPU backend).
  const auto buffers = [&](std::size_t n) {
    std::pair<nn::Buffer, nn::Buffer> b{device.alloc<float>(n), device.alloc<float>(n)};
    device.fill(b.first.data(), n, 1.0f);
    device.synchronize();
    return b;
  };
  const auto send_span = [](const nn::Buffer& b) { return std::span<const float>(b.data(), b.size()); };
  const auto recv_span = [](nn::Buffer& b) { return std::span<float>(b.data(), b.size()); };
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    auto [buf, back] = buffers(sizes[k]);
    std::vector<double> rtt;
    const int warm = 3;
    for (int rep = 0; rep < warm + o.link_reps && me < 2; ++rep) {
      const auto t0 = Clock::now();
      if (me == 0) {
        Request s = comm.isend(send_span(buf), 1, tag);
        Request r = comm.irecv(recv_span(back), 1, tag);
        s.wait();
        r.wait();
      } else {
        Request r = comm.irecv(recv_span(back), 0, tag);
        r.wait();
        Request s = comm.isend(send_span(back), 0, tag);
        s.wait();
      }
      if (rep >= warm) rtt.push_back(ms_to_us(ms_between(t0, Clock::now())));
    }
    // The transport's own time: the 10th percentile of the round trips (summarize is unit-agnostic,
    // µs here). Scheduling noise only adds to a transfer; the blocked ping-pong below measures the
    // waiting receiver's share of it as the runtime meets it.
    if (me == 0) one_way[k] = summarize(rtt).p10_ms / 2.0;
    world.barrier();
  }
  // Blocked receiver: each side computes for kBusyUs before it answers, so the other is well
  // into Request::wait's naps when the message comes, as a consumer waiting on the critical path
  // is: RTT = 2 kBusyUs + 2 one-way(blocked).
  constexpr double kBusyUs = 1000;
  const std::vector<std::size_t> blocked_sizes = {1, std::max<std::size_t>(boundary_floats, 1)};
  std::vector<double> blocked(blocked_sizes.size(), 0.0);
  for (std::size_t k = 0; k < blocked_sizes.size(); ++k) {
    auto [buf, back] = buffers(blocked_sizes[k]);
    std::vector<double> rtt;
    const int warm = 2;
    for (int rep = 0; rep < warm + std::max(5, o.link_reps / 3) && me < 2; ++rep) {
      const auto t0 = Clock::now();
      if (me == 0) {
        spin_for(kBusyUs);
        Request s = comm.isend(send_span(buf), 1, tag);
        Request r = comm.irecv(recv_span(back), 1, tag);
        s.wait();
        r.wait();
      } else {
        Request r = comm.irecv(recv_span(back), 0, tag);
        r.wait();
        spin_for(kBusyUs);
        Request s = comm.isend(send_span(back), 0, tag);
        s.wait();
      }
      if (rep >= warm) rtt.push_back(ms_to_us(ms_between(t0, Clock::now())));
    }
    if (me == 0) blocked[k] = (summarize(rtt).median_ms - 2 * kBusyUs) / 2.0;
    world.barrier();
  }

  const std::vector<double> pooled = pool(world, one_way);
  const std::vector<double> pooled_blocked = pool(world, blocked);
  std::vector<LinkMeasurement::Point> points;
  for (std::size_t k = 0; k < sizes.size(); ++k)
    points.push_back({static_cast<std::int64_t>(sizes[k] * sizeof(float)), pooled[k]});  // rank 0's slot
  // Every rank has the same pooled numbers, so every rank reaches the same verdict.
  LinkMeasurement link;
  try {
    link = fit_link(std::move(points));
  } catch (const Error& e) {
    *note = e.what();
    return std::nullopt;
  }
  // The wake-up cost: blocked one-way time beyond the fitted (spinning) one, averaged over sizes.
  double extra = 0;
  for (std::size_t k = 0; k < blocked_sizes.size(); ++k) {
    const double bytes = static_cast<double>(blocked_sizes[k] * sizeof(float));
    link.blocked.push_back({static_cast<std::int64_t>(bytes), pooled_blocked[k]});
    extra += pooled_blocked[k] - (link.latency_us + bytes / (link.bandwidth_gbs * 1e3));
  }
  link.blocked_extra_us = std::max(0.0, extra / static_cast<double>(blocked_sizes.size()));
  return link;
}

/// The runtime's own cost per compute op: the real Runtime walking a pipeline of near-empty
/// layers (dense MLPs of ffn 8) with the model's hidden size and micro-batch shape, so the
/// tensors it passes are the real ones and what it measures outside compute and transfer waits
/// (posting and polling transfers, the receive-side copies a shared-memory transport makes
/// inside those polls, hand-offs, micro-batch contexts, bookkeeping) is what a real step pays. Four stages
/// alternate over two devices (one device, no transfers, when the world has one rank), as tuned plans
/// interleave them, in GPipe order with W after B; the overhead of a step is divided by its compute ops, as
/// the simulator charges it to them.
Timing measure_overhead(nn::Device& device, Comm& world, Comm& comm, const ProfileOptions& o,
                        std::int64_t hidden, int batch, int seq) {
  const int devices = std::min(world.size(), 2);
  std::unique_ptr<Comm> group = comm.split(world.rank() < devices ? 0 : 1, world.rank());
  std::vector<double> samples;
  if (world.rank() < devices) {
    ModelSpec micro;
    micro.name = "near-empty";
    micro.vocab = nn::kByteVocab;
    micro.hidden = hidden;
    micro.seq_len = seq;
    micro.sections.set(MlpSpec{8, Activation::SwiGlu});
    micro.training.micro_batch = batch;
    micro.training.dtype = DType::FP32;
    micro.layers.push_back({{BlockKind::Embedding}, "embedding"});
    for (int i = 0; i < 4; ++i) micro.layers.push_back({{BlockKind::Mlp}, "-"});
    micro.layers.push_back({{BlockKind::LmHead}, "lm_head"});
    micro.training.microbatches = 8;

    ExecPlan plan;
    plan.source = "<profile: near-empty pipeline>";
    Plan& p = plan.plan;
    p.devices = devices;
    p.microbatches = micro.training.microbatches;
    p.micro_batch = batch;
    p.seq = seq;
    p.stages = {{0, 2, 0}, {2, 3, devices - 1}, {3, 4, 0}, {4, 6, devices - 1}};
    p.programs.assign(static_cast<std::size_t>(devices), {});
    for (int d = 0; d < devices; ++d) {
      auto& prog = p.programs[static_cast<std::size_t>(d)];
      for (int s = 0; s < 4; ++s)
        if (p.stages[static_cast<std::size_t>(s)].device == d)
          for (int m = 0; m < p.microbatches; ++m) prog.push_back(Op::compute(OpKind::F, s, m));
      for (int s = 3; s >= 0; --s)
        if (p.stages[static_cast<std::size_t>(s)].device == d)
          for (int m = 0; m < p.microbatches; ++m) {
            prog.push_back(Op::compute(OpKind::B, s, m));
            prog.push_back(Op::compute(OpKind::W, s, m));
          }
    }
    LowerOptions lo;
    lo.boundary_bytes.assign(3, static_cast<std::int64_t>(batch) * seq * micro.hidden * 4);
    lower(p, lo);
    plan.model = micro;

    // Text for the byte tokenizer: any bytes will do, deterministic.
    std::string text(static_cast<std::size_t>(seq) * 64 + 1024, ' ');
    for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(32 + splitmix64(i) % 95);
    const nn::TextData data(text, "<profile: synthetic text>");
    RuntimeOptions ro;
    ro.seed = o.seed;
    Runtime runtime(plan, *group, device, data, ro);
    int compute_ops = 0;
    for (const Op& op : p.programs[static_cast<std::size_t>(runtime.device())])
      if (!is_comm(op.kind)) ++compute_ops;
    const int steps = o.warmup + std::max(5, o.reps);
    for (int step = 0; step < steps; ++step) {
      const StepStats st = runtime.step(step);
      if (step >= o.warmup) samples.push_back(st.overhead_ms / compute_ops);
    }
  }
  return summarize(pool(world, samples, static_cast<std::size_t>(std::max(5, o.reps))));
}

}  // namespace

Timing summarize(std::vector<double> v) {
  Timing t;
  if (v.empty()) return t;
  std::sort(v.begin(), v.end());
  t.median_ms = quantile_of_sorted(v, 0.5);
  t.p10_ms = quantile_of_sorted(v, 0.1);
  t.p90_ms = quantile_of_sorted(v, 0.9);
  const auto first = static_cast<std::size_t>(std::floor(0.05 * static_cast<double>(v.size())));
  const std::size_t last = v.size() - first;
  double sum = 0;
  for (std::size_t i = first; i < last; ++i) sum += v[i];
  t.mean_ms = sum / static_cast<double>(last - first);
  return t;
}

LinkMeasurement fit_link(std::vector<LinkMeasurement::Point> points) {
  std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  if (points.size() < 2 || points.front().bytes == points.back().bytes)
    fail("link fit: need transfer times of at least two message sizes (got {})", points.size());
  for (const auto& p : points)
    if (!(p.one_way_us > 0) || !std::isfinite(p.one_way_us))
      fail("link fit: the {}-byte transfer took {} us (expected a positive time)", p.bytes, p.one_way_us);
  // Minimize Σ ((t − a − b·x) / t)²: the normal equations of weighted least squares, w = 1/t².
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& p : points) {
    const double w = 1.0 / (p.one_way_us * p.one_way_us), x = static_cast<double>(p.bytes), y = p.one_way_us;
    sw += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
  }
  const double det = sw * sxx - sx * sx;
  double slope = det > 0 ? (sw * sxy - sx * sy) / det : 0;  // µs per byte
  double latency = (sy - slope * sx) / sw;
  if (latency < 0) {
    // Through the origin: b = Σ w x y / Σ w x².
    latency = 0;
    slope = sxy / sxx;
  }
  if (!(slope > 0))
    fail(
        "link fit: transfer time does not grow with the message size ({} us for {} bytes, {} us for {} "
        "bytes): "
        "the measurement is too noisy to give a bandwidth",
        points.front().one_way_us, points.front().bytes, points.back().one_way_us, points.back().bytes);
  LinkMeasurement m;
  m.points = std::move(points);
  m.latency_us = latency;
  m.bandwidth_gbs = 1.0 / slope / 1e3;  // bytes per µs → 1e9 bytes per s
  return m;
}

std::string layer_key(const ModelSpec& model, std::size_t layer) {
  if (layer >= model.layers.size())
    fail("model {}: layer {} out of range (the model has {} layers)", model.name, layer, model.layers.size());
  std::string key;
  for (BlockKind k : model.layers[layer].parts) {
    if (!key.empty()) key += "+";
    key += to_string(k);
  }
  return key;
}

namespace {

/// "host (hardware)" for the costs file's `device`.
std::string describe_device(const nn::Device& device, const std::string& hardware) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown-host");
  return fmt::format("{} ({})", host, hardware.empty() ? std::string(device.name()) : hardware);
}

}  // namespace

ModelSpec profiled_model(const ModelSpec& model, const ProfileOptions& options) {
  ModelSpec out = model;
  // The planner's bounds (cost/inputs.hpp): a sequence longer than the model's seq_len gives costs
  // no plan can use (--seq 100000 on a 64-token model ran out of memory in the attention scores).
  override_shape(out, options.micro_batch, options.seq);
  return out;
}

void check_profile_memory(const ModelSpec& shaped) {
  const std::int64_t physical = physical_memory_bytes();
  if (physical <= 0) return;
  const int batch = shaped.training.micro_batch;
  const std::int64_t seq = shaped.seq_len;
  double activations = 0;
  for (std::size_t l = 0; l < shaped.layers.size(); ++l)
    activations += static_cast<double>(layer_counts(shaped, l, batch, seq).activation_bytes);
  const double weights = 8.0 * static_cast<double>(total_params(shaped));
  const double need = weights + 2 * activations;
  if (need <= static_cast<double>(physical)) return;
  throw Error(fmt::format("model {}: profiling it needs at least {} on this rank ({} of fp32 weights and "
                          "gradients, {} of activations for two micro-batches of {} x {} tokens), more than "
                          "this machine's {}; profile a smaller shape (--micro-batch, --seq) or a model with "
                          "fewer layers",
                          shaped.name, human_bytes(need), human_bytes(weights), human_bytes(2 * activations),
                          batch, seq, human_bytes(static_cast<double>(physical))),
              ErrorKind::TooLarge);
}

ProfileResult profile_model(const ModelSpec& spec, nn::Device& device, Comm& world, const ProfileOptions& o,
                            const ProgressFn& progress, Comm* transport) {
  Comm& comm = transport ? *transport : world;
  const auto start = Clock::now();
  if (o.reps < 1) fail("profile: --reps {}: expected at least one measured repetition", o.reps);
  if (o.warmup < 0) fail("profile: --warmup {}: expected zero or more warm-up repetitions", o.warmup);
  const ModelSpec model = profiled_model(spec, o);
  const int batch = model.training.micro_batch;
  const std::int64_t seq64 = model.seq_len;
  if (batch < 1 || seq64 < 1 || seq64 > (1 << 24))
    fail("profile: model {}: micro-batch {} x sequence {} is not a usable shape", model.name, batch, seq64);
  const int seq = static_cast<int>(seq64);
  if (model.layers.size() < 2) fail("profile: model {} has no layers", model.name);
  const bool printer = world.rank() == 0 && progress;
  // The loss scale of a step of the model's micro-batch count: gradients of a realistic size.
  const int microbatches = std::max(model.training.microbatches, 1);
  const float loss_scale = 1.0f / static_cast<float>(static_cast<double>(microbatches) * batch * seq);

  // Distinct layers in order of first appearance.
  std::map<std::string, std::size_t> by_key;
  ProfileResult result;
  result.ranks = world.size();
  std::vector<std::size_t> distinct_of(model.layers.size());
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const std::string key = layer_key(model, i);
    auto [it, fresh] = by_key.emplace(key, result.distinct.size());
    if (fresh) {
      LayerMeasurement m;
      m.label = model.layers[i].label;
      result.distinct.push_back(std::move(m));
    }
    result.distinct[it->second].layers.push_back(i);
    distinct_of[i] = it->second;
  }
  if (printer)
    progress(
        fmt::format("profile: model {} ({} layers, {} distinct), micro-batch {} x {} tokens, backend {}, {} "
                    "rank{} measuring at once, {} warm-up + {} measured repetitions",
                    model.name, model.layers.size(), result.distinct.size(), batch, seq, o.backend,
                    world.size(), world.size() == 1 ? "" : "s", o.warmup, o.reps));

  world.barrier();
  const std::vector<LayerRun> runs =
      measure_model(model, device, o, batch, seq, loss_scale, printer ? progress : ProgressFn{});
  for (std::size_t d = 0; d < result.distinct.size(); ++d) {
    LayerMeasurement& m = result.distinct[d];
    // Samples of every occurrence of the kind, pooled (the same work at another depth).
    std::vector<double> f, b, w, r;
    for (std::size_t l : m.layers) {
      const LayerRun& run = runs[l];
      f.insert(f.end(), run.f.begin(), run.f.end());
      b.insert(b.end(), run.b.begin(), run.b.end());
      w.insert(w.end(), run.w.begin(), run.w.end());
      r.insert(r.end(), run.r.begin(), run.r.end());
      if (run.activation != runs[m.layers.front()].activation || run.wgrad != runs[m.layers.front()].wgrad)
        fail("profile: layers {} and {} ({}) keep different memory ({} / {} and {} / {} bytes for B / W)",
             m.layers.front(), l, m.label, runs[m.layers.front()].activation, runs[m.layers.front()].wgrad,
             run.activation, run.wgrad);
    }
    const LayerRun& run = runs[m.layers.front()];
    m.f = summarize(pool(world, f));
    m.b = summarize(pool(world, b));
    m.w = summarize(pool(world, w));
    m.r = summarize(pool(world, r));
    m.activation_bytes = max_over_ranks(world, run.activation);
    m.wgrad_bytes = max_over_ranks(world, run.wgrad);
    m.output_bytes = run.output;
    m.params = run.params;
    m.f_temp_bytes = max_over_ranks(world, run.f_temp);
    m.b_temp_bytes = max_over_ranks(world, run.b_temp);
    m.w_temp_bytes = max_over_ranks(world, run.w_temp);
    if (printer) {
      std::string where;
      for (std::size_t k = 0; k < m.layers.size() && k < 6; ++k)
        where += fmt::format("{}{}", k ? "," : "", m.layers[k]);
      if (m.layers.size() > 6) where += ",...";
      progress(
          fmt::format("  [{}/{}] '{}' ({}, layers {}): F {:.3f}  B {:.3f}  W {:.3f}  R {:.3f} ms, spread "
                      "{:.1f} %, activations {} KiB",
                      d + 1, result.distinct.size(), m.label, layer_key(model, m.layers.front()), where,
                      m.f.median_ms, m.b.median_ms, m.w.median_ms, m.r.median_ms,
                      100.0 * std::max({m.f.spread(), m.b.spread(), m.w.spread()}), kib(m.activation_bytes)));
    }
  }

  world.barrier();
  result.op_overhead = measure_overhead(device, world, comm, o, model.hidden, batch, seq);
  if (printer)
    progress(fmt::format(
        "  per-op overhead {:.4f} ms (the runtime's own time per compute op, near-empty pipeline)",
        result.op_overhead.median_ms));

  const std::size_t boundary = static_cast<std::size_t>(batch) * static_cast<std::size_t>(seq) *
                               static_cast<std::size_t>(model.hidden);
  result.link = measure_link(world, comm, device, o, boundary, &result.link_note);
  if (printer && !result.link)
    progress(fmt::format("  link: not measured ({}); plans will use the cluster's links", result.link_note));
  if (printer && result.link)
    progress(fmt::format(
        "  link rank 0 <-> 1: latency {:.2f} us ({:.2f} us + {:.2f} us waking a blocked receiver), "
        "bandwidth {:.2f} GB/s ({} message sizes)",
        result.link->effective_latency_us(), result.link->latency_us, result.link->blocked_extra_us,
        result.link->bandwidth_gbs, result.link->points.size()));

  CostProfile& c = result.costs;
  c.source = CostProfile::Source::Measured;
  c.model = model.name;
  c.device = describe_device(device, o.hardware);
  c.backend = o.backend;
  c.date = iso_now();
  c.origin = "<octorun profile>";
  c.micro_batch = batch;
  c.seq = seq64;
  c.tp = 1;
  if (result.link) {
    c.p2p_bandwidth_gbs = result.link->bandwidth_gbs;
    c.p2p_latency_us = result.link->effective_latency_us();
  }
  const auto value = [&](const Timing& t) {
    return o.statistic == ProfileOptions::Statistic::Mean ? t.mean_ms : t.median_ms;
  };
  c.op_overhead_ms = value(result.op_overhead);
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const LayerMeasurement& m = result.distinct[distinct_of[i]];
    LayerCost l;
    l.label = m.label;
    l.f_ms = value(m.f);
    l.b_ms = value(m.b);
    l.w_ms = value(m.w);
    l.r_ms = value(m.r);
    l.activation_bytes = m.activation_bytes;
    // B may keep more than F left (the output gradient it received stays for W, e.g. MoE and the
    // embedding); the costs model frees activation − wgrad at B, so it cannot express growth.
    l.wgrad_bytes = std::min(m.wgrad_bytes, m.activation_bytes);
    l.output_bytes = m.output_bytes;
    l.params = m.params;
    l.spread = std::max({m.f.spread(), m.b.spread(), m.w.spread(), o.recompute ? m.r.spread() : 0.0});
    c.layers.push_back(std::move(l));
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

std::string profile_table(const ProfileResult& r) {
  std::string out =
      fmt::format("{:<8} {:>5} {:>9} {:>9} {:>9} {:>9} {:>7} {:>11} {:>11} {:>11} {:>10}\n", "layer", "count",
                  "F ms", "B ms", "W ms", "R ms", "spread", "act KiB", "wgrad KiB", "temp KiB", "params");
  for (const LayerMeasurement& m : r.distinct) {
    const double spread = std::max({m.f.spread(), m.b.spread(), m.w.spread()});
    out +=
        fmt::format("{:<8} {:>5} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>6.1f}% {:>11} {:>11} {:>11} {:>10}\n",
                    m.label, m.layers.size(), m.f.median_ms, m.b.median_ms, m.w.median_ms, m.r.median_ms,
                    100.0 * spread, kib(m.activation_bytes), kib(m.wgrad_bytes),
                    kib(std::max({m.f_temp_bytes, m.b_temp_bytes, m.w_temp_bytes})), m.params);
  }
  double f = 0, b = 0, w = 0;
  for (const LayerCost& l : r.costs.layers) {
    f += l.f_ms;
    b += l.b_ms;
    w += l.w_ms;
  }
  out += fmt::format("model total: F {:.3f} ms, B {:.3f} ms, W {:.3f} ms per micro-batch of {} x {} tokens\n",
                     f, b, w, r.costs.micro_batch, r.costs.seq);
  out += fmt::format("per-op overhead: {:.4f} ms (p10 {:.4f}, p90 {:.4f})\n", r.op_overhead.median_ms,
                     r.op_overhead.p10_ms, r.op_overhead.p90_ms);
  if (r.link) {
    out += fmt::format(
        "link rank 0 <-> 1: latency {:.2f} us (fit {:.2f} us + {:.2f} us to wake a blocked receiver), "
        "bandwidth "
        "{:.3f} GB/s\n  one-way times:",
        r.link->effective_latency_us(), r.link->latency_us, r.link->blocked_extra_us, r.link->bandwidth_gbs);
    for (const auto& p : r.link->points) out += fmt::format(" {} B {:.1f} us;", p.bytes, p.one_way_us);
    out += "\n  receiver blocked in its wait:";
    for (const auto& p : r.link->blocked) out += fmt::format(" {} B {:.1f} us;", p.bytes, p.one_way_us);
    out += "\n";
  } else {
    out += fmt::format("link: not measured ({}); plans use the cluster's links\n", r.link_note);
  }
  out += fmt::format("device {}, {} rank{}, {:.1f} s\n", r.costs.device, r.ranks, r.ranks == 1 ? "" : "s",
                     r.seconds);
  return out;
}

}  // namespace octo::exec
