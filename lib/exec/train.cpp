#include "exec/train.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <new>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/system.hpp"
#include "core/units.hpp"
#include "exec/agree.hpp"
#include "exec/checkpoint.hpp"
#include "exec/memory.hpp"
#include "exec/report.hpp"
#include "exec/stop_signal.hpp"
#include "nn/data.hpp"
#include "nn/token_formats.hpp"
#include "plan/rank_layout.hpp"
#include "sim/trace.hpp"

#ifndef OCTO_DEFAULT_DATA
#define OCTO_DEFAULT_DATA ""
#endif

namespace octo::exec {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kDataRelative = "profiles/data/tiny-corpus.txt";

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Setup {
  std::optional<BackendDevice> device;
  ExecPlan plan;
  std::optional<nn::TokenData> data, validation;
  LoopOptions loop;
};

/// --val-batches K evaluates K global batches of windows drawn from the validation data: more
/// sequences than the data has distinct windows only draws the same windows again, and a K near
/// 2^31 would run for days instead of being refused.
void check_val_batches(int val_batches, const nn::TokenData& validation, const Plan& p) {
  const std::int64_t per_batch = sequences_per_step(p);
  const auto windows = static_cast<std::int64_t>(validation.windows(static_cast<int>(p.seq)));
  const std::int64_t most = std::max<std::int64_t>(1, (windows + per_batch - 1) / per_batch);
  if (val_batches > most)
    fail_usage(
        "--val-batches {}: {} sequences of {} tokens per global batch, but the validation data {} has "
        "only {} distinct windows (expected at most {})",
        val_batches, per_batch, p.seq + 1, validation.source(), windows, most);
}

/// The training data (`data_path`: --data, or the default corpus) and, with --val-data or
/// --val-split, the validation data; both checked against the model's vocabulary and sequence
/// length now, not mid-step.
void load_data(Setup& s, const TrainOptions& o, const std::string& data_path) {
  nn::TokenData all = nn::TokenData::load(data_path);
  if (!o.val_data_path.empty() && o.val_split > 0)
    fail_usage("--val-data {} and --val-split {:g}: give one of them", o.val_data_path, o.val_split);
  if (!o.val_data_path.empty()) {
    s.validation.emplace(nn::TokenData::load(o.val_data_path));
  } else if (o.val_split != 0) {
    if (!(o.val_split > 0 && o.val_split < 1))
      fail_usage("--val-split {:g}: expected a fraction between 0 and 1, exclusive", o.val_split);
    auto [train, validation] = nn::split_validation(all, o.val_split);
    all = std::move(train);
    s.validation.emplace(std::move(validation));
  }
  s.data.emplace(std::move(all));
  if (s.loop.val_every > 0 && !s.validation)
    fail_usage("--val-every {}: there is no validation data (give --val-data FILE or --val-split FRACTION)",
               s.loop.val_every);
  const Plan& p = s.plan.plan;
  for (const nn::TokenData* d : {&*s.data, s.validation ? &*s.validation : nullptr}) {
    if (!d) continue;
    d->check_vocabulary(s.plan.model.vocab);
    (void)d->sequences(0, p.micro_batch, static_cast<int>(p.seq));  // long enough for one window
  }
  if (s.validation) check_val_batches(s.loop.val_batches, *s.validation, p);
}

/// Refuses a run whose recorded figures (every op's span of every step on every rank, gathered on
/// each rank for the report) would not fit in this machine's memory.
void check_run_memory(const TrainOptions& o, const ExecPlan& plan, int ranks) {
  const std::int64_t physical = physical_memory_bytes();
  if (physical <= 0) return;
  std::size_t ops = 0;
  for (const auto& program : plan.plan.programs) ops = std::max(ops, program.size());
  // Per step: this rank's spans and stats, the gathered span table (two floats per op and rank)
  // and every rank's spans after the gather.
  const double per_step =
      static_cast<double>(ops) * (sizeof(SpanUs) + static_cast<double>(ranks) * (8 + sizeof(SpanUs))) +
      static_cast<double>(ranks) * sizeof(StepStats);
  const double need = per_step * o.steps;
  if (need > static_cast<double>(physical))
    throw Error(
        fmt::format("--steps {}: recording the run would need about {:.0f} GiB of memory ({} steps x {} ops "
                    "x {} ranks), more than this machine's {:.0f} GiB (expected fewer steps)",
                    o.steps, to_gib(need), o.steps, ops, ranks, to_gib(static_cast<double>(physical))),
        ErrorKind::TooLarge);
}

/// The plan's predicted peak of `rank`'s pipeline device at the executor's fp32 (exec/memory.hpp):
/// 0 bytes without a prediction; `repriced` when it had to be re-priced.
struct RankPeak {
  int device = 0;
  double bytes = 0;
  bool repriced = false;
  bool from_model = false;  ///< the model's parameter state, larger than the prediction
  double scratch = 0;       ///< the CPU kernels' attention scratch, included in `bytes`
  int rank = 0;
};

RankPeak predicted_rank_peak(const ExecPlan& plan, int rank) {
  RankPeak out;
  out.rank = rank;
  const std::vector<DeviceMemoryPrediction> predicted = predicted_memory(plan, out.repriced);
  const Plan& p = plan.plan;
  out.device = RankLayout(p.devices, p.tp, p.dp, p.ep).coords(rank).pp;
  const auto d = static_cast<std::size_t>(out.device);
  if (d < predicted.size()) out.bytes = static_cast<double>(predicted[d].peak_bytes);
  // What the model's own parameters take, when the costs priced fewer (an edited model, a costs
  // file that leaves the embedding out): a model's vocab edited to 2e9 passed as 3.5 MiB.
  const std::vector<std::int64_t> model = model_static_bytes(plan);
  if (d < model.size() && static_cast<double>(model[d]) > out.bytes) {
    out.bytes = static_cast<double>(model[d]);
    out.from_model = true;
  }
  // The CPU kernels' score scratch, which no prediction prices: 65536-token sequences ended in
  // std::bad_alloc at the first forward.
  const std::vector<std::int64_t> scratch = cpu_scratch_bytes(plan);
  if (d < scratch.size()) {
    out.scratch = static_cast<double>(scratch[d]);
    out.bytes += out.scratch;
  }
  return out;
}

/// The refusal of a CPU run whose `who` would need `need_bytes` by `basis` (the prediction, or the
/// model's parameter state where that is larger), more than the machine's `physical` bytes.
Error too_large_for_machine(const std::string& who, double need_bytes, const RankPeak& basis,
                            std::int64_t physical) {
  const std::string by =
      basis.from_model
          ? std::string(
                " by the fp32 parameter state of the model it runs (more than "
                "the plan's prediction: were the costs made for this model?)")
          : fmt::format(" by the plan's prediction{}", basis.repriced ? " (re-priced at fp32)" : "");
  const std::string scratch =
      basis.scratch > 0
          ? fmt::format(
                " with the {:.1f} GiB of scratch in which the CPU attention of rank {} computes its "
                "seq x seq scores",
                to_gib(basis.scratch), basis.rank)
          : std::string();
  return Error(
      fmt::format("{} would need about {:.1f} GiB of memory{}{}, more than this machine's {:.1f} GiB "
                  "(expected a plan that fits: more pipeline devices or machines, recompute, a smaller "
                  "micro-batch or seq)",
                  who, to_gib(need_bytes), by, scratch, to_gib(static_cast<double>(physical))),
      ErrorKind::TooLarge);
}

/// Refuses (TooLarge) a CPU run in which this rank alone would need more memory than the machine
/// has (local, before any data or layer is allocated; check_host_memory adds up the machine's ranks).
void check_rank_memory(const Backend& backend, const ExecPlan& plan, int rank) {
  if (!backend.tensors_in_host_memory()) return;
  const RankPeak mine = predicted_rank_peak(plan, rank);
  const std::int64_t physical = physical_memory_bytes();
  if (physical <= 0 || mine.bytes <= static_cast<double>(physical)) return;
  throw too_large_for_machine(fmt::format("rank {}", rank), mine.bytes, mine, physical);
}

/// Refuses (TooLarge) a CPU run whose ranks on this machine would together need more memory than
/// it has by the plan's prediction: the kernel would kill them in the middle of a step instead.
/// Collective over `world` (the machines are told apart by host name).
void check_host_memory(const Backend& backend, const ExecPlan& plan, Comm& world) {
  if (!backend.tensors_in_host_memory()) return;
  const RankPeak mine = predicted_rank_peak(plan, world.rank());
  // Per rank: its host name's hash in four exact 16-bit pieces, and its predicted peak in MiB.
  const std::uint64_t host = std::hash<std::string>{}(host_name());
  std::vector<float> row(5);
  for (int k = 0; k < 4; ++k)
    row[static_cast<std::size_t>(k)] = static_cast<float>((host >> (16 * k)) & 0xFFFF);
  row[4] = static_cast<float>(std::ceil(to_mib(mine.bytes)));
  std::vector<float> table(row.size() * static_cast<std::size_t>(world.size()));
  world.all_gather(row, table);
  double need_mib = 0;
  int here = 0;
  for (int r = 0; r < world.size(); ++r) {
    const float* at = &table[static_cast<std::size_t>(r) * row.size()];
    if (std::equal(at, at + 4, row.begin())) {
      need_mib += at[4];
      ++here;
    }
  }
  const std::int64_t physical = physical_memory_bytes();
  if (physical <= 0 || need_mib * kMiB <= static_cast<double>(physical)) return;
  throw too_large_for_machine(
      fmt::format("the plan's {} rank{} on this machine (rank {}, pipeline device {}: "
                  "{:.1f} GiB)",
                  here, here == 1 ? "" : "s", world.rank(), mine.device, to_gib(mine.bytes)),
      need_mib * kMiB, mine, physical);
}

Setup set_up(const Comm& world, const TrainOptions& o, const BackendRegistry& backends) {
  if (o.steps <= 0) fail_usage("--steps {}: expected a positive number of steps", o.steps);
  if (!(o.lr > 0) || !std::isfinite(o.lr)) fail_usage("--lr {}: expected a positive learning rate", o.lr);
  // The optimizer runs in fp32: a rate below its smallest positive value would train at 0.
  if (!(static_cast<float>(o.lr) > 0))
    fail_usage("--lr {:g}: 0 in fp32, the optimizer's precision (expected at least {:g})", o.lr,
               static_cast<double>(std::numeric_limits<float>::denorm_min()));
  if (!(o.timeout_s > 0)) fail_usage("--timeout {}: expected a positive number of seconds", o.timeout_s);
  // Inputs: the plan, every file of the training and validation data, the checkpoint being loaded.
  const std::string data_path = o.data_path.empty() ? default_data_path() : o.data_path;
  std::vector<std::string> inputs{o.plan_path, o.loop.load_path};
  for (const std::string& data : {data_path, o.val_data_path})
    if (!data.empty())
      for (std::string& f : nn::token_files(data)) inputs.push_back(std::move(f));
  const std::initializer_list<OutputPath> outputs = {
      {"--report", o.report_path}, {"--trace", o.trace_path}, {"--metrics", o.loop.metrics_path}};
  check_output_paths(outputs, inputs);
  if (!o.loop.save_dir.empty()) {
    check_save_dir(o.loop.save_dir, outputs);
    check_save_steps(o.loop.save_dir, o.steps, o.loop.save_every);
  }
  if (o.check && !o.loop.load_path.empty())
    fail_usage("--check compares a fresh model with the sequential reference: it cannot start from --load {}",
               o.loop.load_path);
  Setup s;
  s.loop = resolve_loop_options(o.loop, o.lr, o.steps);
  s.device.emplace(backends.get(o.backend).open({.exact_gemm = o.check}));
  s.plan = load_exec_plan(o.plan_path, world.size());
  check_run_memory(o, s.plan, world.size());
  check_rank_memory(backends.get(o.backend), s.plan, world.rank());
  load_data(s, o, data_path);
  return s;
}

void print_check(const GradientCheck& c, double tolerance) {
  fmt::print("gradient check (step 0, {} layers against the sequential reference):\n", c.layer_diff.size());
  for (std::size_t i = 0; i < c.layer_diff.size(); ++i)
    fmt::print("  layer {:>3} {:<10} max relative difference {:.3e}\n", i, c.layer_label[i], c.layer_diff[i]);
  fmt::print(
      "largest relative difference {:.3e} (layer {} {}); loss {:.6f} vs reference {:.6f} (relative {:.3e}); "
      "tolerance {:.0e}: {}\n",
      c.max_diff, c.worst_layer,
      c.worst_layer >= 0 ? c.layer_label[static_cast<std::size_t>(c.worst_layer)] : "", c.loss,
      c.reference_loss, c.loss_diff, tolerance, c.passed(tolerance) ? "PASSED" : "FAILED");
}

GradientCheckSummary check_summary(const GradientCheck& c, double tolerance) {
  GradientCheckSummary out;
  out.max_relative_difference = c.max_diff;
  out.worst_layer = c.worst_layer;
  out.layer_relative_difference = c.layer_diff;
  out.loss = c.loss;
  out.reference_loss = c.reference_loss;
  out.loss_relative_difference = c.loss_diff;
  out.tolerance = tolerance;
  out.passed = c.passed(tolerance);
  return out;
}

/// The kind of a set-up failure (main() turns it into the exit code).
ErrorKind kind_of(const std::exception& e) {
  if (const auto* error = dynamic_cast<const Error*>(&e)) return error->kind();
  if (dynamic_cast<const std::bad_alloc*>(&e)) return ErrorKind::TooLarge;
  return ErrorKind::Runtime;
}

}  // namespace

