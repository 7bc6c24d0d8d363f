#include "exec/profiler.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>

#include "core/error.hpp"
#include "nn/data.hpp"
#include "nn/model.hpp"

namespace octo::exec {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kKiB = 1024.0;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

/// Counter-based values so every rank and every run feeds the layers the same inputs.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
/// Uniform in [-scale·√3, scale·√3): standard deviation `scale`.
std::vector<float> noise(std::size_t n, std::uint64_t seed, float scale) {
  std::vector<float> v(n);
  const float k = scale * std::sqrt(3.0f) * 2.0f / 16777216.0f;
  for (std::size_t i = 0; i < n; ++i)
    v[i] = (static_cast<float>(mix(seed * 0x100000001b3ULL + i) >> 40) - 8388608.0f) * k;
  return v;
}

nn::MicroBatch synthetic_batch(int batch, int seq, std::int64_t vocab, std::uint64_t seed) {
  nn::MicroBatch mb;
  mb.batch = batch;
  mb.seq = seq;
  const auto n = static_cast<std::size_t>(batch) * static_cast<std::size_t>(seq);
  mb.tokens.resize(n);
  mb.targets.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    mb.tokens[i] = static_cast<std::int32_t>(mix(seed + 2 * i) % static_cast<std::uint64_t>(vocab));
    mb.targets[i] = static_cast<std::int32_t>(mix(seed + 2 * i + 1) % static_cast<std::uint64_t>(vocab));
  }
  return mb;
}

std::string kib(std::int64_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / kKiB); }

/// Samples of all ranks pooled: rank r writes its `mine` into slot r, the sum gives everyone all.
std::vector<double> pool(Comm& world, const std::vector<double>& mine) {
  const std::size_t n = mine.size();
  const auto ranks = static_cast<std::size_t>(world.size());
  std::vector<float> all(n * ranks, 0.0f);
  for (std::size_t i = 0; i < n; ++i)
    all[static_cast<std::size_t>(world.rank()) * n + i] = static_cast<float>(mine[i]);
  if (ranks > 1) world.all_reduce(all);
  return {all.begin(), all.end()};
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

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    }
  }
  return "unknown CPU";
}

/// Measures one distinct layer (model layer `index`) on this rank.
struct LayerRun {
  std::vector<double> f, b, w, r;
  std::int64_t activation = 0, wgrad = 0, output = 0, params = 0;
  std::int64_t f_temp = 0, b_temp = 0, w_temp = 0;
};

LayerRun measure_layer(const ModelSpec& model, std::size_t index, nn::Device& device, const ProfileOptions& o,
                       int batch, int seq, float loss_scale) {
  nn::StageNet net(model, index, index + 1, o.seed, device);
  const std::size_t boundary = net.boundary_elements(batch, seq);
  const std::vector<float> x_host =
      net.has_embedding() ? std::vector<float>{} : noise(boundary, o.seed * 7 + index, 1.0f);
  const std::vector<float> dy_host =
      net.has_lm_head() ? std::vector<float>{} : noise(boundary, o.seed * 11 + index, loss_scale);
  LayerRun out;
  out.params = static_cast<std::int64_t>(net.param_count());
  const auto in_use = [&] { return static_cast<std::int64_t>(device.bytes_in_use()); };
  const auto peak = [&] { return static_cast<std::int64_t>(device.peak_bytes()); };

  for (int rep = 0; rep < o.warmup + o.reps; ++rep) {
    const bool measured = rep >= o.warmup;
    const nn::MicroBatch mb =
        synthetic_batch(batch, seq, model.vocab, o.seed + static_cast<std::uint64_t>(rep));
    {
      nn::StageContext ctx = net.make_context(mb, loss_scale);
      const std::int64_t base = in_use();  // the context's token ids only
      nn::Buffer x = device.upload(std::span<const float>(x_host));
      nn::Buffer dy = device.upload(std::span<const float>(dy_host));
      const auto dy_bytes = static_cast<std::int64_t>(dy.bytes());
      device.synchronize();

      std::int64_t start = in_use();
      device.reset_peak();
      auto t0 = Clock::now();
      nn::Buffer y = net.forward(ctx, std::move(x), true);
      device.synchronize();
      auto t1 = Clock::now();
      const std::int64_t after_f = in_use();
      const std::int64_t activation = after_f - base - dy_bytes - static_cast<std::int64_t>(y.bytes());
      const std::int64_t f_temp = peak() - std::max(start, after_f);
      const auto y_bytes = static_cast<std::int64_t>(y.bytes());
      y.reset();

      start = in_use();
      device.reset_peak();
      auto t2 = Clock::now();
      nn::Buffer dx = net.backward_input(ctx, std::move(dy));
      device.synchronize();
      auto t3 = Clock::now();
      const std::int64_t after_b = in_use();
      const std::int64_t wgrad = after_b - base - static_cast<std::int64_t>(dx.bytes());
      const std::int64_t b_temp = peak() - std::max(start, after_b);
      dx.reset();

      start = in_use();
      device.reset_peak();
      auto t4 = Clock::now();
      net.backward_weight(ctx);
      device.synchronize();
      auto t5 = Clock::now();
      const std::int64_t after_w = in_use();
      const std::int64_t w_temp = peak() - std::max(start, after_w);
      if (after_w != base)
        fail(
            "profile: layer {} ({}) leaves {} bytes allocated after W (expected none beyond its micro-batch "
            "context): its memory cannot be attributed",
            index, model.layers[index].label, after_w - base);
      if (rep == 0) {
        out.activation = activation;
        out.wgrad = wgrad;
        out.output = net.has_lm_head() ? 0 : y_bytes;
      } else if (activation != out.activation || wgrad != out.wgrad) {
        fail(
            "profile: layer {} ({}) keeps {} / {} bytes for B / W in one repetition and {} / {} in another "
            "(expected the same every time)",
            index, model.layers[index].label, out.activation, out.wgrad, activation, wgrad);
      }
      out.f_temp = std::max(out.f_temp, f_temp);
      out.b_temp = std::max(out.b_temp, b_temp);
      out.w_temp = std::max(out.w_temp, w_temp);
      if (measured) {
        out.f.push_back(ms_between(t0, t1));
        out.b.push_back(ms_between(t2, t3));
        out.w.push_back(ms_between(t4, t5));
      }
    }
    if (o.recompute) {
      nn::StageContext ctx = net.make_context(mb, loss_scale);
      nn::Buffer x = device.upload(std::span<const float>(x_host));
      nn::Buffer y = net.forward(ctx, std::move(x), false);
      y.reset();
      device.synchronize();
      auto t0 = Clock::now();
      net.recompute(ctx);
      device.synchronize();
      auto t1 = Clock::now();
      if (measured) out.r.push_back(ms_between(t0, t1));
    }
  }
  if (!o.recompute) out.r = out.f;
  return out;
}

/// Ping-pong between ranks 0 and 1 through the runtime's Comm; other ranks only join the pooling.
std::optional<LinkMeasurement> measure_link(Comm& world, const ProfileOptions& o,
                                            std::size_t boundary_floats) {
  if (world.size() < 2 || !o.link) return std::nullopt;
  std::vector<std::size_t> sizes = {1, 64, 1024, 16384, 262144, boundary_floats, 4 * boundary_floats};
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  sizes.erase(std::remove(sizes.begin(), sizes.end(), std::size_t{0}), sizes.end());
  const int me = world.rank();
  const int tag = 7;
  std::vector<double> one_way(sizes.size(), 0.0);
  world.barrier();
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    std::vector<float> buf(sizes[k], 1.0f), back(sizes[k]);
    std::vector<double> rtt;
    const int warm = 3;
    for (int rep = 0; rep < warm + o.link_reps && me < 2; ++rep) {
      const auto t0 = Clock::now();
      if (me == 0) {
        Request s = world.isend(buf, 1, tag);
        Request r = world.irecv(back, 1, tag);
        s.wait();
        r.wait();
      } else {
        Request r = world.irecv(back, 0, tag);
        r.wait();
        Request s = world.isend(back, 0, tag);
        s.wait();
      }
      if (rep >= warm) rtt.push_back(ms_between(t0, Clock::now()) * 1000.0);
    }
    if (me == 0) one_way[k] = summarize(rtt).median_ms / 2.0;  // summarize is unit-agnostic: µs here
    world.barrier();
  }
  const std::vector<double> pooled = pool(world, one_way);
  std::vector<LinkMeasurement::Point> points;
  for (std::size_t k = 0; k < sizes.size(); ++k)
    points.push_back({static_cast<std::int64_t>(sizes[k] * sizeof(float)), pooled[k]});  // rank 0's slot
  return fit_link(std::move(points));
}

/// The near-empty compute op: a micro-batch context made and dropped (F's share of the
/// runtime's fixed cost) and one poll of a pending receive (the runtime polls between ops).
Timing measure_overhead(const ModelSpec& model, nn::Device& device, Comm& world, const ProfileOptions& o,
                        int batch, int seq, float loss_scale) {
  // The smallest stage the model allows: the embedding alone (it only gathers rows).
  nn::StageNet net(model, 0, 1, o.seed, device);
  const nn::MicroBatch mb = synthetic_batch(batch, seq, model.vocab, o.seed);
  const int me = world.rank();
  const bool polls = world.size() >= 2 && me < 2;
  std::vector<float> slot(1, 0.0f);
  const int tag = 9;
  Request pending;
  if (polls) pending = world.irecv(slot, 1 - me, tag);
  std::vector<double> samples;
  const int reps = std::max(50, 10 * o.reps);
  for (int rep = 0; rep < o.warmup + reps; ++rep) {
    const auto t0 = Clock::now();
    {
      nn::StageContext ctx = net.make_context(mb, loss_scale);
      (void)ctx;
    }
    if (polls) (void)pending.test();
    device.synchronize();
    const auto t1 = Clock::now();
    if (rep >= o.warmup) samples.push_back(ms_between(t0, t1));
  }
  if (polls) {
    std::vector<float> one(1, 1.0f);
    Request s = world.isend(one, 1 - me, tag);
    s.wait();
    pending.wait();
  }
  return summarize(pool(world, samples));
}

}  // namespace