std::string default_data_path() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(kDataRelative, ec)) return kDataRelative;
  const std::string built = OCTO_DEFAULT_DATA;
  if (!built.empty() && fs::is_regular_file(built, ec)) return built;
  fail("no --data given, and the default text was found neither at ./{} nor at {}", kDataRelative,
       built.empty() ? std::string("<unknown source tree>") : built);
}

TrainResult train(Comm& world, const TrainOptions& o, const BackendRegistry& backends) {
  TrainResult result;
  world.set_timeout(
      std::chrono::milliseconds(static_cast<std::int64_t>(std::max(o.timeout_s, 0.001) * kMsPerS)));
  log::set_rank(world.rank());

  // Set-up: local work only, then every rank learns whether some rank failed, so a bad plan or a
  // world-size mismatch ends the job cleanly with one message, before any compute. `agreed_ok`
  // runs one step and agrees on it: the lowest failing rank reports, every rank gets its error kind.
  std::optional<Setup> setup;
  const auto agreed_ok = [&](const auto& step) {
    std::string error;
    ErrorKind kind = ErrorKind::Runtime;
    try {
      step();
    } catch (const std::exception& e) {
      error = e.what();
      kind = kind_of(e);
    }
    const auto failed = agree_on_failure(world, error.empty() ? std::nullopt : std::optional(kind));
    if (!failed) return true;
    result.setup_failure = failed->kind;
    if (world.rank() == failed->rank) result.error = error;
    return false;
  };
  if (!agreed_ok([&] { setup.emplace(set_up(world, o, backends)); })) return result;
  // The ranks on each machine against its memory: collective, so after every rank has set up.
  if (!agreed_ok([&] { check_host_memory(backends.get(o.backend), setup->plan, world); })) return result;

  const ExecPlan& plan = setup->plan;
  const Plan& p = plan.plan;
  nn::Device& device = setup->device->device();
  const nn::TokenData& data = *setup->data;
  RuntimeOptions ro;
  ro.seed = o.seed;
  ro.optimizer.lr = static_cast<float>(o.lr);
  ro.optimizer.weight_decay = setup->loop.weight_decay;
  ro.fault = o.fault;
  // The transfers' communicator (NCCL for a CUDA device); host-memory collectives stay on `world`.
  std::unique_ptr<Comm> transport = setup->device->make_transport(world);
  Comm& comm = transport ? *transport : world;
  comm.set_timeout(world.timeout());
  Runtime runtime(plan, comm, device, data, ro);
  TrainingLoop loop(runtime, world, device, setup->loop,
                    {.plan_path = o.plan_path,
                     .steps = o.steps,
                     .seed = o.seed,
                     .train = &data,
                     .validation = setup->validation ? &*setup->validation : nullptr,
                     .fault = o.fault});
  const bool printer = runtime.owns_lm_head() && runtime.replica() == 0 && runtime.coords().tp == 0;
  const double tokens =
      static_cast<double>(p.microbatches) * p.micro_batch * static_cast<double>(p.seq) * p.dp;

  if (world.rank() == 0) {
    fmt::print(
        "octorun: {} ({}), model {}: {} pipeline device{} x dp {} x tp {} (ep {}, zero {}), {} stages, {} "
        "micro-batches of {} x {} tokens; backend {}, transport {}, {} ranks; data {} ({}, {} {} tokens){}\n",
        o.plan_path, p.method.empty() ? "unnamed method" : p.method, plan.model.name, p.devices,
        p.devices == 1 ? "" : "s", p.dp, p.tp, p.ep, p.zero, p.stages.size(), p.microbatches, p.micro_batch,
        p.seq, o.backend, world.backend(), world.size(), data.source(), data.format(), data.size(),
        nn::to_string(data.type()),
        setup->validation ? fmt::format("; validation {} ({} tokens)", setup->validation->source(),
                                        setup->validation->size())
                          : std::string());
    std::fflush(stdout);
  }
  if (const TrainingLoop::Resumed resumed = loop.resume(); resumed.failed) {
    result.setup_failure = resumed.kind;  // a checkpoint that does not load under this plan, or --metrics
    result.error = resumed.error;
    return result;
  }
  if (loop.first_step() >= o.steps) {
    if (world.rank() == 0)
      fmt::print("octorun: the checkpoint is at step {}: nothing left to train for --steps {}\n",
                 loop.first_step(), o.steps);
    return result;
  }

  std::vector<StepStats> steps;
  for (std::int64_t s = loop.first_step(); s < o.steps; ++s) {
    const auto start = Clock::now();
    StepStats st = runtime.step(s, loop.next_sample());
    if (o.check && s == 0) {
      result.check = check_gradients(runtime, world, device, data, o.seed, s, st.loss);
      if (world.rank() == 0) {
        print_check(*result.check, o.check_tolerance);
        std::fflush(stdout);
      }
    }
    const auto before_update = Clock::now();
    const StepUpdate update = loop.update(s);
    if (update.skipped()) {
      // As Megatron-LM stops on a NaN gradient norm: nothing of this step is kept; the last good
      // parameters are saved (with --save) for a restart at a lower rate.
      // A state that is itself not finite is not saved (save_checkpoint refuses it, on every rank).
      std::string saved, not_saved;
      try {
        saved = loop.save_before(s);
      } catch (const Error& e) {
        not_saved = e.what();
      }
      result.diverged = fmt::format(
          "step {}: the gradient norm is {}: training stopped before the step's update (lower --lr, or check "
          "the data){}",
          s, std::isnan(update.grad_norm) ? "NaN" : "infinite",
          !not_saved.empty()
              ? fmt::format("; the parameters after step {} were not saved: {}", s - 1, not_saved)
          : saved.empty() ? std::string()
                          : fmt::format("; the parameters after step {} are saved in {}", s - 1, saved));
      break;
    }
    st.update_ms = ms_since(before_update);
    const double wall_ms = ms_since(start);
    const StepOutcome outcome = loop.finish(s, st, update, wall_ms);
    if (printer && !o.quiet &&
        (s % std::max(o.print_every, 1) == 0 || s + 1 == o.steps || outcome.val_loss)) {
      fmt::print("step {:>5}  loss {:.4f}{}  lr {:.3e}  grad norm {:.3f}{}  {:>9.0f} tokens/s  {:8.1f} ms\n",
                 s, st.loss,
                 outcome.val_loss ? fmt::format("  val loss {:.4f}", *outcome.val_loss) : std::string(),
                 update.lr, update.grad_norm, update.clip_factor < 1 ? " (clipped)" : "",
                 tokens / (wall_ms / kMsPerS), wall_ms);
      std::fflush(stdout);
    }
    if (!outcome.saved.empty() && world.rank() == 0 && !o.quiet) {
      fmt::print("saved checkpoint {}\n", outcome.saved);
      std::fflush(stdout);
    }
    st.spans.shrink_to_fit();
    steps.push_back(std::move(st));
    if (const int sig = loop.stop_requested(); sig != 0 && s + 1 < o.steps) {
      const std::string saved = !outcome.saved.empty() ? outcome.saved : loop.save_at_stop(s, update.lr);
      result.stopped = fmt::format(
          "signal {} ({}): stopped after step {} of {}{}", sig, sig == SIGUSR1 ? "SIGUSR1" : "SIGUSR2", s,
          o.steps,
          !saved.empty() ? fmt::format("; the checkpoint of step {} is {}: resume with --load", s + 1, saved)
          : o.loop.save_dir.empty() ? std::string("; nothing was saved (no --save)")
                                    : std::string());
      break;
    }
  }

  if (steps.empty()) return result;  // the first step diverged: nothing was measured
  const RunStats stats = gather_stats(plan, steps, world);
  result.losses = stats.losses;
  RunReport& report = result.report;
  report.plan = o.plan_path;
  report.method = p.method;
  report.model = plan.model.name;
  report.backend = o.backend;
  report.transport = world.backend();
  report.world_size = world.size();
  report.devices = p.devices;
  report.dp = p.dp;
  report.stages = static_cast<int>(p.stages.size());
  report.microbatches = p.microbatches;
  report.micro_batch = p.micro_batch;
  report.seq = p.seq;
  report.seed = o.seed;
  report.lr = o.lr;
  report.warmup_steps = o.warmup_steps;
  report.measured = measure(plan, stats, o.warmup_steps);
  report.predicted = p.predicted;
  report.predicted_with_measured_costs = resimulate(plan, report.measured);
  if (result.check) report.check = check_summary(*result.check, o.check_tolerance);
  report.memory = compare_memory(plan, held_bytes(runtime), steps, world);
  const Measurement& measured = report.measured;

  if (world.rank() == 0) {
    const auto pred = [&](double Prediction::*field, double scale) {
      return p.predicted ? fmt::format("{:.1f}", (*p.predicted).*field * scale) : std::string("n/a");
    };
    fmt::print(
        "measured over {} step(s) after {} warm-up: iteration {:.2f} ms (pipeline {:.2f} ms, plan predicts "
        "{} ms), bubble {:.1f} % (plan predicts {} %), {:.0f} tokens/s, runtime overhead {:.1f} us/op\n",
        measured.measured_steps, std::min(o.warmup_steps, static_cast<int>(steps.size()) - 1),
        measured.iteration_time_ms, measured.pipeline_time_ms, pred(&Prediction::iteration_time_ms, 1.0),
        100.0 * measured.bubble_ratio, pred(&Prediction::bubble_ratio, 100.0), measured.tokens_per_s,
        measured.overhead_us_per_op);
    fmt::print("{}", memory_table(*report.memory));
    const Resimulation& re = report.predicted_with_measured_costs;
    if (re.error.empty())
      fmt::print("simulated with the measured op times: iteration {:.2f} ms, bubble {:.1f} %\n",
                 re.iteration_time_ms, 100.0 * re.bubble_ratio);
    // The outputs after the run: a failure here (/dev/full, a descriptor that takes no bytes) is
    // an output error of rank 0 alone, after every rank finished: exit 4, no abort of the others.
    const char* option = "--report";
    try {
      if (!o.report_path.empty()) {
        write_file_atomic(o.report_path, to_json(report).dump(2) + "\n");
        fmt::print("wrote {}\n", o.report_path);
      }
      option = "--trace";
      if (!o.trace_path.empty()) {
        write_trace(o.trace_path, measured_timeline(plan, stats));
        fmt::print("wrote {} (open in ui.perfetto.dev)\n", o.trace_path);
      }
    } catch (const Error& e) {
      result.output_error = fmt::format("{}: {}", option, e.what());
    }
    if (!loop.metrics_error().empty())
      result.output_error = result.output_error.empty() ? loop.metrics_error()
                                                        : loop.metrics_error() + "; " + result.output_error;
    std::fflush(stdout);
  }
  return result;
}

}  // namespace octo::exec