Timing summarize(std::vector<double> v) {
  Timing t;
  if (v.empty()) return t;
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) {
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
  };
  t.median_ms = at(0.5);
  t.p10_ms = at(0.1);
  t.p90_ms = at(0.9);
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

std::string describe_device(const nn::Device& device) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown-host");
  const std::string what = device.name() == "cpu" ? cpu_model() : std::string(device.name());
  return fmt::format("{} ({})", host, what);
}

ProfileResult profile_model(const ModelSpec& spec, nn::Device& device, Comm& world, const ProfileOptions& o,
                            const ProgressFn& progress) {
  const auto start = Clock::now();
  if (o.reps < 1) fail("profile: --reps {}: expected at least one measured repetition", o.reps);
  if (o.warmup < 0) fail("profile: --warmup {}: expected zero or more warm-up repetitions", o.warmup);
  ModelSpec model = spec;
  if (o.micro_batch > 0) model.training.micro_batch = o.micro_batch;
  if (o.seq > 0) model.seq_len = o.seq;
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

  for (std::size_t d = 0; d < result.distinct.size(); ++d) {
    LayerMeasurement& m = result.distinct[d];
    const std::size_t index = m.layers.front();
    world.barrier();
    const LayerRun run = measure_layer(model, index, device, o, batch, seq, loss_scale);
    m.f = summarize(pool(world, run.f));
    m.b = summarize(pool(world, run.b));
    m.w = summarize(pool(world, run.w));
    m.r = summarize(pool(world, run.r));
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
      progress(fmt::format(
          "  [{}/{}] '{}' ({}, layers {}): F {:.3f}  B {:.3f}  W {:.3f}  R {:.3f} ms, spread {:.1f} "
          "%, activations {} KiB",
          d + 1, result.distinct.size(), m.label, layer_key(model, index), where, m.f.median_ms,
          m.b.median_ms, m.w.median_ms, m.r.median_ms,
          100.0 * std::max({m.f.spread(), m.b.spread(), m.w.spread()}), kib(m.activation_bytes)));
    }
  }

  world.barrier();
  result.op_overhead = measure_overhead(model, device, world, o, batch, seq, loss_scale);
  if (printer)
    progress(fmt::format("  per-op overhead {:.4f} ms (median near-empty op)", result.op_overhead.median_ms));

  const std::size_t boundary = static_cast<std::size_t>(batch) * static_cast<std::size_t>(seq) *
                               static_cast<std::size_t>(model.hidden);
  result.link = measure_link(world, o, boundary);
  if (printer && result.link)
    progress(fmt::format("  link rank 0 <-> 1: latency {:.2f} us, bandwidth {:.2f} GB/s ({} message sizes)",
                         result.link->latency_us, result.link->bandwidth_gbs, result.link->points.size()));

  CostProfile& c = result.costs;
  c.source = CostProfile::Source::Measured;
  c.model = model.name;
  c.device = describe_device(device);
  c.backend = o.backend;
  c.date = iso_now();
  c.origin = "<octorun profile>";
  c.micro_batch = batch;
  c.seq = seq64;
  c.tp = 1;
  if (result.link) {
    c.p2p_bandwidth_gbs = result.link->bandwidth_gbs;
    c.p2p_latency_us = result.link->latency_us;
  }
  c.op_overhead_ms = result.op_overhead.median_ms;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const LayerMeasurement& m = result.distinct[distinct_of[i]];
    LayerCost l;
    l.label = m.label;
    l.f_ms = m.f.median_ms;
    l.b_ms = m.b.median_ms;
    l.w_ms = m.w.median_ms;
    l.r_ms = m.r.median_ms;
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
    out += fmt::format("link rank 0 <-> 1: latency {:.2f} us, bandwidth {:.3f} GB/s; one-way times:",
                       r.link->latency_us, r.link->bandwidth_gbs);
    for (const auto& p : r.link->points) out += fmt::format(" {} B {:.1f} us;", p.bytes, p.one_way_us);
    out += "\n";
  } else {
    out += "link: not measured (one rank; launch with mpirun -np 2 to measure it)\n";
  }
  out += fmt::format("device {}, {} rank{}, {:.1f} s\n", r.costs.device, r.ranks, r.ranks == 1 ? "" : "s",
                     r.seconds);
  return out;
}

}  // namespace octo::exec
